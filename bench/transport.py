"""A counting azure-core transport: the Cosmos DB requests the SDK actually sends, by kind.

It subclasses ``local.standins.faults.FaultInjectingTransport`` (so fault rules still work) and
counts each request before forwarding it (and, when asked, the partition it went to). Document
requests (``/docs``) are told apart from the SDK's metadata reads (account, collection,
partition key ranges), which happen once per client and are not part of a message's cost.
Each query is also kept with the number of documents its response carried (``QuerySeen``): the
local server has no request charge, so what a query loads is read here. It never changes a request.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest

from local.standins.faults import FaultInjectingTransport

METADATA = "metadata"  # anything not under /docs
# An aggregate returns one value per partition whatever it read: its response says nothing of
# the documents it loaded, so it is told apart (the Cosmos DB SQL aggregate functions,
# learn.microsoft.com/azure/cosmos-db/nosql/query/aggregate-functions).
_AGGREGATE = re.compile(r"\b(COUNT|MIN|MAX|SUM|AVG)\s*\(", re.IGNORECASE)


def classify(request: HttpRequest) -> str:
    path = request.url.split("?", 1)[0].rstrip("/")
    method = request.method.upper()
    if path.endswith("/docs") and method == "POST":
        if request.headers.get("x-ms-documentdb-isquery", "").lower() == "true":
            return "query"
        return "batch" if request.headers.get("x-ms-cosmos-is-batch-request") else "create"
    if "/docs" in path:
        return {"GET": "read", "PUT": "replace"}.get(method, method.lower())
    return METADATA


@dataclass(frozen=True, slots=True)
class QuerySeen:
    """One query request and its response, as the transport saw them."""

    query: str
    documents: int  # the items its response carried (``Documents`` of the body)
    status: int
    elapsed_s: float  # from the request handed to the transport to its response read

    @property
    def aggregate(self) -> bool:
        return bool(_AGGREGATE.search(self.query))


def _query_text(request: HttpRequest) -> str:
    data = request.data
    if isinstance(data, bytes | bytearray):
        data = data.decode("utf-8")
    body = json.loads(data) if isinstance(data, str) and data else {}
    return str(body.get("query", "")) if isinstance(body, dict) else ""


def _documents(response: AsyncHttpResponse) -> int:
    """The items of a query response: the ``Documents`` array of its body (the REST API's
    shape, learn.microsoft.com/rest/api/cosmos-db/query-documents, "Response body")."""
    try:
        body = json.loads(response.body() or b"{}")
    except ValueError:
        return 0
    items = body.get("Documents") if isinstance(body, dict) else None
    return len(items) if isinstance(items, list) else 0


@dataclass(frozen=True)
class RequestSnapshot:
    counts: dict[str, int]

    @property
    def documents(self) -> int:
        """Requests on documents: what a message costs once the client is warm."""
        return sum(count for kind, count in self.counts.items() if kind != METADATA)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def kinds(self) -> dict[str, int]:
        """The non-zero counts by kind, sorted by kind."""
        return {kind: count for kind, count in sorted(self.counts.items()) if count}

    def minus(self, earlier: RequestSnapshot) -> RequestSnapshot:
        kinds = set(self.counts) | set(earlier.counts)
        return RequestSnapshot(
            {kind: self.counts.get(kind, 0) - earlier.counts.get(kind, 0) for kind in kinds}
        )


class CountingTransport(FaultInjectingTransport):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.counts: Counter[str] = Counter()
        self.queries: list[QuerySeen] = []
        # While set (``bench.stock``): each document request by (kind, its partition key header,
        # ``x-ms-documentdb-partitionkey``, azure/cosmos/_base.py), None when it has none.
        self.partitions: Counter[tuple[str, str | None]] | None = None

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        kind = classify(request)
        self.counts[kind] += 1
        if self.partitions is not None and kind != METADATA:
            self.partitions[(kind, request.headers.get("x-ms-documentdb-partitionkey"))] += 1
        started = time.perf_counter()
        response = await super().send(request, **kwargs)
        if kind == "query":
            # The body is already read: azure-core loads it unless the caller streams
            # (azure/core/pipeline/transport/_aiohttp.py:371-372), and the SDK does not.
            seen = QuerySeen(
                _query_text(request),
                _documents(response),
                response.status_code,
                time.perf_counter() - started,
            )
            self.queries.append(seen)
        return response

    def snapshot(self) -> RequestSnapshot:
        return RequestSnapshot(dict(self.counts))


class SharedCountingTransport(CountingTransport):
    """A counting transport held by several clients: the app's (replaced each time the bench
    composes the app anew, and closed by the runtime it retires) and the bench's own. A client
    that closes must not close it: azure-core's pipeline exit calls the transport's
    ``__aexit__`` (azure/core/pipeline/_base_async.py:168-174), which closes its session
    (transport/_aiohttp.py:170-176, 203-207), and a closed transport refuses to open again
    (:178-181). Its owner closes it once, with ``close()``."""

    async def __aexit__(self, *exc_info: Any) -> None:
        return None
