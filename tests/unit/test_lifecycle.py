"""The order lifecycle in the decision core, over the in-memory store (held to the Cosmos DB
adapter by tests/contracts/test_order_store.py): every outcome, its documents and its cost."""

from __future__ import annotations

import json
from typing import Any

import pytest
from idempotent_consumer import IncomingMessage, Outcome, Settlement, marker_id

from local.standins.doubles import InMemoryOrderStore
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared.consumer.core import decide
from shared.consumer.lifecycle import CONSUMER_NAME
from shared.relay.outbox import outbox_document_id, version_event_id

ORDER = "ord-1001"


def placed(body: dict[str, Any] | None = None) -> IncomingMessage:
    return IncomingMessage(ORDER, json.dumps(body or order_body(ORDER)).encode(), "c", 1)


def amended(version: int, message_id: str | None = None, **fields: Any) -> IncomingMessage:
    body = json.dumps(amended_body(ORDER, version, **fields)).encode()
    message_id = message_id or lifecycle_message_id(ORDER, version)
    return IncomingMessage(message_id, body, "c", 1, subject="OrderAmended")


def cancelled(version: int, message_id: str | None = None, **fields: Any) -> IncomingMessage:
    body = json.dumps(cancelled_body(ORDER, version, **fields)).encode()
    message_id = message_id or lifecycle_message_id(ORDER, version)
    return IncomingMessage(message_id, body, "c", 1, subject="OrderCancelled")


def order(store: InMemoryOrderStore) -> dict[str, Any]:
    return store.documents[(ORDER, ORDER)]


def events(store: InMemoryOrderStore) -> list[tuple[str, int]]:
    found = [
        (doc["eventType"], doc["payload"]["orderVersion"])
        for doc in store.documents.values()
        if doc.get("type") == "outbox"
    ]
    return sorted(found, key=lambda event: event[1])


def snapshot(store: InMemoryOrderStore) -> str:
    return json.dumps(sorted(store.documents.items()), sort_keys=True)


def markers(store: InMemoryOrderStore) -> dict[str, str]:
    return {
        doc["messageId"]: doc["outcome"]
        for doc in store.documents.values()
        if doc.get("type") == "inbox"
    }


async def test_an_amendment_of_an_existing_order_is_one_request() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    store.requests.clear()

    decision = await decide(amended(2), store)

    assert decision.outcome is Outcome.PROCESSED
    assert decision.settlement is Settlement.COMPLETE
    assert store.requests == ["batch"]
    stored = order(store)
    assert stored["orderVersion"] == 2
    assert stored["lines"][0]["quantity"] == 3
    assert stored["totalMinor"] == 3 * 1250 + 999
    assert stored["amendedAt"] == "2026-11-29T12:30:00Z"
    # What identifies the placed request is kept: a redelivered OrderPlaced stays a duplicate.
    assert stored["requestHash"] and stored["messageId"] == ORDER
    assert events(store) == [("OrderAccepted", 1), ("OrderAmended", 2)]
    event = store.documents[(ORDER, outbox_document_id(ORDER, 2))]
    assert event["eventId"] == version_event_id(ORDER, 2)
    assert event["causationId"] == lifecycle_message_id(ORDER, 2)
    assert markers(store) == {lifecycle_message_id(ORDER, 2): "processed"}
    marker = store.documents[(ORDER, marker_id(CONSUMER_NAME, lifecycle_message_id(ORDER, 2)))]
    assert marker["ttl"] > 0 and marker["consumer"] == CONSUMER_NAME


async def test_a_cancellation_sets_status_and_reason_and_publishes_its_event() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)

    decision = await decide(cancelled(2, reason="out of stock"), store)

    assert decision.outcome is Outcome.PROCESSED
    stored = order(store)
    assert (stored["status"], stored["orderVersion"]) == ("cancelled", 2)
    assert stored["cancellationReason"] == "out of stock"
    assert stored["cancelledAt"] == "2026-11-29T23:00:00Z"
    assert stored["lines"] == order_body(ORDER)["lines"]  # the state it cancelled is kept
    assert events(store) == [("OrderAccepted", 1), ("OrderCancelled", 2)]


async def test_a_redelivered_change_is_a_duplicate_and_changes_nothing() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(amended(2), store)
    before = snapshot(store)
    store.requests.clear()

    decision = await decide(amended(2), store)

    assert decision.outcome is Outcome.DUPLICATE
    assert decision.settlement is Settlement.COMPLETE
    assert store.requests == ["batch", "read"]  # the refused batch, the marker's read
    assert snapshot(store) == before


async def test_the_same_message_id_with_other_content_is_a_hash_mismatch() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(amended(2), store)
    before = snapshot(store)

    decision = await decide(amended(2, currency="USD"), store)

    assert decision.outcome is Outcome.MISMATCH
    assert decision.settlement is Settlement.DEADLETTER
    assert decision.deadletter_reason == "HashMismatch"
    assert decision.description is not None and "OrderAmended version 2" in decision.description
    assert snapshot(store) == before


async def test_a_first_delivery_of_an_older_version_is_stale() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(amended(3), store)
    state = order(store)
    store.requests.clear()

    decision = await decide(amended(2), store)

    assert decision.outcome is Outcome.STALE
    assert decision.settlement is Settlement.COMPLETE
    assert (decision.order_version, decision.stored_version) == (2, 3)
    assert store.requests == ["batch", "read", "create"]
    assert order(store) == state
    assert events(store) == [("OrderAccepted", 1), ("OrderAmended", 3)]
    assert markers(store)[lifecycle_message_id(ORDER, 2)] == "stale"
    # Its redelivery is a plain duplicate.
    assert (await decide(amended(2), store)).outcome is Outcome.DUPLICATE


