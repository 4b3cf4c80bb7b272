"""The consumer span: one per delivery, messaging semantic conventions, producer links, status
rules, and the Cosmos DB SDK's spans as its children."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from idempotent_consumer import IncomingMessage
from idempotent_consumer.telemetry import producer_links
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import messaging_attributes as semconv
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared.telemetry import names as telemetry
from tests.orders import message, order_body
from tests.telemetry.conftest import Captured, deliver_twice

TRACE_ID = "1" * 32
SPAN_ID = "2" * 16
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"
OTHER_TRACEPARENT = f"00-{'3' * 32}-{'4' * 16}-01"


def only(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [span.name for span in spans]
    return spans[0]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def exception_events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(event.attributes or {}) for event in span.events if event.name == "exception"]


def test_attribute_names_are_the_semantic_conventions_names() -> None:
    assert telemetry.ATTR_SYSTEM == semconv.MESSAGING_SYSTEM
    assert semconv.MessagingSystemValues.SERVICEBUS.value == telemetry.MESSAGING_SYSTEM
    assert telemetry.ATTR_OPERATION_TYPE == semconv.MESSAGING_OPERATION_TYPE
    assert semconv.MessagingOperationTypeValues.PROCESS.value == telemetry.OPERATION_TYPE
    assert telemetry.ATTR_OPERATION_NAME == semconv.MESSAGING_OPERATION_NAME
    assert telemetry.ATTR_DESTINATION == semconv.MESSAGING_DESTINATION_NAME
    assert telemetry.ATTR_SUBSCRIPTION == semconv.MESSAGING_DESTINATION_SUBSCRIPTION_NAME
    assert telemetry.ATTR_MESSAGE_ID == semconv.MESSAGING_MESSAGE_ID
    assert telemetry.ATTR_CONVERSATION_ID == semconv.MESSAGING_MESSAGE_CONVERSATION_ID
    assert telemetry.ATTR_DELIVERY_COUNT == semconv.MESSAGING_SERVICEBUS_MESSAGE_DELIVERY_COUNT
    assert telemetry.ATTR_DISPOSITION == semconv.MESSAGING_SERVICEBUS_DISPOSITION_STATUS
    assert telemetry.ATTR_ERROR_TYPE == error_attributes.ERROR_TYPE


async def test_one_consumer_span_per_delivery_with_messaging_attributes(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured, clock: ManualClock
) -> None:
    await deliver_twice(
        telemetry_host,
        queue,
        clock,
        message(order_body(), traceparent=TRACEPARENT),
        message(order_body(), correlation_id="corr-2"),
    )

    first, second = captured.consumer_spans()
    assert first.name == "process orders"  # what the P95 alert and the KQL query
    assert first.kind is SpanKind.CONSUMER
    assert first.parent is None  # no ambient context here; the producer is a link
    assert first.status.status_code is StatusCode.UNSET
    assert (
        attributes(first).items()
        >= {
            "messaging.system": "servicebus",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": "orders",
            "messaging.message.id": "ord-1001",
            "messaging.message.conversation_id": "corr-1",
            "messaging.servicebus.message.delivery_count": 1,
            "messaging.servicebus.disposition_status": "complete",
            "orders.outcome": "processed",
            "orders.settlement": "complete",
            "orders.consumer": "orders",  # the queue's consumer (names.md)
            # the kept copies: the exporter drops messaging.* (test_envelopes.py)
            "orders.queue": "orders",
            "orders.message_id": "ord-1001",
            "orders.correlation_id": "corr-1",
            "orders.delivery_count": 1,
            "orders.order_id": "ord-1001",
        }.items()
    )
    assert error_attributes.ERROR_TYPE not in attributes(first)
    assert semconv.MESSAGING_DESTINATION_SUBSCRIPTION_NAME not in attributes(first)  # a queue
    assert "orders.error_type" not in attributes(first)
    [link] = first.links
    assert f"{link.context.trace_id:032x}" == TRACE_ID
    assert f"{link.context.span_id:016x}" == SPAN_ID
    assert link.context.is_remote
    assert first.context.trace_id != link.context.trace_id  # linked, not parented

    assert (
        attributes(second).items()
        >= {
            "orders.outcome": "duplicate",
            "messaging.servicebus.disposition_status": "complete",
            "messaging.message.conversation_id": "corr-2",
        }.items()
    )
    assert second.links == ()  # no trace context on the message: no link


async def test_diagnostic_id_links_the_span_to_the_producer(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured
) -> None:
    queue.send(message(order_body(), **{"Diagnostic-Id": TRACEPARENT}))

    await telemetry_host.run_until_idle()

    [link] = only(captured.consumer_spans()).links
    assert f"{link.context.trace_id:032x}" == TRACE_ID


@pytest.mark.parametrize(
    ("properties", "linked_trace"),
    [
        ({}, None),
        ({"traceparent": TRACEPARENT}, TRACE_ID),
        ({"Diagnostic-Id": TRACEPARENT}, TRACE_ID),
        ({"traceparent": TRACEPARENT, "Diagnostic-Id": OTHER_TRACEPARENT}, TRACE_ID),
        ({"traceparent": "garbage", "Diagnostic-Id": TRACEPARENT}, TRACE_ID),
        ({"traceparent": "garbage"}, None),
        ({"Diagnostic-Id": "|abc.1."}, None),  # legacy hierarchical Request-Id: not W3C
        ({"traceparent": f"00-{'0' * 32}-{SPAN_ID}-01"}, None),  # all-zero trace id: invalid
        ({"traceparent": 42}, None),
    ],
)
def test_producer_links(properties: dict[str, Any], linked_trace: str | None) -> None:
    links = producer_links(properties)

    if linked_trace is None:
        assert links == []
    else:
        [link] = links
        assert f"{link.context.trace_id:032x}" == linked_trace


async def test_a_dead_lettered_delivery_is_not_an_error_span(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured
) -> None:
    # The message is at fault, not the consumer (as a 4xx on an HTTP server span).
    queue.send(message(b"{orderId: ord-1001"))

    await telemetry_host.run_until_idle()

    span = only(captured.consumer_spans())
    assert span.status.status_code is StatusCode.UNSET
    assert (
        attributes(span).items()
        >= {
            "orders.outcome": "invalid",
            "orders.settlement": "deadletter",
            "orders.deadletter_reason": "InvalidPayload",
            "messaging.servicebus.disposition_status": (
                semconv.MessagingServicebusDispositionStatusValues.DEAD_LETTER.value
            ),
        }.items()
    )
    assert error_attributes.ERROR_TYPE not in attributes(span)
    assert exception_events(span) == []


async def test_a_transient_failure_is_an_error_span_without_an_exception_event(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    faulty: FaultInjectingTransport,
) -> None:
    faulty.add(FaultRule(FaultKind.STATUS, status=500, times=None, **WRITES))
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    span = only(captured.consumer_spans())
    assert span.status.status_code is StatusCode.ERROR
    assert (
        attributes(span).items()
        >= {
            "orders.outcome": "transient",
            "orders.settlement": "abandon",
            "messaging.servicebus.disposition_status": "abandon",
            "error.type": "idempotent_consumer.TransientStoreError",
            "orders.error_type": "idempotent_consumer.TransientStoreError",
        }.items()
    )
    assert exception_events(span) == []  # throttling and outages are routine: no stack traces


async def test_a_systemic_failure_is_an_error_span_with_the_exception(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    faulty: FaultInjectingTransport,
) -> None:
    faulty.add(FaultRule(FaultKind.STATUS, status=403, times=None, **WRITES))
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    span = only(captured.consumer_spans())
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description is not None
    assert "403" in span.status.description
    assert (
        attributes(span).items()
        >= {
            "orders.outcome": "systemic",
            "messaging.servicebus.disposition_status": "abandon",
            "error.type": "idempotent_consumer.SystemicStoreError",
        }.items()
    )
    [event] = exception_events(span)
    assert event["exception.type"] == "idempotent_consumer.SystemicStoreError"
    assert "403" in event["exception.message"]


async def test_a_lost_lock_leaves_the_span_without_disposition_and_in_error(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured
) -> None:
    queue.send(message(order_body()))
    [delivery] = queue.receive(1)
    queue.expire_lock(delivery.lock_token)  # the host could not renew it

    await telemetry_host.invoke(delivery)

    span = only(captured.consumer_spans())
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["orders.outcome"] == "processed"  # committed, not settled
    assert attributes(span)["orders.settlement"] == "none"
    assert semconv.MESSAGING_SERVICEBUS_DISPOSITION_STATUS not in attributes(span)
    assert attributes(span)["error.type"]
    assert len(exception_events(span)) == 1


def test_an_escaping_cancellation_marks_the_span_and_propagates(captured: Captured) -> None:
    incoming = IncomingMessage(message_id="ord-1", body=b"{}", delivery_count=3)

    with pytest.raises(asyncio.CancelledError), captured.telemetry.processing(incoming):
        raise asyncio.CancelledError

    span = only(captured.consumer_spans())
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["error.type"] == "asyncio.exceptions.CancelledError"
    assert span.status.description == "not settled: CancelledError()"
    # What escaped is on the span, for the trace's reader: the delivery was not settled.
    assert [event["exception.type"] for event in exception_events(span)] == [
        "asyncio.exceptions.CancelledError"
    ]
    assert "orders.outcome" not in attributes(span)


async def test_cosmos_calls_are_child_spans_of_the_consumer_span(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    clock: ManualClock,
    cosmos_spans: InMemorySpanExporter,
) -> None:
    await deliver_twice(telemetry_host, queue, clock)

    processed, duplicate = captured.consumer_spans()
    sdk_spans = cosmos_spans.get_finished_spans()

    def children(parent: ReadableSpan) -> list[ReadableSpan]:
        return [
            span
            for span in sdk_spans
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]

    [batch] = children(processed)
    assert batch.name == "ContainerProxy.execute_item_batch"
    assert batch.context.trace_id == processed.context.trace_id
    # The first call of a new client also fetches account and container metadata (GETs), and the
    # SDK may refresh the account in the same span: the write is one of the HTTP children.
    http = [span for span in children(batch) if span.kind is SpanKind.CLIENT]
    calls = [(span.name, str(attributes(span)["url.full"]).rstrip("/")[-5:]) for span in http]
    assert calls.count(("POST", "/docs")) == 1, calls
    assert [span.name for span in children(duplicate)] == [
        "ContainerProxy.execute_item_batch",  # the conflicting create
        "ContainerProxy.read_item",  # the stored order, to compare fingerprints
    ]
