"""An in-memory ``OrderStore`` with the port's semantics (atomic create, conflict on an existing
order id): for unit tests of the core and for measuring the core's own CPU cost without I/O.

Documents are copied in and out through a JSON round trip (pydantic-core, in Rust), as a real
store serialises what it is given and parses what it returns: the caller's dicts and the stored
ones never alias, and only JSON values can be stored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core

from shared.consumer.errors import OrderAlreadyExists, StoreError


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
            self.documents[key] = _copy(document)

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        self.requests.append("read")
        self._maybe_fail()
        document = self.documents.get((order_id, order_id))
        return _copy(document) if document is not None else None

    def _maybe_fail(self) -> None:
        failure = self.fail_next.pop(0) if self.fail_next else None
        if failure is not None:
            raise failure


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    plain = document if isinstance(document, dict) else dict(document)
    copied: dict[str, Any] = pydantic_core.from_json(pydantic_core.to_json(plain))
    return copied
