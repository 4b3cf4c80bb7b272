"""From the orders queue to the order-events subscription: the consumer (through the local
Functions host) writes orders and their outbox documents, the change feed delivers them to the
relay, and downstream receives exactly one OrderAccepted per accepted order."""

from __future__ import annotations

import json

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import OperationTimeoutError

from local.assembly.world import World
from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.host import LocalFunctionsHost
from local.standins.topic import OrderEventsTopic
from tests.orders import message, order_body
from tests.relay.conftest import RelayCaptured, new_order_ids
from tests.state import documents
from tests.telemetry.conftest import make_captured


async def test_exactly_one_order_accepted_per_accepted_order_none_for_rejected_none_pending(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
) -> None:
    accepted = new_order_ids(4)
    for order_id in accepted:
        queue.send(message(order_body(order_id), message_id=order_id))
    await host.run_until_idle()
    topic.fail_next_sends(lambda: OperationTimeoutError(message="timed out"), times=1)
    await change_feed.drain()
    # Later: a producer retry (a duplicate), the same id with another body (dead-lettered
    # HashMismatch), a poison message, after the broker's detection window.
    clock.advance(queue.settings.duplicate_detection_window)
    queue.send(message(order_body(accepted[0]), message_id=accepted[0]))
    queue.send(message(order_body(accepted[1], currency="USD"), message_id=accepted[1]))
    queue.send(message(b"{not json", message_id="poison-1"))
    await host.run_until_idle()
    await change_feed.drain()

    assert sorted(d.reason for d in queue.dead_letters) == ["HashMismatch", "InvalidPayload"]
    delivered = topic.delivered()
    assert sorted(json.loads(m.body)["payload"]["orderId"] for m in delivered) == sorted(accepted)
    assert len({m.message_id for m in delivered}) == len(accepted)
    outbox = [d for d in await documents(container) if d["type"] == "outbox"]
    assert len(outbox) == len(accepted)
    assert {d["status"] for d in outbox} == {"dispatched"}


async def test_the_publish_span_links_the_consumer_span_that_accepted_the_order(
    world: World,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    captured_relay: RelayCaptured,
) -> None:
    # The consumer stores its span's traceparent on the outbox document; the relay's PRODUCER
    # span links it, and the published message carries the relay span's own traceparent.
    consumer = make_captured()
    world.compose(
        telemetry=consumer.telemetry, relay_telemetry=captured_relay.telemetry, jitter=lambda: 1.0
    )
    [order_id] = new_order_ids(1)
    queue.send(message(order_body(order_id), message_id=order_id))
    await host.run_until_idle()
    await change_feed.drain()

    [consumer_span] = consumer.consumer_spans()
    accepted = consumer_span.context
    assert accepted is not None
    [outbox] = [d for d in await documents(container) if d["type"] == "outbox"]
    assert outbox["traceparent"] == (
        f"00-{accepted.trace_id:032x}-{accepted.span_id:016x}-{accepted.trace_flags:02x}"
    )
    [publish] = captured_relay.send_spans()
    [link] = publish.links
    assert (link.context.trace_id, link.context.span_id) == (accepted.trace_id, accepted.span_id)
    [delivered] = topic.delivered()
    published = publish.context
    assert published is not None
    assert delivered.application_properties["traceparent"] == (
        f"00-{published.trace_id:032x}-{published.span_id:016x}-{published.trace_flags:02x}"
    )
