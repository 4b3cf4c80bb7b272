"""Several consumers, one telemetry: the ``orders.consumer`` attribute on each consumer's span,
metric points and log records, a subscription consumer's span as the messaging semantic
conventions name it, and a decision's business counts (``Decision.measures``) exported as the
counters ``names.BUSINESS_MEASURES`` lists, and only those.

The subscription consumers are the kit's ``Consumer`` on scripted decisions
(``scripted_consumers``); the queue's is the real one, through the local Functions host
(``test_metrics.py`` and ``test_spans.py`` hold its attribute too).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from idempotent_consumer import Decision, Outcome, Settlement
from idempotent_consumer.servicebus import HungSettlements
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from local.standins.broker import ManualClock
from shared.telemetry import names
from tests.telemetry.conftest import Captured
from tests.telemetry.scripted_consumers import (
    PAYMENT_CAPTURE,
    STOCK_RESERVATION,
    ScriptedConsumer,
    scripted_consumer,
)

RECONCILE = Decision(
    Outcome.INVALID,
    order_id="ord-2",
    deadletter_reason="NeedsReconciliation",
    measures={"payments.reconciliation_needed": 1},
)


class Pipeline:
    """One tracer and one meter provider, in memory, shared by the consumers of a test."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def consumer(self, name: str, clock: ManualClock) -> ScriptedConsumer:
        return scripted_consumer(name, clock, self.tracer_provider, self.meter_provider)

    def points(self) -> list[tuple[str, dict[str, Any], float]]:
        """(metric, attributes, value or count) of every data point."""
        found = []
        data = self.reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = point.value if isinstance(point, NumberDataPoint) else point.count
                        found.append((metric.name, dict(point.attributes or {}), value))
        return found

    def totals(self, metric: str) -> Counter[str]:
        """A counter's total per consumer."""
        totals: Counter[str] = Counter()
        for name, attributes, value in self.points():
            if name == metric:
                totals[attributes[names.ATTR_CONSUMER]] += int(value)
        return totals


@pytest.fixture
def pipeline() -> Pipeline:
    return Pipeline()


def processed(order_id: str, **measures: int) -> Decision:
    return Decision(Outcome.PROCESSED, order_id=order_id, measures=measures)


def shortfall(units: int) -> dict[str, int]:
    return {"stock.shortfall": units}


async def test_a_subscription_consumer_span_names_topic_subscription_and_consumer(
    pipeline: Pipeline, clock: ManualClock
) -> None:
    stock = pipeline.consumer(STOCK_RESERVATION, clock)

    await stock.deliver([processed("ord-1")], message_id="evt-1")

    [span] = pipeline.spans.get_finished_spans()
    # semconv: {messaging.operation.name} {messaging.destination.name}; the topic, the
    # subscription an attribute of its own (the Azure messaging conventions).
    assert span.name == "process order-events"
    assert span.kind is SpanKind.CONSUMER
    assert (
        dict(span.attributes or {}).items()
        >= {
            "messaging.system": "servicebus",
            "messaging.operation.type": "process",
            "messaging.destination.name": "order-events",
            "messaging.destination.subscription.name": "inventory",
            "messaging.message.id": "evt-1",
            # the kept copies (the exporter drops messaging.*) and the consumer
            "orders.topic": "order-events",
            "orders.subscription": "inventory",
            "orders.consumer": "stock-reservation",
            "orders.message_id": "evt-1",
            "orders.order_id": "ord-1",
            "orders.outcome": "processed",
            "orders.message_type": "OrderAccepted",
        }.items()
    )
    assert "orders.queue" not in (span.attributes or {})  # not a queue


async def test_every_metric_point_carries_its_consumer(
    pipeline: Pipeline, clock: ManualClock
) -> None:
    stock = pipeline.consumer(STOCK_RESERVATION, clock)
    payments = pipeline.consumer(PAYMENT_CAPTURE, clock)
    transient = Decision(Outcome.TRANSIENT, order_id="ord-1", description="503")

    await stock.deliver([transient, processed("ord-1", **shortfall(2))], message_id="evt-1")
    await stock.deliver([Decision(Outcome.DUPLICATE, order_id="ord-1")], message_id="evt-1")
    await payments.deliver([processed("ord-1")], message_id="evt-1")
    await payments.deliver([RECONCILE], message_id="evt-2")
    stock.telemetry.record_request_charge("batch", 12.5)
    payments.telemetry.settlements_hung(HungSettlements(hung=1))

    points = pipeline.points()
    assert {metric for metric, _, _ in points} == {
        "orders.messages",
        "orders.processing.duration",
        "orders.delivery_count",
        "orders.retries",
        "orders.cosmos.request_charge",
        "orders.settlement.hung",
        "orders.stock.shortfall",
        "orders.payments.reconciliation_needed",
    }
    unmarked = [
        (metric, attributes)
        for metric, attributes, _ in points
        if "orders.consumer" not in attributes
    ]
    assert not unmarked
    assert pipeline.totals("orders.messages") == {STOCK_RESERVATION: 2, PAYMENT_CAPTURE: 2}
    assert pipeline.totals("orders.retries") == {STOCK_RESERVATION: 1}
    assert pipeline.totals("orders.cosmos.request_charge") == {STOCK_RESERVATION: 1}
    assert pipeline.totals("orders.settlement.hung") == {PAYMENT_CAPTURE: 1}
    outcomes = {
        (attributes["orders.consumer"], attributes["outcome"], attributes["settlement"]): value
        for metric, attributes, value in points
        if metric == "orders.messages"
    }
    assert outcomes == {
        (STOCK_RESERVATION, "processed", "complete"): 1,
        (STOCK_RESERVATION, "duplicate", "complete"): 1,
        (PAYMENT_CAPTURE, "processed", "complete"): 1,
        (PAYMENT_CAPTURE, "invalid", "deadletter"): 1,
    }


