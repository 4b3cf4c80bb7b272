"""The topic model: duplicate detection as infra/messaging.json configures it, refused sends
accept nothing, the subscription delivers what the topic accepted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusServerBusyError

from local.broker import ManualClock
from local.topic import OrderEventsTopic
from tests.infra.infra_support import iso_duration, messaging


async def send(topic: OrderEventsTopic, *message_ids: str) -> None:
    batch = await topic.create_message_batch()
    for message_id in message_ids:
        batch.add_message(ServiceBusMessage(b"{}", message_id=message_id))
    await topic.send_messages(batch)


async def test_duplicates_are_dropped_within_the_window_of_messaging_json_only(
    clock: ManualClock,
) -> None:
    topic = OrderEventsTopic.from_messaging_file(clock)
    window = iso_duration(messaging()["duplicateDetectionHistoryTimeWindow"])
    assert topic.name == messaging()["topicName"]

    await send(topic, "a", "b")
    clock.advance(window - timedelta(seconds=1))
    await send(topic, "a")  # inside the window: dropped
    clock.advance(timedelta(seconds=1))
    await send(topic, "b")  # the window (from the first accepted send) has passed: delivered

    assert [m.message_id for m in topic.delivered()] == ["a", "b", "b"]
    assert topic.stats.dropped_duplicates == 1


async def test_a_refused_send_accepts_none_of_its_batch(clock: ManualClock) -> None:
    topic = OrderEventsTopic.from_messaging_file(clock)
    topic.fail_next_sends(lambda: ServiceBusServerBusyError(message="busy"))

    with pytest.raises(ServiceBusServerBusyError):
        await send(topic, "a", "b")
    await send(topic, "a", "b")

    assert [m.message_id for m in topic.delivered()] == ["a", "b"]
    assert topic.stats.failed_sends == 1
