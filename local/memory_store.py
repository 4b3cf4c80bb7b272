"""An in-memory ``OrderStore`` with the port's semantics (atomic create, conflict on an existing
order id): for unit tests of the core and for measuring the core's own CPU cost without I/O."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from shared.errors import OrderAlreadyExists, StoreError


class InMemoryOrderStore:
    def __init__(self) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}  # (partition, id) -> doc
        self.requests: list[str] = []
        # Scripted failures for the next requests, in order; None lets that request through.
        self.fail_next: list[StoreError | Exception | None] = []

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        self.requests.append("create" if len(documents) == 1 else "batch")
        self._maybe_fail()
        keys = [(document["orderId"], document["id"]) for document in documents]
        if any(key in self.documents for key in keys):
            raise OrderAlreadyExists(keys[0][0])
        for key, document in zip(keys, documents, strict=True):
            self.documents[key] = copy.deepcopy(dict(document))

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        self.requests.append("read")
        self._maybe_fail()
        document = self.documents.get((order_id, order_id))
        return copy.deepcopy(document) if document is not None else None

    def _maybe_fail(self) -> None:
        failure = self.fail_next.pop(0) if self.fail_next else None
        if failure is not None:
            raise failure
