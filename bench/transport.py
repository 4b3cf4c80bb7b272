"""A counting azure-core transport: the Cosmos DB requests the SDK actually sends, by kind.

It subclasses ``local.faults.FaultInjectingTransport`` so fault rules still work, and counts each
request before it is forwarded (or answered by a rule). Document requests (``/docs``) are told
apart from the SDK's metadata reads (account, collection, partition key ranges), which happen once
per client and are not part of a message's cost.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest

from local.faults import FaultInjectingTransport

# Request kinds, by what the consumer (or a peer model) does with a document.
WRITE = "write"  # POST .../docs: create_item or execute_item_batch
BATCH = "batch"  # a POST .../docs carrying x-ms-cosmos-is-batch-request (also counted as write)
READ = "read"  # GET .../docs/<id>: point read
REPLACE = "replace"  # PUT .../docs/<id>
QUERY = "query"  # POST .../docs with a query body
OTHER_DOC = "other_doc"  # DELETE, PATCH... on a document
METADATA = "metadata"  # anything not under /docs: account, databases, collections, pkranges

DOCUMENT_KINDS = (WRITE, READ, REPLACE, QUERY, OTHER_DOC)


def classify(request: HttpRequest) -> str:
    path = request.url.split("?", 1)[0].rstrip("/")
    method = request.method.upper()
    if path.endswith("/docs"):
        if method == "POST":
            if request.headers.get("x-ms-documentdb-isquery", "").lower() == "true":
                return QUERY
            return WRITE
        return OTHER_DOC
    if "/docs/" in path:
        if method == "GET":
            return READ
        if method == "PUT":
            return REPLACE
        return OTHER_DOC
    return METADATA


@dataclass(frozen=True)
class RequestSnapshot:
    counts: dict[str, int]
    response_bytes: int

    @property
    def documents(self) -> int:
        """Requests on documents: what a message costs after the client's one-off warm-up."""
        return sum(self.counts.get(kind, 0) for kind in DOCUMENT_KINDS)

    @property
    def total(self) -> int:
        return self.documents + self.counts.get(METADATA, 0)

    def kinds(self) -> dict[str, int]:
        """The non-zero counts by kind, sorted by kind."""
        return {kind: count for kind, count in sorted(self.counts.items()) if count}

    def minus(self, earlier: RequestSnapshot) -> RequestSnapshot:
        kinds = set(self.counts) | set(earlier.counts)
        return RequestSnapshot(
            {kind: self.counts.get(kind, 0) - earlier.counts.get(kind, 0) for kind in kinds},
            self.response_bytes - earlier.response_bytes,
        )


class CountingTransport(FaultInjectingTransport):
    """Counts every request by kind, and the response bytes announced by the server."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.counts: Counter[str] = Counter()
        self.batches = 0
        self.response_bytes = 0

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        kind = classify(request)
        self.counts[kind] += 1
        if kind == WRITE and request.headers.get("x-ms-cosmos-is-batch-request"):
            self.batches += 1
        response = await super().send(request, **kwargs)
        length = response.headers.get("content-length")
        if length and length.isdigit():
            self.response_bytes += int(length)
        return response

    def snapshot(self) -> RequestSnapshot:
        counts = dict(self.counts)
        counts[BATCH] = self.batches
        return RequestSnapshot(counts, self.response_bytes)
