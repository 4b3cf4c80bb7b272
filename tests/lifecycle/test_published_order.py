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
