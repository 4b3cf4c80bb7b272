"""The stock reservation's rules over the kit's in-memory store (the same store contract as
Cosmos DB's transactional batch: tests/contracts): reserve, adjust, release, shortfall, stale,
duplicates, arrival before acceptance."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import (
    WRITE_WINDOW_S,
    ConditionFailed,
    Decision,
    IncomingMessage,
    Outcome,
    Settlement,
    TransientStoreError,
    decide,
    is_marker,
)
from idempotent_consumer.testing import InMemoryDocumentStore

from shared.stock.consumer import stock_reservation
from shared.stock.contract import parse_event
from shared.stock.inventory import (
    ORDER_INDEX_ID,
    RELEASED_TTL_S,
    RESERVATION_TYPE,
    STOCK_ITEM_ID,
    stock_item,
)
from tests.stock.events import event_body, event_message

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def stocked(**on_hand: int) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    for sku, count in on_hand.items():
        store.documents[(sku, STOCK_ITEM_ID)] = stock_item(sku, count)
    return store


async def handle(store: InMemoryDocumentStore, message: IncomingMessage) -> Decision:
    return await decide(stock_reservation, message, store, marker_ttl_s=600, now=NOW)


def reserved(store: InMemoryDocumentStore, sku: str) -> int:
    value: int = store.documents[(sku, STOCK_ITEM_ID)]["reserved"]
    return value


def reservation(store: InMemoryDocumentStore, sku: str, order_id: str) -> dict[str, Any] | None:
    return store.documents.get((sku, f"reservation:{order_id}"))


def reservations_sum(store: InMemoryDocumentStore, sku: str) -> int:
    return sum(
        document["reserved"]
        for (partition, _), document in store.documents.items()
        if partition == sku and document.get("type") == RESERVATION_TYPE
    )


async def test_an_accepted_order_reserves_each_line_once() -> None:
    store = stocked(A=10, B=10)
    accepted = event_message("o-1", 1, {"A": 2, "B": 3})
    first = await handle(store, accepted)
    again = await handle(store, accepted)
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert (reserved(store, "A"), reserved(store, "B")) == (2, 3)
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["orderVersion"], record["reserved"]) == (1, 2)


async def test_an_amendment_adjusts_and_releases_what_it_no_longer_wants() -> None:
    store = stocked(A=10, B=10, C=10)
    await handle(store, event_message("o-1", 1, {"A": 2, "B": 3}))
    decision = await handle(store, event_message("o-1", 2, {"A": 5, "C": 1}))
    assert decision.outcome is Outcome.PROCESSED
    assert [reserved(store, sku) for sku in "ABC"] == [5, 0, 1]
    record = reservation(store, "B", "o-1")
    # Released: a tombstone of version 2 that expires; what still holds stock never does.
    assert record is not None and (record["orderVersion"], record["reserved"]) == (2, 0)
    assert record["ttl"] == RELEASED_TTL_S
    held = reservation(store, "A", "o-1")
    assert held is not None and held["ttl"] == -1
    assert not any(
        partition in "ABC" and is_marker(doc) for (partition, _), doc in store.documents.items()
    )


async def test_a_delivery_held_past_its_write_window_writes_nothing_behind_the_gate() -> None:
    """The window is the delivery's to keep: it passed the gate at 0, and its first commit in a
    SKU comes ``WRITE_WINDOW_S`` later (an answer that came late): refused before it leaves,
    transient, and the redelivery (still the index's version) does the work."""
    store = stocked(A=10)
    accepted = event_message("o-1", 1, {"A": 2})
    moments = iter([0.0, WRITE_WINDOW_S])

    held = await decide(
        stock_reservation, accepted, store, marker_ttl_s=600, now=NOW, clock=lambda: next(moments)
    )

    assert held.outcome is Outcome.TRANSIENT
    assert held.description == (
        "TransientStoreError: 60 s since this delivery passed the gate, past the 60 s window in "
        "which it may write behind it: its retry passes the gate again"
    )
    assert reservation(store, "A", "o-1") is None and reserved(store, "A") == 0
    assert (await handle(store, accepted)).outcome is Outcome.PROCESSED
    assert reserved(store, "A") == 2


async def test_a_cancellation_releases_exactly_what_was_reserved() -> None:
    store = stocked(A=3)
    await handle(store, event_message("o-1", 1, {"A": 2}))
    await handle(store, event_message("o-2", 1, {"A": 1}))
    await handle(store, event_message("o-1", 2, cancelled=True))
    assert reserved(store, "A") == 1 == reservations_sum(store, "A")


async def test_a_shortfall_reserves_what_is_there_and_records_the_rest() -> None:
    store = stocked(A=3)
    decision = await handle(store, event_message("o-1", 1, {"A": 5}))
    assert decision.outcome is Outcome.PROCESSED
    assert decision.measures == {"stock.shortfall": 2}
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["reserved"], record["backordered"]) == (3, 2)
    assert reserved(store, "A") == 3


