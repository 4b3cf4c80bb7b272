"""The kit's ``DocumentStore`` in memory: a double for a user's tests (and this kit's), held to
``DocumentStoreContract`` like the Cosmos DB adapter, so it cannot drift from what the kit
relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pydantic_core

from idempotent_consumer import (
    ConditionFailed,
    Create,
    DocumentExists,
    DocumentMissing,
    PatchOperation,
    StoreError,
    Write,
)


class InMemoryDocumentStore:
    """The kit's ``DocumentStore`` port in memory: atomic commits in one partition (all or
    nothing, the first refused write decides, as a transactional batch answers), point reads.

    Documents are copied in and out through a JSON round trip (pydantic-core, in Rust), as a
    real store serialises what it is given and parses what it returns: the caller's dicts and
    the stored ones never alias, and only JSON values can be stored. ``requests`` logs each
    request (``create``, ``batch``, ``read``); ``fail_next`` scripts the next requests' failures,
    in order (None lets that request through). Tests may read and edit ``documents`` (keyed by
    partition key and id) to set up a stored state.

    Given a ``clock`` (seconds), it keeps Cosmos DB's per-item time to live: each write stamps
    ``_ts`` (the clock's whole seconds, as the service's ``_ts`` is), and a document whose
    ``ttl`` is a positive integer is gone once ``_ts + ttl`` is reached: "items expire ... after
    the time period, since the time they were last modified"; "an item no longer appears ...
    immediately after the TTL expires, even if it hasn't yet been permanently deleted"
    (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live), so a read returns nothing, a
    create takes its id and a patch finds no document. ``ttl`` -1 or absent never expires (a
    container whose ``defaultTtl`` is -1: time to live on, items kept unless they set one, the
    same page). An expired document stays in
    ``documents`` until its id is written again, for a test to tell it from one never written
    (``expired``). What the service answers for a point read of an expired item it has not yet
    deleted is not documented; this answers as for a deleted one.

    Does not reproduce: the system fields a store adds (``_etag``, ``_rid``; ``_ts`` only with a
    clock), request charges, throttling, timeouts and every other failure unless scripted, the
    2 MB document limit, the 10-operation limit of a patch, the SDK's error types (it raises
    the port's errors), concurrency between processes.
    """

    def __init__(
        self, *, keep: int | None = None, clock: Callable[[], float] | None = None
    ) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}  # (partition, id) -> doc
        self.requests: list[str] = []
        # Scripted failures for the next requests, in order; None lets that request through.
        self.fail_next: list[StoreError | Exception | None] = []
        self._keep = keep
        self._clock = clock

    def expired(self, document: Mapping[str, Any]) -> bool:
        """Whether ``document`` is past its ttl now (always False without a clock)."""
        ttl, written = document.get("ttl"), document.get("_ts")
        if self._clock is None or not isinstance(ttl, int) or ttl <= 0:
            return False
        return isinstance(written, int) and written + ttl <= self._clock()

    def _stored(self, key: tuple[str, str]) -> dict[str, Any] | None:
        document = self.documents.get(key)
        return None if document is None or self.expired(document) else document

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        self._request("read")
        document = self._stored((partition_key, document_id))
        return self._copy(document) if document is not None else None

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        """All or nothing, as a transactional batch: each write is checked against the state
        the earlier writes of the same commit left, and the first refused one decides."""
        self._request("create" if len(writes) == 1 and isinstance(writes[0], Create) else "batch")
        staged: dict[str, dict[str, Any]] = {}
        for index, write in enumerate(writes):
            key = (partition_key, write.document_id)
            current = staged.get(write.document_id, self._stored(key))
            if isinstance(write, Create):
                if current is not None:
                    raise DocumentExists(index, write.document_id)
                staged[write.document_id] = self._copy(write.document)
                continue
            if current is None:
                raise DocumentMissing(index, write.document_id)
            if write.condition is not None and not write.condition.holds_for(current):
                raise ConditionFailed(index, write.document_id)
            staged[write.document_id] = _patched(current, write.operations)
        for document_id, document in staged.items():
            if self._clock is not None:
                document["_ts"] = int(self._clock())
            self.documents[(partition_key, document_id)] = document

    def _request(self, name: str) -> None:
        if self._keep is None:
            self.requests.append(name)
        failure = self.fail_next.pop(0) if self.fail_next else None
        if failure is not None:
            raise failure

    def _copy(self, document: Mapping[str, Any]) -> dict[str, Any]:
        plain = document if isinstance(document, dict) else dict(document)
        if self._keep is not None:
            return plain
        copied: dict[str, Any] = pydantic_core.from_json(pydantic_core.to_json(plain))
        return copied


def _patched(document: Mapping[str, Any], operations: Sequence[PatchOperation]) -> dict[str, Any]:
    """A copy of ``document`` with the top-level patch operations applied (set, add, replace,
    remove, incr: learn.microsoft.com/azure/cosmos-db/partial-document-update)."""
    patched = dict(pydantic_core.from_json(pydantic_core.to_json(document)))
    for operation in operations:
        name = str(operation["path"]).removeprefix("/")
        kind = operation["op"]
        if kind in ("set", "add", "replace"):
            patched[name] = pydantic_core.from_json(pydantic_core.to_json(operation["value"]))
        elif kind == "remove":
            patched.pop(name, None)
        elif kind == "incr":
            patched[name] = patched.get(name, 0) + operation["value"]
        else:
            raise ValueError(f"patch operation {kind!r} is not modelled")
    return patched
