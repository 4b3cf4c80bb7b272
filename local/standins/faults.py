"""Fault injection at the real Cosmos SDK boundary: an azure-core transport (the SDK's documented
extension point) that passes every request to the real server unless a rule fires.

The SDK above it is untouched: its retry policies, error mapping and timeouts run as in
production. Rules answer with a status (403, 429 + ``x-ms-retry-after-ms``, 503, 408, 449...),
answer a transactional batch with the 207 Multi-Status the service sends when one operation
fails (``BATCH_OPERATION``), fail the connection before the request leaves, or let the request
commit and then lose the response (the ambiguous write).

What each answer follows, and what is not known:

- a status answer: an error response of the REST API, status and ``x-ms-substatus`` as listed
  on learn.microsoft.com/rest/api/cosmos-db/http-status-codes-for-cosmosdb; the SDK maps it to
  ``CosmosHttpResponseError`` (``aio/_asynchronous_request.py:180-187``) after its own retries
  (``_retry_utility.py``). The body is ``{"code", "message"}``: the SDK only reads it as text.
- a connection that fails before the request leaves: ``ServiceRequestError``, as azure-core's
  aiohttp transport raises it for a client error (azure/core/pipeline/transport/_aiohttp.py:398-
  399); a lost response after the server committed: ``ServiceResponseError`` (:392-393); a slow
  one past the read timeout: ``ServiceResponseTimeoutError`` (:396-397). Which of them a real
  reset raises depends on when aiohttp sees it; the SDK retries all three the same way for a
  read, and never a write (``retry_write`` off: docs/configuration.md, "Timeouts and retries").
- a failed batch: HTTP 207 with a JSON array of one result per operation, in order. The
  failing operation carries its ``statusCode``, ``subStatusCode``, ``requestCharge`` and, when
  throttled, ``retryAfterMilliseconds``; every other operation ``statusCode`` 424 (Failed
  Dependency) (learn.microsoft.com/azure/cosmos-db/nosql/transactional-batch: "the failed
  operation will have a status code of its corresponding error. All the other operations will
  have a 424 status code"). The field names are the service's JSON batch response as
  azure-sdk-for-java parses it (``BatchResponseParser.createBatchOperationResultFromJson``,
  ``BatchRequestResponseConstants``: statusCode, subStatusCode, requestCharge,
  retryAfterMilliseconds, eTag, resourceBody). The response headers are the ones every Cosmos
  DB response carries (``x-ms-request-charge``: the whole batch, ``x-ms-activity-id``);
  whether the gateway also sets ``x-ms-substatus`` or ``x-ms-retry-after-ms`` on a 207 is not
  documented, so they are added only when a rule's ``headers`` say so (the adapter reads the
  operation's fields first, these headers second). The charge of the 424 operations is not
  documented either: 0 here. azure-cosmos parses the array as a successful response
  (``aio/_asynchronous_request.py:186-192``) and raises ``CosmosBatchOperationError`` from it
  (``aio/_cosmos_client_connection_async.py:2095-2104``), so its throttling retries never apply.
"""

from __future__ import annotations

