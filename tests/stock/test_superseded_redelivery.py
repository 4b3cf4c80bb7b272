"""A redelivery of an acceptance whose first delivery stopped after the order's index (the gate)
and before its SKU, when a later version of the order passes the gate: before the redelivery
reads the index, or between that read and its first write behind it. Either way the later
version takes over every SKU and the redelivery is a duplicate that writes nothing more
(``idempotent_consumer._consumer``'s module docstring, "A redelivery goes on past the gate only
while the gate is still at its message"). Over the kit's in-memory store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from idempotent_consumer import (
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    TransientStoreError,
    Write,
    decide,
)
from idempotent_consumer.testing import InMemoryDocumentStore

from shared.stock.consumer import stock_reservation
from tests.stock.events import event_message
from tests.stock.test_reservation_rules import NOW, handle, reservation, reserved, stocked


class BeforeSecondCommit:
    """The store, with ``meanwhile`` run once before its second commit: for a redelivery of an
    acceptance, after its refused write at the gate and before its proof that the gate is still
    at its version (the first commit behind the gate)."""

    def __init__(self, store: DocumentStore, meanwhile: Callable[[], Awaitable[None]]) -> None:
        self._store, self._meanwhile = store, meanwhile
        self._commits = 0

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        self._commits += 1
        if self._commits == 2:
            await self._meanwhile()
        await self._store.commit(partition_key, writes)


async def stopped_after_the_gate() -> tuple[InMemoryDocumentStore, IncomingMessage]:
    """A store where version 1 of o-1 (2 of A) passed the gate and stopped before A's batch,
    and that version's acceptance."""
    store, accepted = stocked(A=10), event_message("o-1", 1, {"A": 2})
    store.fail_next = [None, TransientStoreError("a stop before the SKU's batch")]
    assert (await handle(store, accepted)).outcome is Outcome.TRANSIENT
    return store, accepted


async def test_a_redelivery_overtaken_before_its_index_read_is_decided_at_the_index_alone() -> None:
    store, accepted = await stopped_after_the_gate()
    assert (await handle(store, event_message("o-1", 2, {"A": 3}))).outcome is Outcome.PROCESSED
    store.requests.clear()

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert redelivered.outcome is Outcome.DUPLICATE
    # At the index: the gate's refused write, its marker's read, once more to know the first
    # delivery passed it, the index's read (docs/stock.md's duplicate); nothing read or
    # written in A, where version 2 holds 3.
    assert store.requests == ["batch", "read", "read", "read"]
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["orderVersion"], record["reserved"]) == (2, 3)
    assert reserved(store, "A") == 3


async def test_a_redelivery_overtaken_between_its_read_and_its_first_write_is_a_duplicate() -> None:
    store, accepted = await stopped_after_the_gate()

    async def version_2_passes_the_gate() -> None:
        amended = await handle(store, event_message("o-1", 2, {"A": 3}))
        assert amended.outcome is Outcome.PROCESSED

    redelivered: Decision = await decide(
        stock_reservation,
        replace(accepted, delivery_count=2),
        BeforeSecondCommit(store, version_2_passes_the_gate),
        marker_ttl_s=600,
        now=NOW,
    )

    assert redelivered.outcome is Outcome.DUPLICATE
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["orderVersion"], record["reserved"]) == (2, 3)
    assert reserved(store, "A") == 3
