"""How one delivery ends, as its span and settlement show it: ``Consumer.handle`` retrying within
the lock and giving up before it expires, and ``hold_then_abandon`` for an app that cannot
decide at all. Through the kit's public names and its real telemetry (``ConsumerTelemetry``,
spans to an in-memory exporter), on the stand-ins' manual clock (a sleep advances it).

What it holds (mutation run 5, the tenth session: ``idempotent_consumer._service``): the
deadline is the message's lock, or the budget from now when the message carries none; the
attempts are counted from one; the traceparent a decision sees is its delivery span's; a
delivery the app cannot decide is held until the lock margin, or the budget, and recorded
under its MessageId with the setting's error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from idempotent_consumer import (
    ConfigurationError,
    Consumer,
    Decision,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    Settlement,
    TransientStoreError,
    decide,
    hold_then_abandon,
)
from idempotent_consumer.telemetry import NOT_SETTLED, ConsumerTelemetry
from idempotent_consumer.testing import InMemoryDocumentStore
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from examples.units_sold import units_sold
from local.standins.broker import ManualClock
from ops.sample_orders import order_body

POLICY = RetryPolicy()  # lock margin 5 s, budget without a lock 50 s, delays 1, 2, 4, 8 s
TRANSIENT = Decision(Outcome.TRANSIENT, order_id="ord-1", description="Cosmos DB answered 503")
PROCESSED = Decision(Outcome.PROCESSED, order_id="ord-1")


@dataclass
class Delivery:
    clock: ManualClock
    spans: InMemorySpanExporter
    telemetry: ConsumerTelemetry
    metrics: InMemoryMetricReader
    settled: list[Settlement] = field(default_factory=list)
    settle_fails: bool = False
    decided_at: list[datetime] = field(default_factory=list)
    traceparents: list[str | None] = field(default_factory=list)

    def message(self, *, lock_s: float | None) -> IncomingMessage:
        locked_until = None if lock_s is None else self.clock.now() + timedelta(seconds=lock_s)
        return IncomingMessage("msg-1", b"{}", delivery_count=1, locked_until=locked_until)

    async def handle(self, incoming: IncomingMessage, decisions: Sequence[Decision]) -> Decision:
        """``decisions`` in turn, one per attempt, the last one repeated."""
        script: Iterator[Decision] = iter(decisions)
        last = decisions[-1]

        async def decide(_incoming: IncomingMessage, traceparent: str | None) -> Decision:
            self.decided_at.append(self.clock.now())
            self.traceparents.append(traceparent)
            return next(script, last)

        consumer = Consumer(decide, self.telemetry, clock=self.clock, jitter=lambda: 1.0)
        return await consumer.handle(incoming, self.settle)

    async def settle(self, decision: Decision) -> None:
        if self.settle_fails:  # the lock was lost: Service Bus refuses the settlement
            raise RuntimeError("the message lock was lost")
        self.settled.append(decision.settlement)

    async def held_for(self, incoming: IncomingMessage, error: ConfigurationError) -> Decision:
        """``incoming`` delivered to an app that cannot decide it for ``error``."""
        return await hold_then_abandon(
            incoming,
            self.settle,
            error,
            observer=self.telemetry,
            clock=self.clock,
            retry_policy=POLICY,
        )

    def durations(self) -> list[HistogramDataPoint]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == self.telemetry.names.metric_duration
            for point in metric.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]

    def span(self) -> ReadableSpan:
        [span] = [s for s in self.spans.get_finished_spans() if s.name == "process orders"]
        return span


@pytest.fixture
def delivery() -> Delivery:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    telemetry = ConsumerTelemetry("orders", provider, MeterProvider([metrics]), consumer="orders")
    return Delivery(ManualClock(), spans, telemetry, metrics)


async def test_retries_end_at_the_lock_margin_of_the_message_s_own_lock(
    delivery: Delivery,
) -> None:
    # A lock of 20 s, shorter than the budget a message without one gets (50 s): the retries
    # must stop 5 s before this lock expires, never ride on past it.
    incoming = delivery.message(lock_s=20)
    assert incoming.locked_until is not None

    decision = await delivery.handle(incoming, [TRANSIENT])

    assert decision.outcome is Outcome.TRANSIENT
    assert delivery.settled == [Settlement.ABANDON]
    assert delivery.clock.now() == incoming.locked_until - timedelta(seconds=POLICY.lock_margin_s)
    # Backoff of 1, 2, 4 and 8 s (jitter 1): the fifth attempt at 15 s, when nothing is left
    # before the margin.
    started = delivery.decided_at[0]
    assert [(t - started).total_seconds() for t in delivery.decided_at] == [0, 1, 3, 7, 15]


async def test_a_message_without_its_lock_expiry_retries_for_the_budget_from_now(
    delivery: Delivery,
) -> None:
    incoming = delivery.message(lock_s=None)
    started = delivery.clock.now()

    decision = await delivery.handle(incoming, [TRANSIENT])

    assert decision.outcome is Outcome.TRANSIENT
    assert delivery.settled == [Settlement.ABANDON]
    budget = POLICY.budget_without_lock_s - POLICY.lock_margin_s
    assert delivery.clock.now() - started == timedelta(seconds=budget)
    assert len(delivery.decided_at) > 1


async def test_attempts_are_counted_from_one_and_exported_on_the_delivery_s_span(
    delivery: Delivery,
) -> None:
    incoming = delivery.message(lock_s=60)

    decision = await delivery.handle(incoming, [TRANSIENT, TRANSIENT, PROCESSED])

    assert decision.outcome is Outcome.PROCESSED
    assert delivery.settled == [Settlement.COMPLETE]
    span, names = delivery.span(), delivery.telemetry.names
    attributes = dict(span.attributes or {})
    assert (attributes[names.attempts], attributes[names.settlement]) == (3, "complete")
    retries = [dict(event.attributes or {}) for event in span.events if event.name == "retry"]
    assert [(r[names.attempt], r["delay_s"]) for r in retries] == [(1, 1.0), (2, 2.0)]


async def test_every_attempt_is_decided_under_its_delivery_span_s_traceparent(
    delivery: Delivery,
) -> None:
    # The traceparent a decision stores on its outbox event: the relay's publish span links it.
    incoming = delivery.message(lock_s=60)

    await delivery.handle(incoming, [TRANSIENT, PROCESSED])

    context = delivery.span().context
    assert context is not None
    # W3C Trace Context: version-traceid-parentid-flags (www.w3.org/TR/trace-context/
    # #traceparent-header); the flags are the propagator's.
    first, second = delivery.traceparents
    assert first == second
    assert first is not None
    assert first.rsplit("-", 1)[0] == f"00-{context.trace_id:032x}-{context.span_id:016x}"


BROKEN = ConfigurationError("ORDERS_OUTBOX_ENABLED", "'maybe' is not a boolean")


async def test_an_app_that_cannot_decide_holds_to_the_lock_margin_and_records_why(
    delivery: Delivery,
) -> None:
    incoming = delivery.message(lock_s=60)
    assert incoming.locked_until is not None

    decision = await delivery.held_for(incoming, BROKEN)

    assert delivery.settled == [Settlement.ABANDON]
    assert delivery.clock.now() == incoming.locked_until - timedelta(seconds=POLICY.lock_margin_s)
    assert (decision.outcome, decision.order_id, decision.error) == (
        Outcome.SYSTEMIC,
        "msg-1",
        BROKEN,
    )
    span, names = delivery.span(), delivery.telemetry.names
    attributes = dict(span.attributes or {})
    assert attributes[names.outcome] == "systemic"
    assert (attributes[names.settlement], attributes[names.attempts]) == ("abandon", 1)
    assert attributes[names.order_id] == "msg-1"  # no order was read: its MessageId
    assert attributes["error.type"] == "idempotent_consumer.ConfigurationError"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ORDERS_OUTBOX_ENABLED: 'maybe' is not a boolean"


@pytest.mark.parametrize(
    ("lock_s", "held_s"),
    [
        (None, POLICY.budget_without_lock_s),  # no lock: the budget
        (3, 0.0),  # already inside the 5 s margin: abandoned at once
    ],
)
async def test_an_app_that_cannot_decide_holds_what_its_lock_leaves_it(
    delivery: Delivery, lock_s: float | None, held_s: float
) -> None:
    incoming = delivery.message(lock_s=lock_s)
    started = delivery.clock.now()

    await delivery.held_for(incoming, BROKEN)

    assert delivery.settled == [Settlement.ABANDON]
    assert delivery.clock.now() - started == timedelta(seconds=held_s)


async def test_a_retry_waits_at_least_what_the_store_asked_for(delivery: Delivery) -> None:
    throttled = Decision(Outcome.TRANSIENT, order_id="ord-1", retry_after_s=3.0)
    incoming = delivery.message(lock_s=60)

    await delivery.handle(incoming, [throttled, PROCESSED])

    started = delivery.decided_at[0]
    assert [(t - started).total_seconds() for t in delivery.decided_at] == [0, 3]


async def test_a_throttled_commit_is_retried_after_the_wait_the_store_asked_for(
    delivery: Delivery,
) -> None:
    # A store error that carries the service's retry-after (Cosmos DB's retryAfterMilliseconds
    # of a throttled batch operation): the retry waits that long, not the 1 s of backoff.
    store = InMemoryDocumentStore()
    store.fail_next = [TransientStoreError("429 throttled", retry_after_s=3.0)]
    payload = {**order_body("ord-7", placedAt="2026-11-30T08:00:00Z")}
    payload["lines"] = [{"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 100}]
    body = json.dumps({"eventType": "OrderAccepted", "payload": payload}).encode()
    incoming = IncomingMessage("evt-7", body, subject="OrderAccepted")
    incoming = replace(incoming, locked_until=delivery.clock.now() + timedelta(seconds=60))
    started = delivery.clock.now()

    async def decide_units(message: IncomingMessage, _traceparent: str | None) -> Decision:
        return await decide(units_sold, message, store, marker_ttl_s=3600, now=delivery.clock.now())

    consumer = Consumer(decide_units, delivery.telemetry, clock=delivery.clock, jitter=lambda: 1.0)
    decision = await consumer.handle(incoming, delivery.settle)

    assert (decision.outcome, delivery.settled) == (Outcome.PROCESSED, [Settlement.COMPLETE])
    assert delivery.clock.now() - started == timedelta(seconds=3)
    counter = await store.read("SKU-1", "units:2026-11-30")
    assert counter is not None and counter["units"] == 2


async def test_an_unexpected_error_holds_the_lock_once_then_abandons(delivery: Delivery) -> None:
    unexpected = Decision(Outcome.UNEXPECTED, order_id="ord-1", description="KeyError: 'x'")
    incoming = delivery.message(lock_s=60)
    started = delivery.clock.now()

    await delivery.handle(incoming, [unexpected])

    assert delivery.settled == [Settlement.ABANDON]
    assert len(delivery.decided_at) == 1  # not retried
    assert delivery.clock.now() - started == timedelta(seconds=POLICY.unexpected_hold_s)


async def test_a_settlement_that_fails_is_exported_as_not_settled(delivery: Delivery) -> None:
    delivery.settle_fails = True

    decision = await delivery.handle(delivery.message(lock_s=60), [PROCESSED])

    assert decision.outcome is Outcome.PROCESSED
    span, names = delivery.span(), delivery.telemetry.names
    attributes = dict(span.attributes or {})
    assert attributes[names.settlement] == NOT_SETTLED
    assert attributes["error.type"] == "RuntimeError"
    assert span.status.status_code is StatusCode.ERROR


async def test_the_processing_duration_exported_is_the_delivery_s_own(delivery: Delivery) -> None:
    # On the process's performance counter (not the manual clock): a delivery decided in
    # memory takes well under a second.
    await delivery.handle(delivery.message(lock_s=60), [PROCESSED])

    [point] = delivery.durations()
    assert point.count == 1
    assert 0 <= point.sum < 1.0
