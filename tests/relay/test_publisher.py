"""The Service Bus adapter packs an invocation's events into as few ``ServiceBusMessageBatch``
sends as the entity's size limit allows (the SDK's own size accounting), and an event larger
than the limit is the event's fault: parked, never retried, never blocking the others."""

from __future__ import annotations

from azure.cosmos.aio import ContainerProxy

from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from shared.relay.core import PARKED_REJECTED
from tests.relay.conftest import accept_order, new_order_ids, outbox_by_order


async def test_events_are_packed_into_as_few_batches_as_their_size_allows(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    ids = new_order_ids(7)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    topic.max_batch_bytes = 1500  # two or three of these messages per batch

    await change_feed.drain()

    assert 1 < topic.stats.sends <= 4  # not one send per event, nor one oversized batch
    assert topic.stats.accepted == 7
    assert len(topic.delivered()) == 7


async def test_an_event_too_large_for_the_topic_is_parked_and_the_others_go_out(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    small, large = new_order_ids(2)
    await accept_order(container, small, accepted_at=clock.now())
    await accept_order(container, large, accepted_at=clock.now(), customerId="c" * 64)
    topic.max_batch_bytes = 700  # about 670 bytes fit; the large order's ~730 alone do not

    stats = await change_feed.drain()

    assert stats.failed_invocations == 0
    outbox = await outbox_by_order(container)
    assert outbox[small]["status"] == "dispatched"
    assert outbox[large]["status"] == "parked"
    assert outbox[large]["parkedReason"] == PARKED_REJECTED
    assert [m.message_id for m in topic.delivered()] == [outbox[small]["eventId"]]