async def test_a_cancellation_before_the_acceptance_makes_it_stale() -> None:
    store = stocked(A=3)
    cancelled = await handle(store, event_message("o-1", 2, cancelled=True))
    late = await handle(store, event_message("o-1", 1, {"A": 2}))
    assert (cancelled.outcome, late.outcome) == (Outcome.PROCESSED, Outcome.STALE)
    assert reserved(store, "A") == 0
    assert reservation(store, "A", "o-1") is None


async def test_an_unstocked_sku_is_backordered_whole() -> None:
    store = stocked()
    decision = await handle(store, event_message("o-1", 1, {"Z": 4}))
    assert decision.measures == {"stock.shortfall": 4}
    record = reservation(store, "Z", "o-1")
    assert record is not None and record["backordered"] == 4


async def test_a_change_writes_each_sku_once_from_what_the_index_says_it_holds() -> None:
    # The floor: the index read and patched, then one batch per SKU of either version, each
    # taken from the index's lines (A holds 2, B 1, C nothing), no reservation read.
    store = stocked(A=10, B=10, C=10)
    await handle(store, event_message("o-1", 1, {"A": 2, "B": 1}))
    store.requests.clear()
    amended = await handle(store, event_message("o-1", 2, {"A": 3, "C": 1}))
    assert store.requests == ["read", "batch", "batch", "batch", "batch"]
    store.requests.clear()
    cancelled = await handle(store, event_message("o-1", 3, cancelled=True))
    assert store.requests == ["read", "batch", "batch", "batch", "batch"]
    assert (amended.outcome, cancelled.outcome) == (Outcome.PROCESSED, Outcome.PROCESSED)
    assert [reserved(store, sku) for sku in "ABC"] == [0, 0, 0]
    assert all(reservation(store, sku, "o-1")["orderVersion"] == 3 for sku in "ABC")  # type: ignore[index]


async def test_a_sku_holding_less_than_its_index_says_moves_stock_by_what_it_really_holds() -> None:
    # Version 1 wanted 3 of S and got 1 (a shortfall): the index says 3. Version 2's write from
    # the index is refused on the reservation's reserved (1, not 3), it reads it and moves the
    # stock item by what it holds; without that condition it would release units it never held.
    store = stocked(S=1)
    await handle(store, event_message("o-1", 1, {"S": 3}))
    store.requests.clear()
    amended = await handle(store, event_message("o-1", 2, {"S": 2}))
    # index read + batch; in S: the refused batch, the reservation's read, the refused batch
    # (no room for 1 more), the stock item's read, the batch keeping the 1 it holds.
    assert store.requests == ["read", "batch", "batch", "read", "batch", "read", "batch"]
    assert amended.measures == {"stock.shortfall": 1}
    assert reserved(store, "S") == 1 == reservations_sum(store, "S")
    await handle(store, event_message("o-1", 3, cancelled=True))
    assert reserved(store, "S") == 0 == reservations_sum(store, "S")


async def test_an_index_written_before_it_kept_its_lines_makes_a_change_read_first() -> None:
    store = stocked(A=10)
    await handle(store, event_message("o-1", 1, {"A": 4}))
    del store.documents[("order:o-1", "orderIndex")]["lines"]  # as an index of before
    store.requests.clear()
    await handle(store, event_message("o-1", 2, {"A": 1}))
    assert store.requests == ["read", "batch", "read", "batch"]
    assert reserved(store, "A") == 1 == reservations_sum(store, "A")


