"""The relay as the worker invokes it: the change feed's documents delivered to
``function_app.relay_outbox``, real ``ServiceBusMessage`` objects sent to the topic model, the
outbox documents read back from Cosmos DB."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import ServiceBusConnectionError

from local.broker import ManualClock
from local.change_feed import BatchInvoker, ChangeFeedEmulator, RetryAttempt
from local.topic import OrderEventsTopic
from shared.relay import DISPATCHED_TTL_S, RelayIncomplete
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids
from tests.state import documents

FIRST = RetryAttempt(0, -1)


async def outbox(container: ContainerProxy) -> dict[str, dict[str, Any]]:
    return {d["orderId"]: d for d in await documents(container) if d["type"] == "outbox"}


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
    stored = await outbox(container)
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
    invoke: BatchInvoker,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    order, event = await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()

    await invoke(
        [
            order,
            {**event, "status": "dispatched"},
            {**event, "status": "parked"},
            {**event, "type": "order"},
        ],
        FIRST,
    )
    assert topic.stats.sends == 0
    assert (await outbox(container))[order_id]["status"] == "pending"

    await invoke(batch, FIRST)  # the pending one is published ...
    [dispatched] = [d for d in await change_feed.read_changes() if d["type"] == "outbox"]
    await invoke([dispatched], FIRST)  # ... and its mark, coming back as a change, is ignored
    assert topic.stats.messages == 1


async def test_replaying_the_same_batch_publishes_the_same_message_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    invoke: BatchInvoker,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    for order_id in new_order_ids(2):
        await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()

    await invoke(batch, FIRST)
    await invoke(batch, FIRST)  # the same batch again: a crash before the checkpoint

    first, second = topic.received[:2], topic.received[2:]
    assert [m.message_id for m in first] == [m.message_id for m in second]
    assert [m.body for m in first] == [m.body for m in second]
    assert topic.stats.dropped_duplicates == 2
    assert len(topic.delivered()) == 2
    assert {d["status"] for d in (await outbox(container)).values()} == {"dispatched"}


async def test_a_send_failure_raises_and_leaves_the_document_pending_until_a_retry_succeeds(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    invoke: BatchInvoker,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: ServiceBusConnectionError(message="link detached"), times=3)
    batch = await change_feed.read_changes()

    with pytest.raises(RelayIncomplete):
        await invoke(batch, FIRST)
    assert (await outbox(container))[order_id]["status"] == "pending"

    # Through the change feed: not checkpointed, retried on the policy's backoff (5 s, 10 s ...)
    # until the topic accepts the send.
    started = clock.now()
    stats = await change_feed.drain()
    assert stats.failed_invocations == 2
    assert clock.now() - started == timedelta(seconds=5 + 10)
    assert (await outbox(container))[order_id]["status"] == "dispatched"
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
    assert change_feed.lease.checkpoint == {}
    assert {d["status"] for d in (await outbox(container)).values()} == {"pending"}
    topic.heal()
    await change_feed.drain()
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in (await outbox(container)).values()
    )


async def test_a_stale_replay_never_overwrites_the_first_mark(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    invoke: BatchInvoker,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()
    await invoke(batch, FIRST)
    first = (await outbox(container))[order_id]

    clock.advance(timedelta(hours=1))
    await invoke(batch, FIRST)  # the old version again: its etag no longer matches

    assert (await outbox(container))[order_id]["_etag"] == first["_etag"]
    assert (await outbox(container))[order_id]["dispatchedAt"] == first["dispatchedAt"]


async def test_changes_are_delivered_in_batches_of_at_most_max_items(
    container: ContainerProxy,
    invoke: BatchInvoker,
    relay: object,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    for order_id in new_order_ids(5):
        await accept_order(container, order_id, accepted_at=clock.now())
    sizes: list[int] = []

    async def counting(documents: list[dict[str, Any]], attempt: RetryAttempt) -> None:
        sizes.append(len(documents))
        await invoke(documents, attempt)

    feed = ChangeFeedEmulator(container, counting, clock=clock, max_items_per_invocation=4)
    stats = await feed.drain()

    # 10 documents (orders and outbox entries), then the 5 marks coming back as changes.
    assert sum(sizes) == stats.delivered_documents == 15
    assert max(sizes) == 4
    assert len(topic.delivered()) == 5
