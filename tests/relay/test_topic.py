"""The topic model: duplicate detection as infra/messaging.json configures it, refused sends
accept nothing, the subscription delivers what the topic accepted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusServerBusyError

from local.standins.broker import ManualClock
from local.standins.topic import RETAINED_SUBSCRIPTION, OrderEventsTopic
from ops.durations import parse_iso8601_duration as iso_duration  # the one parser
from tests.infra.infra_support import messaging


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


async def test_a_topic_without_subscriptions_accepts_a_send_and_keeps_nothing(
    clock: ManualClock,
) -> None:
    """As Service Bus does (a topic stores messages only in its subscriptions): the send
    succeeds and the message is gone; what it was sent before a subscription existed never
    reaches it. Fails on 223dafd: the model had one subscription that always existed, so the
    relay's "marked dispatched, delivered nowhere" could not happen here."""
    topic = OrderEventsTopic.from_messaging_file(clock, subscriptions=())

    await send(topic, "before")  # no error: the sender cannot tell
    billing = topic.add_subscription("billing")
    await send(topic, "after")

    assert topic.stats.accepted == 2
    assert topic.stats.dropped_no_subscription == 1
    assert [m.message_id for m in topic.delivered("billing")] == ["after"]
    assert billing.is_idle()


async def test_every_subscription_receives_a_copy_and_the_retained_one_exists_from_the_start(
    clock: ManualClock,
) -> None:
    topic = OrderEventsTopic.from_messaging_file(clock)  # the subscriptions the Bicep deploys
    assert list(topic.subscriptions) == [RETAINED_SUBSCRIPTION]

    await send(topic, "a")
    topic.add_subscription("billing")  # a downstream team joins
    await send(topic, "b")

    assert [m.message_id for m in topic.delivered()] == ["a", "b"]  # retained kept both
    assert [m.message_id for m in topic.delivered("billing")] == ["b"]
    assert topic.stats.dropped_no_subscription == 0