async def test_a_missed_assumption_in_a_sku_short_of_stock_still_has_a_round_for_a_racer() -> None:
    # Version 1 got 1 of the 3 it wanted in S. Version 2 (2 wanted): its write from the index
    # is refused (it holds 1, not 3) and it reads; its batch from what it read is then refused
    # as the store refuses a batch a concurrent writer overtook; it reads again, its increment
    # is refused (no room), it reads the stock item and keeps the 1: a missed assumption is a
    # round, and it leaves the racer the round it had before (kit MAX_ROUNDS).
    store = stocked(S=1)
    await handle(store, event_message("o-1", 1, {"S": 3}))
    overtaken = ConditionFailed(0, "reservation:o-1")
    store.fail_next = [None, None, None, None, overtaken]
    amended = await handle(store, event_message("o-1", 2, {"S": 2}))
    assert amended.outcome is Outcome.PROCESSED, amended.error
    assert reserved(store, "S") == 1 == reservations_sum(store, "S")
    assert reservation(store, "S", "o-1")["orderVersion"] == 2  # type: ignore[index]


async def test_a_sku_whose_stock_item_was_removed_backorders_what_a_change_wants() -> None:
    """The stock item removed by hand while an order held stock there: the SKU is no longer
    stocked, so the change's release has nothing to give back to and what it wants is
    backordered (not retried against a stock item that is not there)."""
    store = stocked(A=10)
    await handle(store, event_message("o-1", 1, {"A": 2}))
    del store.documents[("A", STOCK_ITEM_ID)]

    decision = await handle(store, event_message("o-1", 2, {"A": 1}))

    assert (decision.outcome, decision.measures) == (Outcome.PROCESSED, {"stock.shortfall": 1})
    record = reservation(store, "A", "o-1")
    assert record is not None
    assert (record["orderVersion"], record["reserved"], record["backordered"]) == (2, 0, 1)


class StockItemRemovedWhenRead(InMemoryDocumentStore):
    """An operator removes each stock item just before the consumer reads it."""

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        if document_id == STOCK_ITEM_ID:
            self.documents.pop((partition_key, document_id), None)
        return await super().read(partition_key, document_id)


async def test_a_stock_item_removed_while_a_shortfall_is_read_backorders_the_order() -> None:
    store = StockItemRemovedWhenRead()
    store.documents[("A", STOCK_ITEM_ID)] = stock_item("A", 3)

    decision = await handle(store, event_message("o-1", 1, {"A": 5}))

    assert (decision.outcome, decision.measures) == (Outcome.PROCESSED, {"stock.shortfall": 5})
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["reserved"], record["backordered"]) == (0, 5)


async def test_a_release_below_what_the_stock_item_has_reserved_is_held_and_says_why() -> None:
    """The stock item's reserved lowered by hand below an order's reservation: its cancellation
    would drive reserved below zero, so it is held (systemic: an operator looks), writes
    nothing, and the description names the SKU, both figures and the runbook."""
    store = stocked(A=10)
    await handle(store, event_message("o-1", 1, {"A": 2}))
    store.documents[("A", STOCK_ITEM_ID)]["reserved"] = 1

    held = await handle(store, event_message("o-1", 2, cancelled=True))

    assert held.outcome is Outcome.SYSTEMIC
    assert held.description == (
        "SystemicStoreError: the stock item of SKU 'A' has 1 reserved, less than order o-1's "
        "reservation of 2 it would release: changed by hand? (docs/operations.md, Stock "
        "reservation)"
    )
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["orderVersion"], record["reserved"]) == (1, 2)
    assert reserved(store, "A") == 1