import asyncio
import enum
import json
import random
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from azure.core.exceptions import (
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.core.pipeline.transport import AioHttpTransport, AsyncHttpResponse, HttpRequest
from azure.core.utils import CaseInsensitiveDict


class FaultKind(enum.Enum):
    STATUS = "status"  # answer with a status code; the request never reaches the server
    CONNECTION_ERROR = "connection_error"  # fail before sending: nothing written
    LOST_RESPONSE = "lost_response"  # send, let it commit, then lose the response
    SLOW_RESPONSE = "slow_response"  # the server commits, its answer takes ``delay_s``
    # A transactional batch answered 207: operation ``failing_index`` with ``status``,
    # ``sub_status`` and ``retry_after_ms``, the others 424; nothing reaches the server.
    BATCH_OPERATION = "batch_operation"


@dataclass
class FaultRule:
    kind: FaultKind
    method: str | None = None  # e.g. "POST"
    path_suffix: str | None = None  # e.g. "/docs" (creates and batches)
    path_contains: str | None = None
    status: int = 503
    sub_status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    failing_index: int = 0  # BATCH_OPERATION: the operation that fails (-1: the last)
    retry_after_ms: int | None = None  # BATCH_OPERATION: the operation's retryAfterMilliseconds
    batches_only: bool = False  # match transactional batches only (x-ms-cosmos-is-batch-request)
    # SLOW_RESPONSE: the client read timeout the answer outlives (default: the request's own
    # ``read_timeout``). Set on the rule, it spares every other request a short client timeout
    # (chaos: a query scanning cosmosdb-server, which has no index, is slow but not a fault).
    read_timeout_s: float | None = None
    delay_s: float = 0.0
    times: int | None = 1  # None: every matching request
    active: Callable[[], bool] | None = None  # e.g. an outage window on a manual clock
    probability: float = 1.0  # chaos: fire on this share of matching requests
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    fired: int = 0

    def matches(self, request: HttpRequest) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.active is not None and not self.active():
            return False
        path = request.url.split("?", 1)[0]
        if self.method is not None and request.method.upper() != self.method:
            return False
        if self.path_suffix is not None and not path.rstrip("/").endswith(self.path_suffix):
            return False
        if self.path_contains is not None and self.path_contains not in path:
            return False
        if (self.batches_only or self.kind is FaultKind.BATCH_OPERATION) and not is_batch(request):
            return False
        return self.probability >= 1.0 or self.rng.random() < self.probability


class RequestShape(TypedDict, total=False):
    method: str
    path_suffix: str
    path_contains: str


# Request shapes of the operations the consumer performs.
WRITES: RequestShape = {"method": "POST", "path_suffix": "/docs"}  # create_item, batches
POINT_READS: RequestShape = {"method": "GET", "path_contains": "/docs/"}
BATCHES: RequestShape = {"method": "POST", "path_suffix": "/docs"}  # with BATCH_OPERATION

# The header azure-cosmos sets on a transactional batch (``http_constants.HttpHeaders
# .IsBatchRequest``, set by ``_base._populate_batch_headers``, ``_base.py:1022``).
_BATCH_REQUEST_HEADER = "x-ms-cosmos-is-batch-request"


def is_batch(request: HttpRequest) -> bool:
    return str(request.headers.get(_BATCH_REQUEST_HEADER, "")).lower() == "true"


class FaultInjectingTransport(AioHttpTransport):  # type: ignore[misc]
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()
        self.requests_sent = 0

    def add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def _take(self, request: HttpRequest) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(request):
                    rule.fired += 1
                    return rule
        return None

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        rule = self._take(request)
        if rule is None:
            self.requests_sent += 1
            return await self._forward(request, **kwargs)
        if rule.kind is FaultKind.STATUS:
            return SyntheticResponse(request, rule.status, rule.sub_status, rule.headers)
        if rule.kind is FaultKind.BATCH_OPERATION:
            return batch_failure_response(request, rule)
        if rule.kind is FaultKind.CONNECTION_ERROR:
            raise ServiceRequestError("injected: connection reset before the request was sent")
        self.requests_sent += 1
        response = await self._forward(request, **kwargs)
        if rule.kind is FaultKind.SLOW_RESPONSE:
            # As aiohttp's read timeout would: wait up to the client's read timeout, then fail.
            read_timeout = float(rule.read_timeout_s or kwargs.get("read_timeout") or rule.delay_s)
            await asyncio.sleep(min(rule.delay_s, read_timeout))
            if rule.delay_s <= read_timeout:
                return response
            await response.load_body()  # type: ignore[attr-defined]
            raise ServiceResponseTimeoutError("injected: read timeout, the server had committed")
        await response.load_body()  # type: ignore[attr-defined]  # committed; answer lost
        raise ServiceResponseError("injected: connection reset after the request was sent")

    async def _forward(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        response: AsyncHttpResponse = await super().send(request, **kwargs)
        return response


def batch_operations(request: HttpRequest) -> list[Any]:
    """The operations of a transactional batch request (its JSON array body)."""
    data = request.data
    if isinstance(data, bytes | bytearray):
        data = data.decode("utf-8")
    operations = json.loads(data) if isinstance(data, str) and data else []
    return operations if isinstance(operations, list) else []


def batch_failure_response(request: HttpRequest, rule: FaultRule) -> SyntheticResponse:
    """The 207 Multi-Status of a batch whose operation ``rule.failing_index`` failed with
    ``rule.status`` (see the module docstring for the source of every field)."""
    count = max(1, len(batch_operations(request)))
    failing = rule.failing_index % count
    results: list[dict[str, Any]] = []
    for index in range(count):
        if index != failing:
            results.append({"statusCode": 424, "requestCharge": 0.0})
            continue
        result: dict[str, Any] = {"statusCode": rule.status, "requestCharge": 1.24}
        if rule.sub_status is not None:
            result["subStatusCode"] = rule.sub_status
        if rule.retry_after_ms is not None:
            result["retryAfterMilliseconds"] = rule.retry_after_ms
        results.append(result)
    response = SyntheticResponse(
        request, 207, None, {"x-ms-request-charge": "1.24", **rule.headers}
    )
    response.set_body(json.dumps(results).encode())
    return response


class SyntheticResponse(AsyncHttpResponse):
    """A response that never came from a server, shaped like Cosmos DB's error responses."""

    def __init__(
        self,
        request: HttpRequest,
        status: int,
        sub_status: int | None,
        headers: Mapping[str, str],
    ) -> None:
        super().__init__(request, None)
        self.status_code = status
        self.reason = "Injected"
        self.content_type = "application/json"
        self.headers = CaseInsensitiveDict(
            {
                "content-type": "application/json",
                "x-ms-request-charge": "0",
                "x-ms-activity-id": str(uuid.uuid4()),
                **headers,
            }
        )
        if sub_status is not None:
            self.headers["x-ms-substatus"] = str(sub_status)
        self._body = json.dumps(
            {"code": str(status), "message": f"injected fault: status {status}"}
        ).encode()

    def set_body(self, body: bytes) -> None:
        self._body = body

    def body(self) -> bytes:
        return self._body

    def text(self, encoding: str | None = None) -> str:
        return self._body.decode(encoding or "utf-8")

    async def load_body(self) -> None:
        return None

    def stream_download(self, pipeline: Any, **kwargs: Any) -> AsyncIterator[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            yield self._body

        return chunks()

    def parts(self) -> AsyncIterator[AsyncHttpResponse]:
        raise NotImplementedError("multipart responses are not synthesised")
