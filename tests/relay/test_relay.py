"""The relay as the worker invokes it: the change feed's documents delivered to ``relay_outbox``
through Microsoft's worker (``json`` typed data, the host's retry context), real
``ServiceBusMessage`` objects sent to the topic model, the outbox documents read back from Cosmos
DB."""

from __future__ import annotations

import json
from datetime import timedelta

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import ServiceBusConnectionError

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from shared.relay.outbox import DISPATCHED_TTL_S
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order
from tests.state import documents


async def test_each_pending_outbox_document_becomes_one_message_with_every_property(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    ids = new_order_ids(3)
    written = {i: await accept_order(container, i, accepted_at=clock.now()) for i in ids}
    clock.advance(timedelta(seconds=2))

    stats = await change_feed.drain()

    assert stats.failed_invocations == 0
    assert topic.stats.sends == 1  # the three events fit in one ServiceBusMessageBatch
    delivered = {m.message_id: m for m in topic.delivered()}
    spans = {s.attributes["orders.event_id"]: s for s in captured_relay.send_spans()}  # type: ignore[index]
    stored = await outbox_by_order(container)
    assert len(delivered) == 3
    for order_id, (order, event) in written.items():
        message = delivered[event["eventId"]]
        assert message.content_type == "application/json"
        assert message.subject == "OrderAccepted"
        assert message.correlation_id == f"corr-{order_id}"
        span = spans[event["eventId"]].context
        assert message.application_properties == {
            "eventType": "OrderAccepted",
            "schemaVersion": 1,
            "causationId": order_id,
            "traceparent": f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.trace_flags:02x}",
        }
        assert json.loads(message.body) == {
            "schemaVersion": 1,
            "eventId": event["eventId"],
            "eventType": "OrderAccepted",
            "occurredAt": "2026-11-29T12:00:00Z",
            "payload": event["payload"],
        }
        assert stored[order_id]["status"] == "dispatched"
        assert stored[order_id]["dispatchedAt"] == "2026-11-29T12:00:02.000000Z"
        assert stored[order_id]["ttl"] == DISPATCHED_TTL_S
        assert "ttl" not in order  # orders never expire (defaultTtl -1)
    orders = [d for d in await documents(container) if d["type"] == "order"]
    assert all("ttl" not in d for d in orders)


async def test_orders_and_already_dispatched_or_parked_documents_are_ignored(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    order, event = await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()

    ignored = await change_feed.invoke(
        [
            order,
            {**event, "status": "dispatched"},
            {**event, "status": "parked"},
            {**event, "type": "order"},
        ]
    )
    assert ignored.succeeded, ignored.error
    assert topic.stats.sends == 0
    assert (await outbox_by_order(container))[order_id]["status"] == "pending"

    await change_feed.invoke(batch)  # the pending one is published ...
    [dispatched] = [d for d in await change_feed.read_changes() if d["type"] == "outbox"]
    await change_feed.invoke([dispatched])  # ... and its mark, coming back as a change, is ignored
    assert topic.stats.messages == 1


async def test_replaying_the_same_batch_publishes_the_same_message_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    for order_id in new_order_ids(2):
        await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()

    await change_feed.invoke(batch)
    await change_feed.invoke(batch)  # the same batch again: a crash before the checkpoint

    first, second = topic.received[:2], topic.received[2:]
    assert [m.message_id for m in first] == [m.message_id for m in second]
    assert [m.body for m in first] == [m.body for m in second]
    assert topic.stats.dropped_duplicates == 2
    assert len(topic.delivered()) == 2
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"dispatched"}


async def test_a_send_failure_raises_and_leaves_the_document_pending_until_a_retry_succeeds(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: ServiceBusConnectionError(message="link detached"), times=3)
    batch = await change_feed.read_changes()

    first = await change_feed.invoke(batch)
    assert not first.succeeded
    assert str(first.error).startswith("RelayIncomplete: ")  # the worker's own report
    assert (await outbox_by_order(container))[order_id]["status"] == "pending"

    # Through the change feed: not checkpointed, retried on the policy's backoff (5 s, 10 s ...)
    # until the topic accepts the send.
    started = clock.now()
    stats = await change_feed.drain()
    assert stats.failed_invocations == 1 + 2
    assert clock.now() - started == timedelta(seconds=5 + 10)
    assert (await outbox_by_order(container))[order_id]["status"] == "dispatched"
    assert len(topic.delivered()) == 1
    [failed] = captured_relay.points("orders.relay.failed")
    assert failed.attributes == {
        "orders.topic": "order-events",
        "error.type": "ServiceBusConnectionError",
    }
    assert getattr(failed, "value", None) == 3


async def test_a_failed_batch_is_not_checkpointed_past(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    ids = new_order_ids(2)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: ServiceBusConnectionError(message="namespace down"), times=100)

    stats = await change_feed.drain(max_attempts_per_batch=20)

    assert stats.stalled
    assert change_feed.lease.continuation is None  # not checkpointed past
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}
    topic.heal()
    await change_feed.drain()
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in (await outbox_by_order(container)).values()
    )


async def test_a_stale_replay_never_overwrites_the_first_mark(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()
    await change_feed.invoke(batch)
    first = (await outbox_by_order(container))[order_id]

    clock.advance(timedelta(hours=1))
    await change_feed.invoke(batch)  # the old version again: its etag no longer matches

    assert (await outbox_by_order(container))[order_id]["_etag"] == first["_etag"]
    assert (await outbox_by_order(container))[order_id]["dispatchedAt"] == first["dispatchedAt"]


async def test_changes_are_delivered_in_batches_of_at_most_max_items(
    container: ContainerProxy,
    world: World,
    relay: object,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    for order_id in new_order_ids(5):
        await accept_order(container, order_id, accepted_at=clock.now())

    feed = ChangeFeedEmulator(container, world.worker, clock=clock, max_items_per_invocation=4)
    stats = await feed.drain()

    # 10 documents (orders and outbox entries), then the 5 marks coming back as changes.
    assert sum(stats.batch_sizes) == stats.delivered_documents == 15
    assert max(stats.batch_sizes) == 4
    assert len(topic.delivered()) == 5


async def test_the_retry_policy_is_the_one_the_worker_reports(world: World) -> None:
    # Read from the worker's metadata (RpcRetryOptions), not from a copy of the decorator.
    function = world.worker.functions["relay_outbox"]
    schedule = world.change_feed.retry
    assert function.max_retry_count == schedule.max_retry_count == -1
    assert (schedule.minimum_s, schedule.maximum_s, schedule.exponential) == (5.0, 300.0, True)
    assert [schedule.delay_s(n) for n in (1, 2, 3, 7, 8)] == [5, 10, 20, 300, 300]