async def test_a_redelivery_behind_the_gate_leaves_the_order_index_as_its_version_wrote_it() -> (
    None
):
    """Stopped after the index passed the gate, before its SKU: the redelivery re-sets the
    index's version (the check that no later version passed) and writes nothing else there."""
    store = stocked(A=10)
    accepted = event_message("o-1", 1, {"A": 2})
    store.fail_next = [None, TransientStoreError("a stop before the SKU's batch")]
    assert (await handle(store, accepted)).outcome is Outcome.TRANSIENT
    index_before = dict(store.documents[("order:o-1", ORDER_INDEX_ID)])

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert redelivered.outcome is Outcome.PROCESSED and reserved(store, "A") == 2
    index = store.documents[("order:o-1", ORDER_INDEX_ID)]
    assert {k: v for k, v in index.items() if k != "_ts"} == {
        k: v for k, v in index_before.items() if k != "_ts"
    }


async def test_an_amendment_claiming_version_1_is_dead_lettered_invalid_and_writes_nothing() -> (
    None
):
    store = stocked(A=10)
    _, body = event_body("o-1", 1, {"A": 2})
    body["eventType"] = "OrderAmended"
    amended_as_v1 = IncomingMessage(
        message_id=body["eventId"], body=json.dumps(body).encode(), subject="OrderAmended"
    )

    refused = await handle(store, amended_as_v1)

    assert (refused.outcome, refused.deadletter_reason) == (Outcome.INVALID, "InvalidPayload")
    assert "OrderAmended cannot be version 1" in (refused.description or "")
    assert reservation(store, "A", "o-1") is None and reserved(store, "A") == 0


async def test_lines_of_one_sku_are_reserved_together() -> None:
    store = stocked(A=10)
    _, body = event_body("o-1", 1, {"A": 2})
    body["payload"]["lines"].append({"sku": "A", "quantity": 3, "unitPriceMinor": 100})
    accepted = IncomingMessage(
        message_id=body["eventId"], body=json.dumps(body).encode(), subject="OrderAccepted"
    )

    assert (await handle(store, accepted)).outcome is Outcome.PROCESSED
    record = reservation(store, "A", "o-1")
    assert record is not None and record["reserved"] == 5 == reserved(store, "A")


async def test_an_accepted_order_without_lines_is_dead_lettered_missing_lines() -> None:
    store = stocked(A=10)
    _, body = event_body("o-1", 1, {"A": 2})
    del body["payload"]["lines"]
    accepted = IncomingMessage(
        message_id=body["eventId"], body=json.dumps(body).encode(), subject="OrderAccepted"
    )

    refused = await handle(store, accepted)

    assert (refused.outcome, refused.deadletter_reason) == (Outcome.INVALID, "MissingLines")
    assert refused.description == (
        "OrderAccepted of order o-1 carries no lines: nothing says what to reserve (an event "
        "published before the lines were added)"
    )
    assert reservation(store, "A", "o-1") is None


def test_the_stock_fingerprint_is_pinned() -> None:
    # Stored in every marker (requestHash): a change of what it covers makes every redelivery
    # of an event applied before the change a mismatch.
    event = parse_event(event_message("o-1", 2, {"A": 2, "B": 1}))
    assert event.request_hash == (
        "417fe8056175901dce2e8f939bd69e5cef527c02292d9e1537fecf1f5eed0b08"
    )


class MarkerExpiresAfterItsFirstRead(InMemoryDocumentStore):
    """The gate's inbox marker reaches its ttl right after the conflict was first read: found
    once (a duplicate), gone when read again (Cosmos DB removes an expired item in the
    background, learn.microsoft.com/azure/cosmos-db/nosql/time-to-live)."""

    def __init__(self) -> None:
        super().__init__()
        self.expire_markers = False

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        found = await super().read(partition_key, document_id)
        if self.expire_markers and found is not None and is_marker(found):
            self.documents.pop((partition_key, document_id))
        return found


async def test_a_redelivery_whose_gate_marker_expires_meanwhile_is_retried_and_writes_nothing() -> (
    None
):
    """The gate says duplicate, then its marker is gone before the kit reads how it was first
    handled: the moment is wrong (abandoned for a redelivery to decide again), not a bug (an
    unexpected error would hold the delivery and log a stack trace), and no SKU is touched."""
    store = MarkerExpiresAfterItsFirstRead()
    store.documents[("A", STOCK_ITEM_ID)] = stock_item("A", 10)
    accepted = event_message("o-1", 1, {"A": 2})
    assert (await handle(store, accepted)).outcome is Outcome.PROCESSED
    store.expire_markers = True

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert (redelivered.outcome, redelivered.settlement) == (
        Outcome.TRANSIENT,
        Settlement.ABANDON,
    )
    assert "conflicted but could not be read" in (redelivered.description or "")
    assert reserved(store, "A") == 2