async def test_measures_are_counted_per_consumer_under_their_business_names(
    pipeline: Pipeline, clock: ManualClock
) -> None:
    stock = pipeline.consumer(STOCK_RESERVATION, clock)
    payments = pipeline.consumer(PAYMENT_CAPTURE, clock)

    await stock.deliver([processed("ord-1", **shortfall(3))], message_id="evt-1")
    await stock.deliver([processed("ord-2", **shortfall(2))], message_id="evt-2")
    await stock.deliver([processed("ord-3", **shortfall(0))], message_id="evt-3")  # all reserved
    declined = Decision(Outcome.PROCESSED, order_id="ord-4", measures={"payments.declined": 1})
    await payments.deliver([declined], message_id="evt-4")
    await payments.deliver([RECONCILE], message_id="evt-5")

    assert pipeline.totals("orders.stock.shortfall") == {STOCK_RESERVATION: 5}
    assert pipeline.totals("orders.payments.declined") == {PAYMENT_CAPTURE: 1}
    assert pipeline.totals("orders.payments.reconciliation_needed") == {PAYMENT_CAPTURE: 1}
    # A declined payment is a business outcome: processed and completed; the reconciliation,
    # parked (dead-lettered) for an operator.
    assert payments.settled == [("evt-4", Settlement.COMPLETE), ("evt-5", Settlement.DEADLETTER)]
    shortfall_points = [
        attributes
        for metric, attributes, _ in pipeline.points()
        if metric.startswith("orders.stock")
    ]
    assert shortfall_points == [{"orders.consumer": STOCK_RESERVATION}]  # nothing else


async def test_an_unknown_or_negative_measure_is_not_exported_and_warned_once_per_name(
    pipeline: Pipeline, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=names.LOGGER_NAME)
    stock = pipeline.consumer(STOCK_RESERVATION, clock)

    for number in range(3):
        unknown = processed(f"ord-{number}", **{"stock.oversold": 1, "stock.shortfall": -1})
        await stock.deliver([unknown], message_id=f"evt-{number}")

    metrics = {metric for metric, _, _ in pipeline.points()}
    assert "orders.stock.oversold" not in metrics
    assert "orders.stock.shortfall" not in metrics  # only a negative count was reported
    warned = [r for r in caplog.records if hasattr(r, "measure")]
    assert [(r.levelno, getattr(r, "measure")) for r in warned] == [  # noqa: B009
        (logging.WARNING, "stock.oversold"),
        (logging.WARNING, "stock.shortfall"),
    ]
    assert {getattr(r, names.ATTR_CONSUMER) for r in warned} == {STOCK_RESERVATION}
    assert "not a known measure" in warned[0].getMessage()
    assert "negative" in warned[1].getMessage()


async def test_every_log_record_of_a_delivery_names_its_consumer(
    pipeline: Pipeline, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=names.LOGGER_NAME)
    payments = pipeline.consumer(PAYMENT_CAPTURE, clock)
    transient = Decision(Outcome.TRANSIENT, order_id="ord-2", description="503")

    await payments.deliver([transient, RECONCILE], message_id="evt-2")

    records = [r for r in caplog.records if r.name == names.LOGGER_NAME]
    assert len(records) == 2  # the retry, then the outcome
    assert {getattr(r, names.ATTR_CONSUMER) for r in records} == {PAYMENT_CAPTURE}
    outcome = records[-1]
    assert {key: getattr(outcome, key) for key in ("outcome", "deadletter_reason", "order_id")} == {
        "outcome": "invalid",
        "deadletter_reason": "NeedsReconciliation",
        "order_id": "ord-2",
    }
    assert outcome.getMessage().startswith("payment-capture message 'evt-2'")


def test_the_queue_consumer_is_orders_by_default(captured: Captured) -> None:
    """Today's composition names no consumer: its telemetry is the orders queue's."""
    assert (captured.telemetry.consumer, captured.telemetry.subscription) == ("orders", None)
    assert captured.telemetry.span_name == "process orders"
