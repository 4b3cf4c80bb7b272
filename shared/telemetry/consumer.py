"""The app's consumer telemetry: the kit's ``ConsumerTelemetry`` (``idempotent_consumer.
telemetry``) in the ``orders`` namespace (``shared.telemetry.names``), with the app's business
counters and message types. One per consumer of the kit, named by its consumer name (names.md:
``orders``, ``stock-reservation``, ``payment-capture``).
"""

from __future__ import annotations

from idempotent_consumer.telemetry import ConsumerTelemetry as KitConsumerTelemetry
from opentelemetry import metrics, trace

from shared.consumer.contract import ORDER_PLACED
from shared.telemetry.names import (
    BUSINESS_COUNTERS,
    CONSUMER_NAMES,
    DEFAULT_CONSUMER,
    MESSAGE_TYPES,
)


class ConsumerTelemetry(KitConsumerTelemetry):
    """The kit's consumer telemetry as this app names it; a message without a type is an
    OrderPlaced (the queue's)."""

    def __init__(
        self,
        destination: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        subscription: str | None = None,
        consumer: str = DEFAULT_CONSUMER,
    ) -> None:
        super().__init__(
            destination,
            tracer_provider,
            meter_provider,
            subscription=subscription,
            consumer=consumer,
            names=CONSUMER_NAMES,
            business_counters=BUSINESS_COUNTERS,
            message_types=MESSAGE_TYPES,
            default_message_type=ORDER_PLACED,
        )
