"""The telemetry adapter: one consumer span, a few low-cardinality metrics and one structured log
line per delivery, through the OpenTelemetry API (a no-op until an SDK is configured).

Exporters are configured at most once per worker process, and only when
``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set: tests and local runs stay offline. The app
configures the Azure Monitor distro itself; the Functions worker must not (see docs/telemetry.md:
``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY`` stays unset, ``PYTHON_ENABLE_OPENTELEMETRY=true``).

Span attributes follow the OpenTelemetry messaging semantic conventions (``messaging.*``, as of
semconv 1.27+: ``messaging.operation.type``, ``messaging.message.conversation_id``,
``messaging.servicebus.*``). The Azure Monitor exporter drops attributes with the standard
prefixes (``messaging.``, ``db.``, ``http.`` ...) and ``error.type`` from ``customDimensions``, so
every field an operator filters on is ALSO set under a kept ``orders.*`` name
(``orders.message_id``, ``orders.delivery_count`` ...). The kept names are the contract of the
KQL queries, alert rules and workbook in ``infra/``: change them together
(``tests/telemetry/test_envelopes.py`` holds the two against what the real exporter sends).

Metric attributes are bounded by construction (outcome, settlement, operation): a message id,
order id or customer id in a metric attribute would create one time series per order.

Exported logs (``ExportedLogRecords``, on the exporter's handler only): every record at WARNING
and above, always; an INFO record (a healthy delivery's outcome, ``processed`` or ``duplicate``,
an event published) only when the span current at that moment is sampled, so that healthy
outcomes reach Application Insights with the traces the sampler keeps (5 per second per process
by default), not once per order: ``orders.messages`` and ``orders.relay.published`` count every
one of them, and every failure still has its log line (docs/telemetry.md, "Logs").
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.adapters.servicebus_in import HungSettlements
from shared.consumer.core import Decision, IncomingMessage, Outcome, Settlement

INSTRUMENTATION_SCOPE = "orders.consumer"
LOGGER_NAME = "orders.consumer"
# The distro's logging handler goes on this logger: our records only, not every library's.
EXPORTED_LOGGER_NAME = "orders"
CONNECTION_STRING_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
AUTHENTICATION_STRING_SETTING = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"
WORKER_TELEMETRY_SETTING = "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"
RESOURCE_DETECTORS_SETTING = "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS"

# Span names and attributes (semconv messaging, Azure Service Bus).
MESSAGING_SYSTEM = "servicebus"
OPERATION_TYPE = "process"
ATTR_SYSTEM = "messaging.system"
ATTR_OPERATION_TYPE = "messaging.operation.type"
ATTR_OPERATION_NAME = "messaging.operation.name"
ATTR_DESTINATION = "messaging.destination.name"
ATTR_MESSAGE_ID = "messaging.message.id"
ATTR_CONVERSATION_ID = "messaging.message.conversation_id"
ATTR_DELIVERY_COUNT = "messaging.servicebus.message.delivery_count"
ATTR_DISPOSITION = "messaging.servicebus.disposition_status"
ATTR_ERROR_TYPE = "error.type"
# The kept copies of the semconv fields operators filter on (the exporter drops the originals).
ATTR_KEPT_QUEUE = "orders.queue"
ATTR_KEPT_MESSAGE_ID = "orders.message_id"
ATTR_KEPT_CORRELATION_ID = "orders.correlation_id"
ATTR_KEPT_DELIVERY_COUNT = "orders.delivery_count"
ATTR_KEPT_ERROR_TYPE = "orders.error_type"
# Ours: what the consumer decided, in the vocabulary of the README and the metrics.
ATTR_ORDER_ID = "orders.order_id"
ATTR_OUTCOME = "orders.outcome"
ATTR_SETTLEMENT = "orders.settlement"
ATTR_ATTEMPTS = "orders.attempts"
ATTR_DEADLETTER_REASON = "orders.deadletter_reason"
ATTR_REQUEST_CHARGE = "orders.cosmos.request_charge"

# Metric names: the alert rules and KQL in infra/ query these.
METRIC_MESSAGES = "orders.messages"
METRIC_DURATION = "orders.processing.duration"
METRIC_REQUEST_CHARGE = "orders.cosmos.request_charge"
METRIC_DELIVERY_COUNT = "orders.delivery_count"
METRIC_RETRIES = "orders.retries"
METRIC_SETTLEMENT_HUNG = "orders.settlement.hung"
# The settlement attribute when the settlement call itself failed (lock lost, host gone).
NOT_SETTLED = "none"

# Bucket advice for backends that keep buckets (Azure Monitor keeps count/sum/min/max only).
# The SDK's default buckets (0, 5, 10, 25 ... 10000) are meant for milliseconds.
_DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30)
_REQUEST_CHARGE_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 50, 100, 200)
_DELIVERY_COUNT_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10)

# Semconv values of messaging.servicebus.disposition_status.
_DISPOSITION = {
    Settlement.COMPLETE: "complete",
    Settlement.ABANDON: "abandon",
    Settlement.DEADLETTER: "dead_letter",
}
_LOG_LEVEL_BY_OUTCOME = {
    Outcome.PROCESSED: logging.INFO,
    Outcome.DUPLICATE: logging.INFO,
    Outcome.MISMATCH: logging.WARNING,
    Outcome.INVALID: logging.WARNING,
    Outcome.TRANSIENT: logging.WARNING,
    Outcome.SYSTEMIC: logging.ERROR,
    Outcome.UNEXPECTED: logging.ERROR,
}
# A delivery that ends abandoned failed: the span is an error. A dead-lettered one was handled:
# the message was at fault, not the consumer (as a 4xx on an HTTP server span), so its status
# stays unset and the reason is an attribute.
_FAILED_OUTCOMES = frozenset({Outcome.TRANSIENT, Outcome.SYSTEMIC, Outcome.UNEXPECTED})
# Exceptions worth a stack trace on the span (and an entry in App Insights' exceptions table);
# a throttled or unavailable Cosmos DB is routine and stays a status + error.type.
_RECORDED_OUTCOMES = frozenset({Outcome.SYSTEMIC, Outcome.UNEXPECTED})
# Of the distro's default instrumentations, only the Azure SDK one is of use here; the others
# would only trace the managed identity token requests (requests/urllib3) or web frameworks.
_UNUSED_INSTRUMENTATIONS = (
    "django",
    "fastapi",
    "flask",
    "httpx",
    "psycopg2",
    "requests",
    "urllib",
    "urllib3",
)

logger = logging.getLogger(LOGGER_NAME)
_propagator = TraceContextTextMapPropagator()
_configure_lock = threading.Lock()
_configured = False
# Request units charged during the current delivery (set by ``processing``).
_delivery_charge: ContextVar[list[float] | None] = ContextVar("orders_charge", default=None)


class ExportedLogRecords(logging.Filter):
    """The exporter's filter: records at WARNING and above always; INFO and below only with a
    sampled trace (the current span's W3C sampled flag: a non-recording span, as without an
    SDK, has none). Local handlers (the console, tests, the demo's counts) see every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return bool(trace.get_current_span().get_span_context().trace_flags.sampled)


def configure_exporters(env: Mapping[str, str]) -> bool:
    """Send traces, metrics and logs to Application Insights, once per process, if a connection
    string is set. Returns whether this module's exporters are (now) configured.

    Not configured, and False, when:

    - ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is unset or blank: nothing is exported, no
      exporter exists, nothing connects anywhere (tests, local runs).
    - ``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY`` is true: the Functions worker has then
      already configured the distro, and a second configuration would export every log twice.

    With ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` = ``ClientId=...;Authorization=AAD`` the
    exporters authenticate with that managed identity: local auth is disabled on the
    Application Insights resource, so an instrumentation key alone is not enough.
    """
    global _configured
    connection_string = env.get(CONNECTION_STRING_SETTING, "").strip()
    if not connection_string:
        return False
    if env.get(WORKER_TELEMETRY_SETTING, "").strip().lower() in {"true", "1"}:
        logger.warning(
            "%s is true: the Functions worker configured Azure Monitor, the app does not "
            "(unset it: the worker's configuration lacks the managed identity and the logger "
            "name this app uses)",
            WORKER_TELEMETRY_SETTING,
        )
        return False
    with _configure_lock:
        if _configured:
            return True
        # The distro's default detectors include azure_vm, which probes the instance metadata
        # endpoint over the network; the Functions worker sets this same default.
        os.environ.setdefault(RESOURCE_DETECTORS_SETTING, "azure_functions")
        from azure.monitor.opentelemetry import configure_azure_monitor  # heavy: import on use

        options: dict[str, Any] = {
            "connection_string": connection_string,
            "logger_name": EXPORTED_LOGGER_NAME,
            # azure_sdk stays on: the distro then sets azure-core's tracing_implementation to
            # OpenTelemetry, and the Cosmos DB calls become child spans of the consumer span.
            "instrumentation_options": {
                name: {"enabled": False} for name in _UNUSED_INSTRUMENTATIONS
            },
        }
        credential = _aad_credential(env.get(AUTHENTICATION_STRING_SETTING, ""))
        if credential is not None:
            options["credential"] = credential
        configure_azure_monitor(**options)
        _filter_exported_logs()
        _configured = True
        return True


def _filter_exported_logs() -> None:
    """Put ``ExportedLogRecords`` on the handler the distro attached to our logger (an
    OpenTelemetry ``LoggingHandler``: azure/monitor/opentelemetry/_configure.py, _setup_logging,
    ``logger.addHandler(handler)``), and on no other handler."""
    from opentelemetry.instrumentation.logging.handler import LoggingHandler

    for handler in logging.getLogger(EXPORTED_LOGGER_NAME).handlers:
        if isinstance(handler, LoggingHandler) and not any(
            isinstance(f, ExportedLogRecords) for f in handler.filters
        ):
            handler.addFilter(ExportedLogRecords())


def _aad_credential(authentication_string: str) -> Any | None:
    parts = {
        key.strip().lower(): value.strip()
        for key, _, value in (part.partition("=") for part in authentication_string.split(";"))
        if value
    }
    if parts.get("authorization", "").upper() != "AAD":
        return None
    from azure.identity import ManagedIdentityCredential  # constructing it opens no connection

    client_id = parts.get("clientid")
    return (
        ManagedIdentityCredential(client_id=client_id) if client_id else ManagedIdentityCredential()
    )


class ConsumerTelemetry:
    """Instruments are created once, here, not per message. Providers default to the global
    ones (configured by ``configure_exporters``); tests inject SDK providers instead."""

    def __init__(
        self,
        queue_name: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.queue_name = queue_name
        self.span_name = f"{OPERATION_TYPE} {queue_name}"
        self._tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        self._messages = meter.create_counter(
            METRIC_MESSAGES,
            unit="{message}",
            description="Deliveries handled, by outcome and settlement",
        )
        self._duration = meter.create_histogram(
            METRIC_DURATION,
            unit="s",
            description="Time to decide and settle one delivery, by outcome",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS_S,
        )
        self._request_charge = meter.create_histogram(
            METRIC_REQUEST_CHARGE,
            unit="{request_unit}",
            description="Cosmos DB request charge of one operation, by operation",
            explicit_bucket_boundaries_advisory=_REQUEST_CHARGE_BUCKETS,
        )
        self._retries = meter.create_counter(
            METRIC_RETRIES,
            unit="{retry}",
            description="In-delivery retries of transient or systemic failures, by outcome",
        )
        self._delivery_count = meter.create_histogram(
            METRIC_DELIVERY_COUNT,
            unit="{delivery}",
            description="Service Bus delivery count of each handled delivery, by outcome",
            explicit_bucket_boundaries_advisory=_DELIVERY_COUNT_BUCKETS,
        )
        # Up and down: +1 per hang, -1 per late return; the exporter sends its running total.
        self._settlements_hung = meter.create_up_down_counter(
            METRIC_SETTLEMENT_HUNG,
            unit="{call}",
            description="Settlement calls past their timeout that still hold a thread",
        )

    @contextmanager
    def processing(self, message: IncomingMessage) -> Iterator[Span]:
        """The consumer span of one delivery. It is current while the delivery is handled, so
        the Cosmos DB SDK's spans become its children. It is linked to the producer's span when
        the message carries trace context; its parent is the ambient context (the Functions
        host's invocation when the worker propagates it)."""
        attributes: dict[str, Any] = {
            ATTR_SYSTEM: MESSAGING_SYSTEM,
            ATTR_OPERATION_TYPE: OPERATION_TYPE,
            ATTR_OPERATION_NAME: OPERATION_TYPE,
            ATTR_DESTINATION: self.queue_name,
            ATTR_KEPT_QUEUE: self.queue_name,
        }
        if message.message_id is not None:
            attributes[ATTR_MESSAGE_ID] = message.message_id
            attributes[ATTR_KEPT_MESSAGE_ID] = message.message_id
        if message.correlation_id is not None:
            attributes[ATTR_CONVERSATION_ID] = message.correlation_id
            attributes[ATTR_KEPT_CORRELATION_ID] = message.correlation_id
        if message.delivery_count is not None:
            attributes[ATTR_DELIVERY_COUNT] = message.delivery_count
            attributes[ATTR_KEPT_DELIVERY_COUNT] = message.delivery_count
        charge_token = _delivery_charge.set([])
        try:
            with self._tracer.start_as_current_span(
                self.span_name,
                kind=SpanKind.CONSUMER,
                attributes=attributes,
                links=producer_links(message.application_properties),
                # Decisions are not exceptions; what does escape is handled below.
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    yield span
                except BaseException as error:
                    # Only cancellation (or a bug in the consumer) gets here: nothing was
                    # settled, the lock will lapse and the message come back.
                    _set_error_type(span, _qualified_name(type(error)))
                    span.set_status(Status(StatusCode.ERROR, f"not settled: {error!r}"))
                    span.record_exception(error)
                    raise
        finally:
            _delivery_charge.reset(charge_token)

    def record_request_charge(self, operation: str, request_units: float) -> None:
        """The Cosmos DB store's request charge hook (operation: create, batch or read)."""
        self._request_charge.record(request_units, {"operation": operation})
        charges = _delivery_charge.get()
        if charges is not None:
            charges.append(request_units)

    def record_outcome(
        self,
        span: Span,
        message: IncomingMessage,
        decision: Decision,
        *,
        settled: bool,
        duration_s: float,
        attempts: int = 1,
    ) -> None:
        outcome = decision.outcome.value
        settlement = decision.settlement.value if settled else NOT_SETTLED

        span.set_attribute(ATTR_OUTCOME, outcome)
        span.set_attribute(ATTR_SETTLEMENT, settlement)
        span.set_attribute(ATTR_ATTEMPTS, attempts)
        if settled:
            span.set_attribute(ATTR_DISPOSITION, _DISPOSITION[decision.settlement])
        if decision.deadletter_reason:
            span.set_attribute(ATTR_DEADLETTER_REASON, decision.deadletter_reason)
        if decision.order_id is not None:
            span.set_attribute(ATTR_ORDER_ID, decision.order_id)
        charges = _delivery_charge.get()
        if charges:
            span.set_attribute(ATTR_REQUEST_CHARGE, sum(charges))
        if decision.outcome in _FAILED_OUTCOMES:
            error_type = (
                _qualified_name(type(decision.error)) if decision.error is not None else outcome
            )
            _set_error_type(span, error_type)
            span.set_status(Status(StatusCode.ERROR, decision.description or outcome))
            if decision.error is not None and decision.outcome in _RECORDED_OUTCOMES:
                span.record_exception(decision.error)
        elif not settled:
            # settlement_failed() has set error.type to the settlement error.
            span.set_status(Status(StatusCode.ERROR, f"{decision.settlement.value} failed"))

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
                **_message_fields(message, decision),
            },
        )

    def retrying(
        self, message: IncomingMessage, decision: Decision, attempt: int, delay_s: float
    ) -> None:
        """A transient or systemic failure that the delivery rides out while holding its lock.
        Counted, so an outage shows up on dashboards before any message is abandoned."""
        span = trace.get_current_span()
        span.add_event(
            "retry",
            {
                ATTR_OUTCOME: decision.outcome.value,
                "orders.attempt": attempt,
                "delay_s": delay_s,
            },
        )
        self._retries.add(1, {"outcome": decision.outcome.value})
        # Not ``outcome``: one log record per delivery carries the outcome, so that counting
        # outcomes in App Insights counts deliveries. The final record is logged at its
        # outcome's level (error for systemic) once the delivery gives up.
        logger.warning(
            "order message %s: %s on attempt %d, retrying in %.1f s",
            message.message_id,
            decision.outcome.value,
            attempt,
            delay_s,
            extra={
                "attempt_outcome": decision.outcome.value,
                **_message_fields(message, decision),
                "description": decision.description,
                "attempt": attempt,
                "retry_delay_s": delay_s,
            },
        )

    def settlement_failed(
        self, message: IncomingMessage, decision: Decision, error: Exception
    ) -> None:
        """Called inside ``processing``: the current span is the delivery's."""
        span = trace.get_current_span()
        _set_error_type(span, _qualified_name(type(error)))
        span.record_exception(error)
        # Expected after a lock loss: the redelivery is classified as a duplicate.
        logger.warning(
            "settling message %s (%s) failed: %s",
            message.message_id,
            decision.settlement.value,
            error,
            extra={
                "outcome": decision.outcome.value,
                "settlement": decision.settlement.value,
                **_message_fields(message, decision),
                "settlement_error": type(error).__name__,
            },
        )

    def settlements_hung(self, report: HungSettlements) -> None:
        """The settler's watcher (``shared.adapters.servicebus_in``): a settlement call outlived
        its timeout
        and keeps its thread, or such a call has returned at last. May run on a pool thread."""
        fields = {
            "hung_settlements": report.hung,
            "settlement_pool_replaced": report.replaced_pool,
            "settlement_pool_exhausted": report.exhausted,
        }
        if report.returned_after_s is not None:
            self._settlements_hung.add(-1)
            logger.warning(
                "a hung settlement call returned after %.1f s; %d still hung",
                report.returned_after_s,
                report.hung,
                extra=fields,
            )
            return
        self._settlements_hung.add(1)
        logger.log(
            logging.CRITICAL if report.exhausted else logging.ERROR,
            "a settlement call hangs (no answer from the Functions host): %d settlement "
            "thread(s) held%s",
            report.hung,
            "; settlements moved to a fresh thread pool"
            if report.replaced_pool
            else "; no fresh pool left: restart the worker"
            if report.exhausted
            else "",
            extra=fields,
        )


def _set_error_type(span: Span, error_type: str) -> None:
    span.set_attribute(ATTR_ERROR_TYPE, error_type)
    span.set_attribute(ATTR_KEPT_ERROR_TYPE, error_type)


def _message_fields(message: IncomingMessage, decision: Decision) -> dict[str, Any]:
    """What every log record of a delivery carries, to find the delivery and its order."""
    return {
        "message_id": message.message_id,
        "correlation_id": message.correlation_id,
        "delivery_count": message.delivery_count,
        "order_id": decision.order_id,
    }


def producer_links(properties: Mapping[str, Any]) -> list[Link]:
    """A link to the producer's span when the message carries W3C trace context: a
    ``traceparent`` application property, or the Service Bus SDKs' ``Diagnostic-Id`` (which
    holds a traceparent value). The first valid one wins; an invalid value yields no link."""
    for key in ("traceparent", "Diagnostic-Id"):
        value = properties.get(key)
        if not isinstance(value, str) or not value:
            continue
        carrier = {"traceparent": value}
        state = properties.get("tracestate")
        if isinstance(state, str) and state:
            carrier["tracestate"] = state
        context = trace.get_current_span(_propagator.extract(carrier)).get_span_context()
        if context.is_valid:
            return [Link(context)]
    return []


def _qualified_name(kind: type[BaseException]) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


# ---------------------------------------------------------------------------------------------
# The outbox relay. Its names are a contract with infra/ (queries, alerts, workbook) and
# docs/operations.md; tests/telemetry/test_envelopes.py holds them against the exporter's output.
# ---------------------------------------------------------------------------------------------

RELAY_INSTRUMENTATION_SCOPE = "orders.relay"
RELAY_LOGGER_NAME = "orders.relay"
RELAY_OPERATION_TYPE = "send"
ATTR_EVENT_ID = "orders.event_id"
ATTR_ORDER_ID = "orders.order_id"
ATTR_TOPIC = "orders.topic"
ATTR_RELAY_OUTCOME = "orders.relay.outcome"
METRIC_RELAY_PUBLISHED = "orders.relay.published"
METRIC_RELAY_FAILED = "orders.relay.failed"
METRIC_RELAY_PARKED = "orders.relay.parked"
METRIC_RELAY_LAG = "orders.relay.lag"
# The outbox watchdog's (shared/relay/watchdog.py): one observation per run, so that a run that
# finds
# nothing still reports (valueCount = runs: the alert reads a silent watchdog as stuck too).
METRIC_RELAY_STUCK = "orders.relay.stuck"
METRIC_RELAY_STUCK_AGE = "orders.relay.stuck_age"
RELAY_PUBLISHED = "published"
RELAY_FAILED = "failed"
RELAY_PARKED = "parked"
# Relay lag: seconds from the order's acceptance to its event's publish.
_LAG_BUCKETS_S = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
_STUCK_BUCKETS = (0, 1, 10, 100, 1000, 10000)
_STUCK_AGE_BUCKETS_S = (0, 300, 600, 900, 1800, 3600, 21600, 86400)

relay_logger = logging.getLogger(RELAY_LOGGER_NAME)


class RelayTelemetry:
    """A PRODUCER span per published event (``send <topic>``), four instruments and the relay's
    log records. The span is started before the message is built, so the message's
    ``traceparent`` is this span: a downstream consumer's span links back to the publish."""

    def __init__(
        self,
        topic_name: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.topic_name = topic_name
        self.span_name = f"{RELAY_OPERATION_TYPE} {topic_name}"
        self._tracer = trace.get_tracer(
            RELAY_INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(RELAY_INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        self._published = meter.create_counter(
            METRIC_RELAY_PUBLISHED, unit="{event}", description="Outbox events sent to the topic"
        )
        self._failed = meter.create_counter(
            METRIC_RELAY_FAILED,
            unit="{event}",
            description="Failed sends of outbox events, by error type (retried or parked)",
        )
        self._parked = meter.create_counter(
            METRIC_RELAY_PARKED,
            unit="{event}",
            description="Outbox events set aside for an operator (status parked)",
        )
        self._lag = meter.create_histogram(
            METRIC_RELAY_LAG,
            unit="s",
            description="Time from the order's acceptance (outbox createdAt) to its publish",
            explicit_bucket_boundaries_advisory=_LAG_BUCKETS_S,
        )
        # Histograms, not gauges: a gauge's last value is exported again every interval (its
        # temporality is cumulative), so a watchdog that stopped would look healthy; a
        # histogram exports only what was recorded in the interval.
        self._stuck = meter.create_histogram(
            METRIC_RELAY_STUCK,
            unit="{document}",
            description="Outbox documents pending longer than the watchdog's age, per run",
            explicit_bucket_boundaries_advisory=_STUCK_BUCKETS,
        )
        self._stuck_age = meter.create_histogram(
            METRIC_RELAY_STUCK_AGE,
            unit="s",
            description="Age (now - createdAt) of the oldest stuck outbox document, per run",
            explicit_bucket_boundaries_advisory=_STUCK_AGE_BUCKETS_S,
        )

    def start_publish(
        self, event_id: str, order_id: str, stored_traceparent: str | None = None
    ) -> Span:
        """The producer span of one event; ended by ``published`` or ``publish_failed``. Linked
        to the consumer's span when the outbox document carries its ``traceparent``."""
        links = producer_links({"traceparent": stored_traceparent}) if stored_traceparent else []
        return self._tracer.start_span(
            self.span_name,
            kind=SpanKind.PRODUCER,
            links=links,
            attributes={
                ATTR_SYSTEM: MESSAGING_SYSTEM,
                ATTR_OPERATION_TYPE: RELAY_OPERATION_TYPE,
                ATTR_OPERATION_NAME: RELAY_OPERATION_TYPE,
                ATTR_DESTINATION: self.topic_name,
                ATTR_MESSAGE_ID: event_id,
                ATTR_EVENT_ID: event_id,
                ATTR_ORDER_ID: order_id,
                ATTR_TOPIC: self.topic_name,
            },
        )

    @staticmethod
    def traceparent(span: Span) -> str | None:
        """The W3C traceparent of ``span``; None when tracing is off (a non-recording span)."""
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get("traceparent")

    def published(self, span: Span, event_id: str, order_id: str, lag_s: float) -> None:
        span.set_attribute(ATTR_RELAY_OUTCOME, RELAY_PUBLISHED)
        self._published.add(1, {ATTR_TOPIC: self.topic_name})
        self._lag.record(max(0.0, lag_s), {ATTR_TOPIC: self.topic_name})
        # Logged with its publish span current: the record carries the event's trace (it joins
        # the span's dependencies row) and is exported exactly when that span is sampled.
        with trace.use_span(span, end_on_exit=True):
            relay_logger.info(
                "OrderAccepted %s of order %s published",
                event_id,
                order_id,
                extra={"event_id": event_id, "order_id": order_id, "topic": self.topic_name},
            )

    def publish_failed(
        self,
        span: Span,
        event_id: str,
        order_id: str,
        error: BaseException,
        *,
        parked: bool = False,
    ) -> None:
        """A failed send; ``parked``: it will not be retried (``parked`` logs it)."""
        # Bounded: a class name, never the message; the SDK's own when the adapter translated it.
        cause = error.__cause__
        shown = cause if isinstance(cause, Exception) else error
        self._failed_send(span, event_id, order_id, shown, parked=parked)

    def _failed_send(
        self, span: Span, event_id: str, order_id: str, shown: BaseException, *, parked: bool
    ) -> None:
        error_type = type(shown).__name__
        span.set_attribute(ATTR_RELAY_OUTCOME, RELAY_PARKED if parked else RELAY_FAILED)
        _set_error_type(span, error_type)  # error.type and its kept copy orders.error_type
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {shown}"[:300]))
        span.end()
        self._failed.add(1, {ATTR_TOPIC: self.topic_name, ATTR_ERROR_TYPE: error_type})
        relay_logger.error(
            "sending OrderAccepted %s of order %s failed: %s: %s",
            event_id,
            order_id,
            error_type,
            shown,
            extra={
                "event_id": event_id,
                "order_id": order_id,
                "topic": self.topic_name,
                "error_type": error_type,
            },
        )

    def failed_before_send(self, event_id: str, order_id: str, error: BaseException) -> None:
        """An event that could not even be sent (the relay cannot be built: an invalid
        setting): recorded as a failed send, span, counter and error log alike."""
        span = self.start_publish(event_id, order_id)
        self._failed_send(span, event_id, order_id, error, parked=False)

    def parked(self, event_id: str, order_id: str, reason: str, description: str) -> None:
        self._parked.add(1, {ATTR_TOPIC: self.topic_name})
        relay_logger.critical(
            "OrderAccepted %s of order %s parked (%s): %s; reset its status to pending to "
            "publish it again",
            event_id,
            order_id,
            reason,
            description,
            extra={
                "event_id": event_id,
                "order_id": order_id,
                "topic": self.topic_name,
                "parked_reason": reason,
                "description": description,
            },
        )

    def watchdog_checked(self, stuck: int, oldest_age_s: float, min_age_s: float) -> None:
        """One watchdog run: how many outbox documents are stuck, and the oldest one's age (0
        when none). Recorded on every run, the quiet ones included."""
        attributes = {ATTR_TOPIC: self.topic_name}
        self._stuck.record(stuck, attributes)
        self._stuck_age.record(max(0.0, oldest_age_s), attributes)
        if stuck:
            relay_logger.warning(
                "outbox watchdog: %d OrderAccepted event(s) still pending more than %d s after "
                "their order was accepted (oldest %.0f s): the change feed did not publish them; "
                "publishing them now",
                stuck,
                min_age_s,
                oldest_age_s,
                extra={
                    "topic": self.topic_name,
                    "stuck_outbox_documents": stuck,
                    "oldest_stuck_age_s": oldest_age_s,
                },
            )

    def mark_failed(self, event_id: str, order_id: str, error: BaseException) -> None:
        """Marking (or parking) an outbox document failed: the batch's redelivery resolves it."""
        relay_logger.warning(
            "updating the outbox document of %s (order %s) failed: %s: %s",
            event_id,
            order_id,
            type(error).__name__,
            error,
            extra={"event_id": event_id, "order_id": order_id, "error_type": type(error).__name__},
        )