def index_of(store: InMemoryDocumentStore, order_id: str) -> dict[str, Any]:
    """The order's index as stored, without the store's own ``_ts``."""
    stored = store.documents[(f"order:{order_id}", ORDER_INDEX_ID)]
    return {name: value for name, value in stored.items() if name != "_ts"}


async def test_the_order_index_holds_the_version_skus_and_lines_each_event_left() -> None:
    """What the next version assumes its reservations hold is read from here (its lines), and
    every SKU any version wanted is visited (its skus): an acceptance, an amendment, and an
    amendment that arrives before its order's acceptance each leave the whole index."""
    store = stocked(A=10, B=10, C=10)
    await handle(store, event_message("o-1", 1, {"A": 2, "B": 1}))
    accepted = index_of(store, "o-1")
    await handle(store, event_message("o-1", 2, {"A": 3, "C": 1}))
    await handle(store, event_message("o-2", 2, {"B": 4}))

    assert accepted == {
        "id": "orderIndex",
        "sku": "order:o-1",
        "type": "orderIndex",
        "orderId": "o-1",
        "orderVersion": 1,
        "skus": ["A", "B"],
        "lines": {"A": 2, "B": 1},
    }
    assert index_of(store, "o-1") == {
        **accepted,
        "orderVersion": 2,
        "skus": ["A", "B", "C"],
        "lines": {"A": 3, "C": 1},
    }
    assert index_of(store, "o-2") == {
        **accepted,
        "sku": "order:o-2",
        "orderId": "o-2",
        "orderVersion": 2,
        "skus": ["B"],
        "lines": {"B": 4},
    }


async def test_a_change_that_arrives_before_its_acceptance_reads_no_reservation() -> None:
    # No index yet: no version passed the gate, so no SKU holds anything for the order and
    # each SKU's batch is written unread: the index read and its batch, one batch in A.
    store = stocked(A=10)
    amended = await handle(store, event_message("o-1", 2, {"A": 3}))
    assert amended.outcome is Outcome.PROCESSED
    assert store.requests == ["read", "batch", "batch"]
    assert reserved(store, "A") == 3
    assert reservation(store, "A", "o-1") == {
        "id": "reservation:o-1",
        "sku": "A",
        "type": RESERVATION_TYPE,
        "orderId": "o-1",
        "orderVersion": 2,
        "requested": 3,
        "reserved": 3,
        "backordered": 0,
        "ttl": -1,
    }


async def test_the_same_version_under_another_message_id_is_stale_and_changes_nothing() -> None:
    """A producer's retry under a new MessageId, or another event claiming the version
    already applied: stale at the gate, the stored version said, the index and the stock
    as the applied version left them."""
    store = stocked(A=10)
    await handle(store, event_message("o-1", 1, {"A": 2}))
    await handle(store, event_message("o-1", 2, {"A": 3}))
    index_before = index_of(store, "o-1")
    subject, body = event_body("o-1", 2, {"A": 5})
    body["eventId"] = "another-event-id"
    retried = IncomingMessage("another-event-id", json.dumps(body).encode(), subject=subject)

    stale = await handle(store, retried)

    assert (stale.outcome, stale.settlement) == (Outcome.STALE, Settlement.COMPLETE)
    assert (stale.order_version, stale.stored_version) == (2, 2)
    assert stale.description == "OrderAmended version 2 is stale: version 2 is applied"
    assert index_of(store, "o-1") == index_before
    assert reserved(store, "A") == 3 == reservations_sum(store, "A")


async def test_a_redelivery_after_a_later_version_passed_the_gate_is_a_duplicate() -> None:
    """Version 2 took over every SKU: the redelivery of version 1 completes as a duplicate
    and writes nothing (it is not retried as if a replica were behind)."""
    store = stocked(A=10)
    accepted = event_message("o-1", 1, {"A": 2})
    await handle(store, accepted)
    await handle(store, event_message("o-1", 2, {"A": 3}))

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert (redelivered.outcome, redelivered.settlement) == (
        Outcome.DUPLICATE,
        Settlement.COMPLETE,
    )
    assert reserved(store, "A") == 3 == reservations_sum(store, "A")
    assert reservation(store, "A", "o-1")["orderVersion"] == 2  # type: ignore[index]


