"""The kit's ``DocumentStore`` on Cosmos DB (NoSQL API), on the azure-cosmos aio client.

A commit is one request: ``create_item`` (a single create) or one ``execute_item_batch`` (a
transactional batch in one partition). Errors are translated into the kit's errors by what a
redelivery can fix, with one table (``classify_status``) for a single request's status and for
the failing operation of a transactional batch; the request charge of every call goes to a
sink (a telemetry adapter).

A batch that fails is not an HTTP error: Cosmos DB answers 207 Multi-Status, the failing
operation with its own status (and sub-status, and for a throttled one its retry-after), every
other one 424 Failed Dependency (learn.microsoft.com/azure/cosmos-db/nosql/transactional-batch;
learn.microsoft.com/rest/api/cosmos-db/http-status-codes-for-cosmosdb, 424). azure-cosmos reads
that body as a success (``aio/_asynchronous_request.py:186-192``: only >= 400 raises) and raises
``CosmosBatchOperationError`` from it (``aio/_cosmos_client_connection_async.py:2095-2104``): an
azure-core ``HttpResponseError``, not a ``CosmosHttpResponseError``, so the SDK's throttling
retries never see a throttled batch. ``batch_failure`` reads the failing operation;
``classify_status`` decides, as for a single request.

Client settings (``CLIENT_OPTIONS``, ``create_client``): every operation carries an absolute
timeout so that a create, a conflict read and the settlement fit inside one message lock even
before the host renews it, and the SDK's own throttling retries are capped below that timeout.
Non-idempotent writes are not retried by the SDK on connection errors (its default): an
ambiguous write is resolved by the redelivery, whose create then conflicts and is recognised as
a duplicate.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
from azure.core.exceptions import (
    ClientAuthenticationError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy, CosmosClient

from idempotent_consumer import (
    Condition,
    ConditionFailed,
    Create,
    DocumentExists,
    DocumentMissing,
    PartitionFull,
    Patch,
    StoreError,
    SystemicStoreError,
    TransientStoreError,
    Write,
    WriteRefused,
)

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

# Seconds. Two sequential operations (create, then the conflict read) plus settlement must fit
# in the 60 s lock; the host also renews the lock while the function runs. A deadline of the
# adapter's own (``_within_deadline``), not only the SDK's ``timeout=``.
OPERATION_TIMEOUT_S = 20
CLIENT_OPTIONS: dict[str, Any] = {
    "connection_timeout": 5,  # TCP/TLS connect
    "read_timeout": 15,  # waiting for one response
    "retry_total": 4,  # throttling (429) retries inside the SDK
    "retry_backoff_max": 10,  # cumulative throttling wait, below OPERATION_TIMEOUT_S
    "no_response_on_write": True,  # the body of a create is never used: don't download it
}

RequestChargeSink = Callable[[str, float], None]

_TRANSIENT_STATUS = {408, 410, 429, 449, 500, 502, 503, 504}
_SYSTEMIC_STATUS = {401, 403}
# (status, sub-status) pairs that mean "the moment" although their status alone means "the
# system" (azure.cosmos.http_constants.SubStatusCodes):
# - 403.3 WriteForbidden: sent to writes during a manual failover, a redirect to the new write
#   region (learn.microsoft.com/rest/api/cosmos-db/http-status-codes-for-cosmosdb, 403);
# - 404.1002 ReadSessionNotAvailable: the replica has not caught up with the session token yet;
#   the SDK's own session retry handles it (azure/cosmos/_retry_utility.py:203).
_TRANSIENT_SUB_STATUS = {(403, 3), (404, 1002)}
# 403.1014: the logical partition is at its 20 GB (learn.microsoft.com/azure/cosmos-db/
# concepts-limits, "Maximum storage across all items per (logical) partition"); the sub-status is
# the service's PARTITION_KEY_QUOTA_OVER_LIMIT (azure-sdk-for-rust, sdk/cosmos/azure_data_cosmos/
# src/constants.rs: 1014; azure-cosmos's SubStatusCodes has no name for it). Systemic, with a
# reason of its own (``PartitionFull``), whichever SDK path carries it: a whole request's answer
# (``CosmosHttpResponseError.sub_status``) or a batch operation's ``subStatusCode`` in a 207.
_PARTITION_FULL = (403, 1014)
_FAILED_DEPENDENCY = 424  # the other operations of a failed batch
# Modules whose ValueError means "the credential is unusable" (a key that does not decode, a
# token request refused), not "the request is wrong": azure-cosmos signing, azure-core's
# authentication policies, azure-identity.
_AUTHENTICATION_MODULES = (
    "azure.cosmos.auth",
    "azure.cosmos._auth_policy",
    "azure.cosmos.aio._auth_policy_async",
    "azure.core.pipeline.policies._authentication",
    "azure.identity",
)


def create_client(
    endpoint: str,
    credential: str | AsyncTokenCredential,
    *,
    connection_verify: bool = True,
    **overrides: Any,
) -> CosmosClient:
    """A Cosmos client with the kit's ``CLIENT_OPTIONS``: ``credential`` the account key, or an
    Entra ID credential the caller owns and closes (``CosmosClient.close()`` leaves its
    credential open). ``overrides`` are extra client options (a test passes a transport). One
    client per worker process: it owns the connection pool."""
    return CosmosClient(
        endpoint,
        credential=credential,
        connection_verify=connection_verify,
        **{**CLIENT_OPTIONS, **overrides},
    )


class CosmosDocumentStore:
    """The kit's ``DocumentStore`` on one container: each commit one ``create_item`` (a single
    create) or one transactional batch, each read a point read; every request's charge to the
    telemetry adapter. ``partition_full_runbook``: the app's runbook for a full logical
    partition, named in every ``PartitionFull`` this store raises (None: none named)."""

    def __init__(
        self,
        container: ContainerProxy,
        on_request_charge: RequestChargeSink | None = None,
        *,
        operation_timeout_s: float = OPERATION_TIMEOUT_S,
        partition_full_runbook: str | None = None,
    ) -> None:
        self._container = container
        self._on_request_charge = on_request_charge
        self._timeout_s = operation_timeout_s
        self._runbook = partition_full_runbook

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        """One ``create_item`` for a single create, else one transactional batch; a write
        refused for what is stored raises its ``WriteRefused`` (``refused_write``)."""
        single = len(writes) == 1 and isinstance(writes[0], Create)
        operation = "create" if single else "batch"
        try:
            if single:
                await _within_deadline(
                    self._timeout_s,
                    self._container.create_item(
                        dict(writes[0].document),  # type: ignore[union-attr]
                        timeout=self._timeout_s,
                        response_hook=self._charge_hook(operation),
                    ),
                )
            else:
                await _within_deadline(
                    self._timeout_s,
                    self._container.execute_item_batch(
                        [batch_operation(write) for write in writes],
                        partition_key=partition_key,
                        timeout=self._timeout_s,
                        response_hook=self._charge_hook(operation),
                    ),
                )
        except cosmos_errors.CosmosBatchOperationError as error:
            self._charge_of_error(operation, error)
            refused = refused_write(batch_failure(error), writes)
            if refused is None:
                _raise_classified(error, writing=True, runbook=self._runbook)
            raise refused from error
        except cosmos_errors.CosmosResourceExistsError as error:
            self._charge_of_error(operation, error)
            raise DocumentExists(0, writes[0].document_id) from error
        except Exception as error:  # noqa: BLE001 - translated, or re-raised as is
            self._charge_of_error(operation, error)
            _raise_classified(error, writing=True, runbook=self._runbook)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        try:
            document: Mapping[str, Any] = await _within_deadline(
                self._timeout_s,
                self._container.read_item(
                    document_id,
                    partition_key=partition_key,
                    timeout=self._timeout_s,
                    response_hook=self._charge_hook("read"),
                ),
            )
        except cosmos_errors.CosmosResourceNotFoundError as error:
            self._charge_of_error("read", error)
            return None
        except Exception as error:  # noqa: BLE001 - translated, or re-raised as is
            self._charge_of_error("read", error)
            _raise_classified(error, writing=False, runbook=self._runbook)
        return document

    def _charge_of_error(self, operation: str, error: Exception) -> None:
        # The SDK calls response hooks on success only; a conflict costs RU too.
        headers = getattr(error, "headers", None)
        if headers is not None:
            self._record_charge(operation, headers)

    def _charge_hook(self, operation: str) -> Callable[[Mapping[str, str], Any], None] | None:
        if self._on_request_charge is None:
            return None

        def hook(headers: Mapping[str, str], _body: Any) -> None:
            self._record_charge(operation, headers)

        return hook

    def _record_charge(self, operation: str, headers: Mapping[str, str]) -> None:
        charge = headers.get("x-ms-request-charge")
        if charge is not None and self._on_request_charge is not None:
            self._on_request_charge(operation, float(charge))


async def _within_deadline[T](timeout_s: float, operation: Awaitable[T]) -> T:
    """The operation, cancelled ``timeout_s`` (``OPERATION_TIMEOUT_S``) after it started,
    whatever its attempt is doing. The SDK's ``timeout=`` is checked only before each attempt
    (azure/cosmos/aio/_retry_utility_async.py:133-136, 276-279) and caps only an attempt's
    connect timeout (azure/cosmos/aio/_retry_utility_async.py:380 with
    azure/cosmos/_retry_utility.py:386-398); its read timeout is the client's, whatever is left
    (azure/cosmos/aio/_asynchronous_request.py:73-76, given to aiohttp as ``sock_read``,
    azure/core/pipeline/transport/_aiohttp.py:349-351). An attempt started just before the
    timeout could thus last ``read_timeout`` more: 35 s, and a duplicate 80 s, past the lock.
    Cancelled, a write may still have committed: the ambiguous write the redelivery resolves."""
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            return await operation
    except TimeoutError:
        if not deadline.expired():
            raise
        raise TimeoutError(f"no answer within the {timeout_s:g} s operation deadline") from None


def batch_operation(write: Write) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """One write as ``execute_item_batch`` takes it (azure/cosmos/_base.py
    ``_format_batch_operations``: a patch's ``filter_predicate`` becomes the operation's
    ``condition``, learn.microsoft.com/azure/cosmos-db/partial-document-update)."""
    if isinstance(write, Create):
        return ("create", (dict(write.document),), {})
    options: dict[str, Any] = {}
    if write.condition is not None:
        options["filter_predicate"] = filter_predicate(write.condition)
    return ("patch", (write.document_id, list(write.operations)), options)


def filter_predicate(condition: Condition) -> str:
    """A ``Condition`` as Cosmos DB's filter predicate (``FROM c WHERE ...``). A field compared
    below a limit its default satisfies may be missing (``NOT IS_DEFINED``); a comparison with a
    missing field is undefined, so otherwise it fails, as ``Condition.holds_for`` says. Names
    are the stored field names (identifiers); values JSON literals (Cosmos DB's string literals
    take double quotes and JSON's escapes: learn.microsoft.com/azure/cosmos-db/nosql/query/
    constants)."""
    clauses: list[str] = []
    for name, limit in condition.below.items():
        field = _property(name)
        default = condition.defaults.get(name)
        if isinstance(default, int) and default < limit:
            clauses.append(f"(NOT IS_DEFINED({field}) OR {field} < {int(limit)})")
        else:
            clauses.append(f"{field} < {int(limit)}")
    for name, value in condition.equals.items():
        field = _property(name)
        literal = json.dumps(value)
        if name in condition.defaults and condition.defaults[name] == value:
            clauses.append(f"(NOT IS_DEFINED({field}) OR {field} = {literal})")
        else:
            clauses.append(f"{field} = {literal}")
    for name, floor in condition.at_least.items():
        clauses.append(f"{_property(name)} >= {int(floor)}")
    for room in condition.room:
        # Arithmetic in a filter predicate: it is a query's WHERE clause (learn.microsoft.com/
        # azure/cosmos-db/nosql/query/where, operators); undefined when a field is missing.
        counter, ceiling = _property(room.counter), _property(room.limit)
        sign = "-" if room.amount < 0 else "+"
        clauses.append(f"{counter} {sign} {abs(int(room.amount))} <= {ceiling}")
    return "FROM c WHERE " + (" AND ".join(clauses) or "true")


def _property(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a field name a filter predicate can name: {name!r}")
    return f"c.{name}"


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFUSALS: dict[int, Callable[[int, str], WriteRefused]] = {
    409: DocumentExists,  # a create met an existing id
    404: DocumentMissing,  # a patch named no document (the container exists: it answered 207)
    412: ConditionFailed,  # a patch's filter predicate (or if-match) did not hold
}


def refused_write(failure: BatchFailure, writes: Sequence[Write]) -> WriteRefused | None:
    """The write a 207 answer refused for what is stored, or None when the batch failed for
    another reason (classified as any failure). A 404 inside a 207 is the operation's document:
    a missing container fails the whole request before any operation runs."""
    refusal = _REFUSALS.get(failure.status)
    if refusal is None or failure.index is None or not 0 <= failure.index < len(writes):
        return None
    write = writes[failure.index]
    if refusal is DocumentExists and not isinstance(write, Create):
        return None
    if refusal is not DocumentExists and not isinstance(write, Patch):
        return None
    return refusal(failure.index, write.document_id)


@dataclass(frozen=True, slots=True)
class BatchFailure:
    """The operation of a transactional batch that failed (the others answered 424)."""

    index: int | None
    status: int
    sub_status: int | None
    retry_after_s: float | None


def batch_failure(error: cosmos_errors.CosmosBatchOperationError) -> BatchFailure:
    """The failing operation of a 207 answer: its ``statusCode``, ``subStatusCode`` and
    ``retryAfterMilliseconds`` (the service's per-operation fields, as the Java SDK reads them:
    ``BatchResponseParser.createBatchOperationResultFromJson`` and
    ``BatchRequestResponseConstants`` in azure-sdk-for-java). The SDK itself keeps only the
    status and index (``error_index``, ``status_code``); a sub-status or retry-after missing
    from the operation is taken from the response headers (``x-ms-substatus``,
    ``x-ms-retry-after-ms``), which the SDK passes as ``error.headers``."""
    responses = list(error.operation_responses or [])
    index = error.error_index if isinstance(error.error_index, int) else None
    failing: Mapping[str, Any] = {}
    if index is not None and 0 <= index < len(responses):
        failing = responses[index]
    status = _int(failing.get("statusCode"))
    if status is None or status < 400 or status == _FAILED_DEPENDENCY:
        # No index, or one that does not point at the failure: the first non-424 failure.
        index, failing = None, {}
        for position, response in enumerate(responses):
            code = _int(response.get("statusCode")) or 0
            if code >= 400 and code != _FAILED_DEPENDENCY:
                index, failing = position, response
                break
        status = _int(failing.get("statusCode")) or int(error.status_code or 0)
    headers: Mapping[str, Any] = error.headers or {}
    sub_status = _int(failing.get("subStatusCode"))
    if sub_status is None:
        sub_status = _int(headers.get("x-ms-substatus"))
    retry_after_ms = _float(failing.get("retryAfterMilliseconds"))
    if retry_after_ms is None:
        retry_after_ms = _float(headers.get("x-ms-retry-after-ms"))
    return BatchFailure(
        index,
        status,
        sub_status,
        None if retry_after_ms is None else max(0.0, retry_after_ms / 1000.0),
    )


def classify_status(
    status: int,
    sub_status: int | None,
    *,
    writing: bool,
    detail: str,
    retry_after_s: float | None = None,
    runbook: str | None = None,
) -> StoreError | None:
    """What a redelivery can fix about a Cosmos DB status: one table for a single request and
    for the failing operation of a batch. None: we cannot tell (a bug, or unknown).
    ``runbook``: named in a ``PartitionFull`` (``CosmosDocumentStore``)."""
    shown = f"{status}.{sub_status}" if sub_status else str(status)
    if (status, sub_status) == _PARTITION_FULL:
        return PartitionFull(f"Cosmos DB answered {shown}: {detail}", runbook=runbook)
    if (status, sub_status) in _TRANSIENT_SUB_STATUS:
        return TransientStoreError(
            f"Cosmos DB answered {shown}: {detail}", retry_after_s=retry_after_s
        )
    if status in _SYSTEMIC_STATUS or (status == 404 and writing):
        # 404 on a write: the database or container does not exist. (A 404 on the point read
        # means "no such order" and never reaches this function.)
        return SystemicStoreError(f"Cosmos DB answered {shown}: {detail}")
    if status in _TRANSIENT_STATUS:
        return TransientStoreError(
            f"Cosmos DB answered {shown}: {detail}", retry_after_s=retry_after_s
        )
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


def _raise_classified(error: Exception, *, writing: bool, runbook: str | None) -> NoReturn:
    translated = classify_error(error, writing=writing, runbook=runbook)
    if translated is None:
        # Unknown: re-raise as is; the core treats it as unexpected (abandon, stack trace).
        raise error
    raise translated from error


def classify_error(
    error: Exception, *, writing: bool, runbook: str | None = None
) -> StoreError | None:
    """Map an SDK or transport error to what a redelivery can fix; None if we cannot tell.
    ``runbook``: named in a ``PartitionFull`` (``CosmosDocumentStore``)."""
    if isinstance(error, cosmos_errors.CosmosBatchOperationError):
        failure = batch_failure(error)
        return classify_status(
            failure.status,
            failure.sub_status,
            writing=writing,
            detail=f"batch operation {failure.index} failed (the others 424)",
            retry_after_s=failure.retry_after_s,
            runbook=runbook,
        )
    if isinstance(error, cosmos_errors.CosmosHttpResponseError):
        headers: Mapping[str, Any] = getattr(error, "headers", None) or {}
        retry_after_ms = _float(headers.get("x-ms-retry-after-ms"))
        return classify_status(
            error.status_code or 0,
            error.sub_status,
            writing=writing,
            detail=_first_line(error),
            retry_after_s=None if retry_after_ms is None else retry_after_ms / 1000.0,
            runbook=runbook,
        )
    if isinstance(error, ClientAuthenticationError | binascii.Error) or (
        isinstance(error, ValueError) and _raised_by_authentication(error)
    ):
        # A credential that cannot sign or get a token fails every order alike: systemic.
        return SystemicStoreError(
            f"credential failed: {type(error).__name__}: {_first_line(error)}"
        )
    if isinstance(
        error,
        (
            cosmos_errors.CosmosClientTimeoutError,
            ServiceRequestError,
            ServiceResponseError,
            aiohttp.ClientError,
            asyncio.TimeoutError,
            ConnectionError,
        ),
    ):
        return TransientStoreError(f"{type(error).__name__}: {_first_line(error)}")
    return None


def _raised_by_authentication(error: BaseException) -> bool:
    traceback = error.__traceback__
    while traceback is not None:
        module = str(traceback.tb_frame.f_globals.get("__name__", ""))
        if module.startswith(_AUTHENTICATION_MODULES):
            return True
        traceback = traceback.tb_next
    return False


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__
