"""The two subscription consumers of issue 27 (``stock-reservation`` and ``payment-capture``, on
the ``order-events`` topic: names.md) as their telemetry sees them, until they are composed: the
kit's own ``Consumer`` (``shared.kit.service``: retry within the delivery, settle, report)
reporting to a ``ConsumerTelemetry`` built as the composition root builds one per consumer,
deciding what a script says.

Not reproduced: their contracts, effects and stores (each decision, its measures included, is
given, not decided); the Service Bus trigger and the worker (a delivery is an
``IncomingMessage``, settled by a callable that records the settlement). What they hold to is
the observer's side: what a decision of the kit becomes on the span, the metrics and the logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from idempotent_consumer import Consumer, Decision, IncomingMessage, Settlement
from opentelemetry import metrics, trace

from local.standins.broker import ManualClock
from shared.telemetry.consumer import ConsumerTelemetry

TOPIC = "order-events"
STOCK_RESERVATION = "stock-reservation"
PAYMENT_CAPTURE = "payment-capture"
SUBSCRIPTIONS = {STOCK_RESERVATION: "inventory", PAYMENT_CAPTURE: "payments"}
LOCK_DURATION = timedelta(seconds=60)


@dataclass
class ScriptedConsumer:
    telemetry: ConsumerTelemetry
    clock: ManualClock
    settled: list[tuple[str | None, Settlement]] = field(default_factory=list)

    async def deliver(
        self,
        decisions: Sequence[Decision],
        *,
        message_id: str,
        subject: str = "OrderAccepted",
        delivery_count: int = 1,
    ) -> Decision:
        """One delivery, decided by ``decisions`` in turn (one per attempt: a transient one is
        retried within the delivery, as the kit does)."""
        script = iter(decisions)

        async def decide(_incoming: IncomingMessage, _traceparent: str | None) -> Decision:
            return next(script)

        async def settle(decision: Decision) -> None:
            self.settled.append((message_id, decision.settlement))

        consumer = Consumer(decide, self.telemetry, clock=self.clock, jitter=lambda: 1.0)
        incoming = IncomingMessage(
            message_id,
            b"{}",
            correlation_id=f"corr-{message_id}",
            delivery_count=delivery_count,
            locked_until=self.clock.now() + LOCK_DURATION,
            subject=subject,
        )
        return await consumer.handle(incoming, settle)


def scripted_consumer(
    name: str,
    clock: ManualClock,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> ScriptedConsumer:
    """``name``'s consumer on its subscription; the providers default to the global ones."""
    telemetry = ConsumerTelemetry(
        TOPIC,
        tracer_provider,
        meter_provider,
        subscription=SUBSCRIPTIONS[name],
        consumer=name,
    )
    return ScriptedConsumer(telemetry, clock)
