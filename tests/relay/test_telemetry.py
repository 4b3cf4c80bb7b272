"""The relay's telemetry under the names infra/ queries (docs/operations.md), read
from in-memory OpenTelemetry SDK exporters."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import ServiceBusServerBusyError
from opentelemetry.trace import SpanKind, StatusCode

from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids


async def test_publish_spans_metrics_and_logs_carry_the_agreed_names(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(timedelta(seconds=30))
    topic.fail_next_sends(lambda: ServiceBusServerBusyError(message="busy"), times=1)

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    failed, published = captured_relay.send_spans()
    for span in (failed, published):
        assert span.name == "send order-events"
        assert span.kind is SpanKind.PRODUCER
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "orders.relay"
        attributes = dict(span.attributes or {})
        assert (
            attributes.items()
            >= {
                "messaging.system": "servicebus",
                "messaging.operation.type": "send",
                "messaging.destination.name": "order-events",
                "messaging.message.id": event["eventId"],
                "orders.event_id": event["eventId"],
                "orders.order_id": order_id,
                "orders.topic": "order-events",
            }.items()
        )
    assert failed.attributes is not None and published.attributes is not None
    assert failed.attributes["orders.relay.outcome"] == "failed"
    assert failed.attributes["error.type"] == "ServiceBusServerBusyError"
    assert failed.status.status_code is StatusCode.ERROR
    assert published.attributes["orders.relay.outcome"] == "published"

    [published_point] = captured_relay.points("orders.relay.published")
    assert published_point.attributes == {"orders.topic": "order-events"}
    assert getattr(published_point, "value", None) == 1
    [lag] = captured_relay.points("orders.relay.lag")
    assert getattr(lag, "sum", None) == pytest.approx(30 + 5)  # accepted, +30 s, +5 s backoff
    assert captured_relay.total("orders.relay.failed") == 1

    levels = [(r.name, r.levelname) for r in caplog.records if r.name == "orders.relay"]
    assert ("orders.relay", "ERROR") in levels
    assert ("orders.relay", "INFO") in levels


async def test_the_publish_span_links_the_consumer_span_stored_with_the_outbox_document(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    # As the consumer stores it (build_documents); end to end: test_end_to_end.py.
    consumer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now(), traceparent=consumer)

    await change_feed.drain()

    [span] = captured_relay.send_spans()
    [link] = span.links
    assert f"{link.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{link.context.span_id:016x}" == "b7ad6b7169203331"