async def test_a_producer_retry_under_a_new_message_id_is_stale() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(amended(2), store)

    decision = await decide(amended(2, message_id="retry-of-v2"), store)

    assert decision.outcome is Outcome.STALE
    assert events(store) == [("OrderAccepted", 1), ("OrderAmended", 2)]


async def test_an_amendment_before_the_order_creates_it_and_the_late_order_placed_is_stale() -> (
    None
):
    store = InMemoryOrderStore()

    first = await decide(amended(2), store)
    late = await decide(placed(), store)

    assert first.outcome is Outcome.PROCESSED
    assert late.outcome is Outcome.STALE
    assert (late.order_version, late.stored_version) == (1, 2)
    stored = order(store)
    assert (stored["status"], stored["orderVersion"], stored["createdBy"]) == (
        "accepted",
        2,
        "OrderAmended",
    )
    assert "requestHash" not in stored
    assert events(store) == [("OrderAmended", 2)]  # no OrderAccepted: version 1 never applied
    assert markers(store) == {lifecycle_message_id(ORDER, 2): "processed", ORDER: "stale"}
    # The late OrderPlaced's redelivery is a duplicate; another body under its id a mismatch.
    assert (await decide(placed(), store)).outcome is Outcome.DUPLICATE
    other = await decide(placed(order_body(ORDER, currency="USD")), store)
    assert other.deadletter_reason == "HashMismatch"


async def test_a_cancellation_before_the_order_leaves_a_tombstone_that_makes_the_rest_stale() -> (
    None
):
    store = InMemoryOrderStore()

    await decide(cancelled(3), store)

    stored = order(store)
    assert (stored["status"], stored["orderVersion"]) == ("cancelled", 3)
    assert (await decide(placed(), store)).outcome is Outcome.STALE
    assert (await decide(amended(2), store)).outcome is Outcome.STALE
    assert events(store) == [("OrderCancelled", 3)]


async def test_a_change_after_the_cancellation_is_an_invalid_transition_and_writes_nothing() -> (
    None
):
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(cancelled(2), store)
    before = snapshot(store)

    amendment = await decide(amended(3), store)
    second_cancellation = await decide(cancelled(4, message_id="c4"), store)

    for decision in (amendment, second_cancellation):
        assert decision.outcome is Outcome.INVALID
        assert decision.settlement is Settlement.DEADLETTER
        assert decision.deadletter_reason == "InvalidTransition"
        assert decision.description is not None
        assert "cancellation at version 2" in decision.description
    assert snapshot(store) == before


async def test_a_redelivered_order_placed_after_amendments_is_still_a_duplicate_or_a_mismatch() -> (
    None
):
    store = InMemoryOrderStore()
    await decide(placed(), store)
    await decide(amended(2), store)

    assert (await decide(placed(), store)).outcome is Outcome.DUPLICATE
    other = await decide(placed(order_body(ORDER, customerId="cust-43")), store)
    assert other.deadletter_reason == "HashMismatch"
    assert other.description is not None and "version 2" in other.description


async def test_an_order_stored_before_versions_existed_is_version_1() -> None:
    store = InMemoryOrderStore()
    await decide(placed(), store)
    del store.documents[(ORDER, ORDER)]["orderVersion"]

    decision = await decide(amended(2), store)

    assert decision.outcome is Outcome.PROCESSED
    assert order(store)["orderVersion"] == 2


@pytest.mark.parametrize(
    ("subject", "body", "message_id", "reason"),
    [
        ("OrderShipped", amended_body(ORDER, 2), "m-1", "UnsupportedMessageType"),
        ("OrderAmended", amended_body(ORDER, 2), ORDER, "MessageIdMismatch"),
        ("OrderCancelled", cancelled_body(ORDER, 2), "x" * 129, "MessageIdMismatch"),
        ("OrderCancelled", cancelled_body(ORDER, 2), None, "MissingMessageId"),
        ("OrderAmended", amended_body(ORDER, 1), "m-1", "InvalidPayload"),
        ("OrderAmended", amended_body(ORDER, 2**31), "m-1", "InvalidPayload"),
        ("OrderAmended", amended_body(ORDER, 2, amendedAt="yesterday"), "m-1", "InvalidPayload"),
        ("OrderCancelled", cancelled_body(ORDER, 2, reason=""), "m-1", "InvalidPayload"),
        ("OrderCancelled", cancelled_body(ORDER, 2, reason="r" * 257), "m-1", "InvalidPayload"),
        ("OrderCancelled", cancelled_body(ORDER, 2, orderVersion="2"), "m-1", "InvalidPayload"),
        (None, order_body(ORDER, orderVersion=2), ORDER, "InvalidPayload"),
        ("OrderPlaced", order_body(ORDER, orderVersion=True), ORDER, "InvalidPayload"),
    ],
)
async def test_an_invalid_lifecycle_message_is_dead_lettered_with_its_reason_and_writes_nothing(
    subject: str | None, body: dict[str, Any], message_id: str | None, reason: str
) -> None:
    store = InMemoryOrderStore()
    message = IncomingMessage(message_id, json.dumps(body).encode(), "c", 1, subject=subject)

    decision = await decide(message, store)

    assert (decision.outcome, decision.deadletter_reason) == (Outcome.INVALID, reason)
    assert store.documents == {} and store.requests == []


async def test_order_placed_with_version_1_is_the_same_request_as_without() -> None:
    store = InMemoryOrderStore()
    await decide(placed(order_body(ORDER, orderVersion=1)), store)

    assert (await decide(placed(), store)).outcome is Outcome.DUPLICATE
    assert (
        "orderVersion" not in store.documents[(ORDER, ORDER)] or order(store)["orderVersion"] == 1
    )