async def test_a_redelivery_that_cannot_read_its_index_is_retried_and_says_why() -> None:
    """The gate's marker says this event passed, but its index reads nothing (a replica
    behind, or removed by hand): abandoned for a redelivery, nothing written in any SKU."""
    store = stocked(A=10)
    accepted = event_message("o-1", 1, {"A": 2})
    await handle(store, accepted)
    del store.documents[("order:o-1", ORDER_INDEX_ID)]

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert (redelivered.outcome, redelivered.settlement) == (
        Outcome.TRANSIENT,
        Settlement.ABANDON,
    )
    assert redelivered.description == (
        "TransientStoreError: the index of order o-1 is not readable yet, though its marker "
        "is: a replica behind"
    )
    assert reserved(store, "A") == 2 == reservations_sum(store, "A")


async def test_a_redelivery_whose_index_reads_an_older_version_is_retried_and_says_why() -> None:
    store = stocked(A=10)
    await handle(store, event_message("o-1", 1, {"A": 2}))
    amended = event_message("o-1", 2, {"A": 3})
    await handle(store, amended)
    store.documents[("order:o-1", ORDER_INDEX_ID)]["orderVersion"] = 1  # a replica behind

    redelivered = await handle(store, replace(amended, delivery_count=2))

    assert (redelivered.outcome, redelivered.settlement) == (
        Outcome.TRANSIENT,
        Settlement.ABANDON,
    )
    assert redelivered.description == (
        "TransientStoreError: the index of order o-1 reads version 1, behind version 2 its "
        "marker says it applied: a replica behind"
    )
    assert reserved(store, "A") == 3 == reservations_sum(store, "A")


async def test_a_redelivered_acceptance_reads_its_reservation_before_writing_there() -> None:
    # A redelivery reads first (shared.kit.consumer.Blind): the gate's refused batch, its
    # marker read twice (compared, then how it was handled) and its index read, then in A the
    # read that finds its version: nothing written there, and no proof that the gate is still
    # at it (that precedes a first write).
    store = stocked(A=10)
    accepted = event_message("o-1", 1, {"A": 2})
    await handle(store, accepted)
    store.requests.clear()

    redelivered = await handle(store, replace(accepted, delivery_count=2))

    assert redelivered.outcome is Outcome.DUPLICATE
    assert store.requests == ["batch", "read", "read", "read", "read"]
    assert reserved(store, "A") == 2


async def test_a_change_that_keeps_a_skus_quantity_leaves_its_stock_item_untouched() -> None:
    """The stock item moves by the difference only: where a change wants what the order
    already holds, its batch writes the reservation alone, so the stock item is not written
    (its ``_ts`` stays the first event's), even when its on-hand count was lowered below what
    is reserved there."""
    now = [1_000.0]
    store = InMemoryDocumentStore(clock=lambda: now[0])
    store.documents[("A", STOCK_ITEM_ID)] = stock_item("A", 10)
    store.documents[("B", STOCK_ITEM_ID)] = stock_item("B", 10)
    await handle(store, event_message("o-1", 1, {"A": 2, "B": 1}))
    store.documents[("A", STOCK_ITEM_ID)]["onHand"] = 1  # counted again: fewer than reserved
    now[0] = 1_100.0

    amended = await handle(store, event_message("o-1", 2, {"A": 2, "B": 3}))

    assert (amended.outcome, amended.measures) == (Outcome.PROCESSED, {})
    stock_a = store.documents[("A", STOCK_ITEM_ID)]
    assert (stock_a["reserved"], stock_a["_ts"]) == (2, 1_000)
    assert (reserved(store, "B"), store.documents[("B", STOCK_ITEM_ID)]["_ts"]) == (3, 1_100)
    record = reservation(store, "A", "o-1")
    assert record is not None and (record["orderVersion"], record["reserved"]) == (2, 2)
