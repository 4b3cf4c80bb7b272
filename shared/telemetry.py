"""The telemetry adapter: one consumer span, a few low-cardinality metrics and one structured log
line per delivery, through the OpenTelemetry API (a no-op until an SDK is configured).

Exporters are configured at most once per worker process, and only when
``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set: tests and local runs stay offline.

Metric attributes are bounded by construction (outcome, settlement, operation): a message id,
order id or customer id in a metric attribute would create one time series per order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.core import Decision, IncomingMessage, Outcome

INSTRUMENTATION_SCOPE = "orders.consumer"
SPAN_NAME_PREFIX = "process"
logger = logging.getLogger("orders.consumer")

_LOG_LEVEL_BY_OUTCOME = {
    Outcome.PROCESSED: logging.INFO,
    Outcome.DUPLICATE: logging.INFO,
    Outcome.MISMATCH: logging.WARNING,
    Outcome.INVALID: logging.WARNING,
    Outcome.TRANSIENT: logging.WARNING,
    Outcome.SYSTEMIC: logging.ERROR,
    Outcome.UNEXPECTED: logging.ERROR,
}
_propagator = TraceContextTextMapPropagator()
_configure_lock = threading.Lock()
_configured = False


def configure_exporters(env: Mapping[str, str]) -> bool:
    """Send traces, metrics and logs to Application Insights, once, if a connection string is set.

    With managed identity (``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` = ``ClientId=...;
    Authorization=AAD``) the exporter authenticates with that identity: App Insights has local
    auth disabled, so an instrumentation key alone is not enough.
    """
    global _configured
    connection_string = env.get("APPLICATIONINSIGHTS_CONNECTION_STRING", "").strip()
    if not connection_string:
        return False
    with _configure_lock:
        if _configured:
            return True
        from azure.monitor.opentelemetry import configure_azure_monitor  # heavy: import on use

        options: dict[str, Any] = {
            "connection_string": connection_string,
            "logger_name": "orders",  # our logs only, not every library's debug chatter
        }
        credential = _aad_credential(env.get("APPLICATIONINSIGHTS_AUTHENTICATION_STRING", ""))
        if credential is not None:
            options["credential"] = credential
        configure_azure_monitor(**options)
        _configured = True
        return True


def _aad_credential(authentication_string: str) -> Any | None:
    parts = dict(part.split("=", 1) for part in authentication_string.split(";") if "=" in part)
    if parts.get("Authorization", "").upper() != "AAD":
        return None
    from azure.identity import ManagedIdentityCredential

    client_id = parts.get("ClientId")
    return (
        ManagedIdentityCredential(client_id=client_id) if client_id else ManagedIdentityCredential()
    )


class ConsumerTelemetry:
    """Instruments are created once, here, not per message."""

    def __init__(
        self,
        queue_name: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.queue_name = queue_name
        self._tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        self._messages = meter.create_counter(
            "orders.messages", unit="{message}", description="Messages handled, by outcome"
        )
        self._duration = meter.create_histogram(
            "orders.processing.duration", unit="s", description="Decide + settle time"
        )
        self._request_charge = meter.create_histogram(
            "orders.cosmos.request_charge", unit="RU", description="Cosmos DB request units"
        )
        self._delivery_count = meter.create_histogram(
            "orders.delivery_count", unit="{delivery}", description="Delivery count on arrival"
        )

    @contextmanager
    def processing(self, message: IncomingMessage) -> Iterator[Span]:
        """The consumer span of one delivery; Cosmos calls made inside it become its children."""
        links = _producer_links(message.application_properties)
        attributes: dict[str, Any] = {
            "messaging.system": "servicebus",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": self.queue_name,
        }
        if message.message_id is not None:
            attributes["messaging.message.id"] = message.message_id
        if message.correlation_id is not None:
            attributes["messaging.message.conversation_id"] = message.correlation_id
        if message.delivery_count is not None:
            attributes["messaging.servicebus.message.delivery_count"] = message.delivery_count
        with self._tracer.start_as_current_span(
            f"{SPAN_NAME_PREFIX} {self.queue_name}",
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,  # exceptions are classified into outcomes, not thrown
            set_status_on_exception=True,
        ) as span:
            yield span

    def record_request_charge(self, operation: str, request_units: float) -> None:
        self._request_charge.record(request_units, {"operation": operation})

    def record_outcome(
        self,
        span: Span,
        message: IncomingMessage,
        decision: Decision,
        *,
        settled: bool,
        duration_s: float,
    ) -> None:
        outcome = decision.outcome.value
        settlement = decision.settlement.value if settled else "none"
        span.set_attribute("messaging.servicebus.disposition_status", settlement)
        span.set_attribute("orders.outcome", outcome)
        if decision.deadletter_reason:
            span.set_attribute("orders.deadletter_reason", decision.deadletter_reason)
        if decision.outcome in (Outcome.SYSTEMIC, Outcome.UNEXPECTED, Outcome.TRANSIENT):
            span.set_status(Status(StatusCode.ERROR, decision.description))
            if decision.error is not None:
                span.record_exception(decision.error)

        self._messages.add(1, {"outcome": outcome, "settlement": settlement})
        self._duration.record(duration_s, {"outcome": outcome})
        if message.delivery_count is not None:
            self._delivery_count.record(message.delivery_count, {"outcome": outcome})

        logger.log(
            _LOG_LEVEL_BY_OUTCOME[decision.outcome],
            "order message %s: %s, %s",
            message.message_id,
            outcome,
            settlement,
            exc_info=decision.error if decision.outcome is Outcome.UNEXPECTED else None,
            extra={
                "outcome": outcome,
                "settlement": settlement,
                "deadletter_reason": decision.deadletter_reason,
                "description": decision.description,
                "message_id": message.message_id,
                "correlation_id": message.correlation_id,
                "delivery_count": message.delivery_count,
                "order_id": decision.order_id,
            },
        )

    def settlement_failed(
        self, message: IncomingMessage, decision: Decision, error: Exception
    ) -> None:
        # Expected after a lock loss: the redelivery is classified as a duplicate.
        logger.warning(
            "settling message %s (%s) failed: %s",
            message.message_id,
            decision.settlement.value,
            error,
            extra={
                "outcome": decision.outcome.value,
                "settlement": decision.settlement.value,
                "message_id": message.message_id,
                "settlement_error": type(error).__name__,
            },
        )


def _producer_links(properties: Mapping[str, Any]) -> list[Link]:
    """Link to the producer when the message carries W3C trace context (traceparent or the
    Service Bus SDKs' Diagnostic-Id, which holds a traceparent value)."""
    carrier = {}
    for key in ("traceparent", "Diagnostic-Id"):
        value = properties.get(key)
        if isinstance(value, str) and value:
            carrier["traceparent"] = value
            break
    if not carrier:
        return []
    state = properties.get("tracestate")
    if isinstance(state, str):
        carrier["tracestate"] = state
    context = trace.get_current_span(_propagator.extract(carrier)).get_span_context()
    return [Link(context)] if context.is_valid else []
