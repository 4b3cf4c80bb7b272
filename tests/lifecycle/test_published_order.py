"""The events of one order reach the topic in version order: the relay never sends a later
version ahead of one it could not publish (``OutboxRelay._isolate``), through Microsoft's worker,
the change-feed emulation and the topic model."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus._pyamqp.error import ErrorCondition

from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.host import LocalFunctionsHost
from local.standins.topic import OrderEventsTopic
from ops.sample_orders import amended_body, lifecycle_message_id, order_body
from shared.relay.core import RelayPolicy
from shared.relay.outbox import order_event_id, version_event_id
from tests.relay.amqp_link import service_bus_error
from tests.state import documents


def versions_published(topic: OrderEventsTopic) -> dict[str, list[int]]:
    published: dict[str, list[int]] = {}
    for message in topic.delivered():
        payload: dict[str, Any] = json.loads(message.body)["payload"]
        published.setdefault(payload["orderId"], []).append(payload["orderVersion"])
    return published


async def test_a_later_version_waits_for_an_earlier_one_that_fails_and_goes_once_it_is_parked(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    """The order's OrderAccepted is refused by the broker every time (a condition nobody
    classified); its OrderAmended v2 sits in the same relay batch. Without the hold, the
    isolation pass published v2 at once, ahead of v1 (and v1 would follow if it recovered)."""
    poisoned, healthy = "ord-held-1", "ord-held-2"
    for order_id in (poisoned, healthy):
        queue.send(OutgoingMessage(order_id, json.dumps(order_body(order_id)).encode()))
        await host.run_until_idle()  # placed first: the host runs deliveries concurrently
        queue.send(
            OutgoingMessage(
                lifecycle_message_id(order_id, 2),
                json.dumps(amended_body(order_id, 2)).encode(),
                subject="OrderAmended",
            )
        )
        await host.run_until_idle()
    topic.fail_sends_of(
        order_event_id(poisoned), lambda: service_bus_error(ErrorCondition.DecodeError)
    )

    stats = await change_feed.drain(max_attempts_per_batch=30)

    assert not stats.stalled
    assert stats.failed_invocations == RelayPolicy().park_after_attempts - 1
    published = versions_published(topic)
    assert published[healthy] == [1, 2]
    assert published[poisoned] == [2]  # only after v1 was parked, never ahead of it
    statuses = {
        doc["eventId"]: doc["status"]
        for doc in await documents(container)
        if doc["type"] == "outbox"
    }
    assert statuses[order_event_id(poisoned)] == "parked"
    assert statuses[version_event_id(poisoned, 2)] == "dispatched"


def test_a_batch_s_events_go_out_in_each_order_s_version_order() -> None:
    """Whatever order a batch brings them in (a feed read merged across ranges, a watchdog
    page), an order's later version never goes first; other orders keep their places."""
    from datetime import UTC, datetime

    from shared.consumer.contract import parse_message
    from shared.relay.core import build_event, in_version_order
    from shared.relay.outbox import new_change_outbox_document

    def event(order_id: str, version: int) -> Any:
        body = json.dumps(amended_body(order_id, version)).encode()
        change = parse_message(body, lifecycle_message_id(order_id, version), "OrderAmended")
        assert not isinstance(change, type(None))
        document = new_change_outbox_document(
            change,  # type: ignore[arg-type]
            correlation_id=None,
            created_at=datetime(2026, 11, 30, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        )
        return build_event(document)

    batch = [event("ord-a", 3), event("ord-b", 2), event("ord-a", 2), event("ord-b", 4)]

    ordered = [(e.order_id, e.order_version) for e in in_version_order(batch)]

    assert ordered == [("ord-a", 2), ("ord-a", 3), ("ord-b", 2), ("ord-b", 4)]


async def test_a_held_version_stays_pending_until_it_is_sent(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After the invocation that holds v2 behind its failing v1, v2 is neither on the topic nor
    marked ``dispatched`` (a held event counted as published would be marked, and once the
    lease moved past the batch never sent), and the hold stops nothing else: another order's
    events later in the batch are isolated and published in that same invocation."""
    held, other = "ord-held-3", "ord-held-4"
    for order_id in (held, other):
        queue.send(OutgoingMessage(order_id, json.dumps(order_body(order_id)).encode()))
        await host.run_until_idle()  # placed first: the host runs deliveries concurrently
        queue.send(
            OutgoingMessage(
                lifecycle_message_id(order_id, 2),
                json.dumps(amended_body(order_id, 2)).encode(),
                subject="OrderAmended",
            )
        )
        await host.run_until_idle()
    topic.fail_sends_of(order_event_id(held), lambda: service_bus_error(ErrorCondition.DecodeError))

    with caplog.at_level(logging.ERROR, logger="orders.relay"):
        stats = await change_feed.drain(max_attempts_per_batch=1)

    assert stats.stalled and stats.failed_invocations == 1
    assert versions_published(topic) == {other: [1, 2]}
    # What the operator reads of v2: why it was not sent.
    assert any(
        f"held: an earlier event of order {held} was not published" in record.getMessage()
        for record in caplog.records
    )
    statuses = {
        doc["eventId"]: doc["status"]
        for doc in await documents(container)
        if doc["type"] == "outbox" and doc["orderId"] == held
    }
    assert statuses == {order_event_id(held): "pending", version_event_id(held, 2): "pending"}


async def test_a_version_is_held_until_the_very_failure_that_parks_its_predecessor(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
) -> None:
    """One invocation short of the parking bound, v1 is still retried, so v2 is still held:
    the relay predicts the park from v1's count so far plus this one failure, never more."""
    order_id = "ord-held-5"
    queue.send(OutgoingMessage(order_id, json.dumps(order_body(order_id)).encode()))
    # Placed first: the host runs deliveries concurrently, and an amendment applied before its
    # OrderPlaced makes the OrderPlaced stale, with no v1 event to hold v2 behind.
    await host.run_until_idle()
    queue.send(
        OutgoingMessage(
            lifecycle_message_id(order_id, 2),
            json.dumps(amended_body(order_id, 2)).encode(),
            subject="OrderAmended",
        )
    )
    await host.run_until_idle()
    topic.fail_sends_of(
        order_event_id(order_id), lambda: service_bus_error(ErrorCondition.DecodeError)
    )

    stats = await change_feed.drain(max_attempts_per_batch=RelayPolicy().park_after_attempts - 1)

    assert stats.stalled
    assert versions_published(topic) == {}
