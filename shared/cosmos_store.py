"""The Cosmos DB (NoSQL API) adapter of the ``OrderStore`` port, on the azure-cosmos aio client.

A new order is one request: ``create_item`` (outbox off) or one ``execute_item_batch`` (outbox
on, order first so a conflict surfaces at index 0). Errors are translated into ``shared.errors``
by what a redelivery can fix; the request charge of every call goes to the telemetry adapter.

Client settings (see README "Timeouts and retries"): every operation carries an absolute timeout
so that create + conflict read + settlement fit inside one message lock even before the host
renews it, and the SDK's own throttling retries are capped below that timeout. Non-idempotent
writes are not retried by the SDK on connection errors (its default): an ambiguous write is
resolved by the redelivery, whose create then conflicts and is recognised as a duplicate.
"""

from __future__ import annotations

import asyncio
import binascii
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
from azure.core.exceptions import (
    ClientAuthenticationError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy, CosmosClient

from shared.config import Settings
from shared.errors import (
    OrderAlreadyExists,
    OrphanedDocument,
    StoreError,
    SystemicStoreError,
    TransientStoreError,
)

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

# Seconds. Two sequential operations (create, then the conflict read) plus settlement must fit
# in the 60 s lock; the host also renews the lock while the function runs.
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
    settings: Settings, *, credential: AsyncTokenCredential | None = None, **overrides: Any
) -> CosmosClient:
    """A Cosmos client with the account key, or else with ``credential``, which the caller
    owns and closes (``CosmosClient.close()`` leaves its credential open); the app passes
    ``default_credential()``. ``overrides`` are extra client options (the local stand-ins
    pass a transport). One client per worker process: it owns the connection pool."""
    if settings.cosmos_key:
        key_or_credential: Any = settings.cosmos_key
    elif credential is not None:
        key_or_credential = credential
    else:
        raise ValueError("COSMOS_KEY is unset: pass a credential (default_credential())")
    return CosmosClient(
        settings.cosmos_endpoint,
        credential=key_or_credential,
        connection_verify=settings.cosmos_verify_tls,
        **{**CLIENT_OPTIONS, **overrides},
    )


def default_credential() -> AsyncTokenCredential:
    """Entra ID for the account (managed identity in Azure; ``AZURE_CLIENT_ID`` selects a
    user-assigned one). The caller closes it."""
    from azure.identity.aio import DefaultAzureCredential  # only where it is used

    return DefaultAzureCredential()


class CosmosOrderStore:
    def __init__(
        self, container: ContainerProxy, on_request_charge: RequestChargeSink | None = None
    ) -> None:
        self._container = container
        self._on_request_charge = on_request_charge

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        partition_key = documents[0]["orderId"]
        operation = "create" if len(documents) == 1 else "batch"
        try:
            if operation == "create":
                await self._container.create_item(
                    dict(documents[0]),
                    timeout=OPERATION_TIMEOUT_S,
                    response_hook=self._charge_hook(operation),
                )
            else:
                await self._container.execute_item_batch(
                    [("create", (dict(document),)) for document in documents],
                    partition_key=partition_key,
                    timeout=OPERATION_TIMEOUT_S,
                    response_hook=self._charge_hook(operation),
                )
        except cosmos_errors.CosmosBatchOperationError as error:
            self._charge_of_error(operation, error)
            conflict = conflicting_document(error, documents)
            if conflict is None:
                _raise_classified(error, writing=True)
            if conflict == 0:
                raise OrderAlreadyExists(partition_key) from error
            raise OrphanedDocument(partition_key, str(documents[conflict]["id"])) from error
        except cosmos_errors.CosmosResourceExistsError as error:
            self._charge_of_error(operation, error)
            raise OrderAlreadyExists(partition_key) from error
        except Exception as error:  # noqa: BLE001 - translated, or re-raised as is
            self._charge_of_error(operation, error)
            _raise_classified(error, writing=True)

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        try:
            document: Mapping[str, Any] = await self._container.read_item(
                order_id,
                partition_key=order_id,
                timeout=OPERATION_TIMEOUT_S,
                response_hook=self._charge_hook("read"),
            )
        except cosmos_errors.CosmosResourceNotFoundError as error:
            self._charge_of_error("read", error)
            return None
        except Exception as error:  # noqa: BLE001 - translated, or re-raised as is
            self._charge_of_error("read", error)
            _raise_classified(error, writing=False)
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


def conflicting_document(
    error: cosmos_errors.CosmosBatchOperationError, documents: Sequence[Mapping[str, Any]]
) -> int | None:
    """The index of the batch operation that failed with 409, or None if the batch failed
    otherwise. The SDK reports the failing operation as ``error_index`` (the others answer 424,
    failed dependency); the per-operation statuses are checked too, so that a response whose
    index is missing or out of range is never read as a conflict on the order."""
    statuses = [
        int(response.get("statusCode", 0)) for response in (error.operation_responses or [])
    ]
    index = error.error_index
    if isinstance(index, int) and 0 <= index < len(statuses) and statuses[index] == 409:
        return index if index < len(documents) else None
    if error.status_code == 409 and 409 in statuses:
        found = statuses.index(409)
        return found if found < len(documents) else None
    return None


def _raise_classified(error: Exception, *, writing: bool) -> NoReturn:
    translated = _classify(error, writing=writing)
    if translated is None:
        # Unknown: re-raise as is; the core treats it as unexpected (abandon, stack trace).
        raise error
    raise translated from error


def _classify(error: Exception, *, writing: bool) -> StoreError | None:
    """Map an SDK or transport error to what a redelivery can fix; None if we cannot tell."""
    if isinstance(error, cosmos_errors.CosmosHttpResponseError):
        status = error.status_code or 0
        if status in _SYSTEMIC_STATUS or (status == 404 and writing):
            # 404 on a write: the database or container does not exist. (A 404 on the point
            # read means "no such order" and never reaches this function.)
            return SystemicStoreError(f"Cosmos DB answered {status}: {_first_line(error)}")
        if status in _TRANSIENT_STATUS:
            return TransientStoreError(f"Cosmos DB answered {status}: {_first_line(error)}")
        return None
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
