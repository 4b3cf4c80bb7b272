"""A consumer's instrumentation, the kit's observer port implemented (``ConsumerObserver``): one
consumer span, a few low-cardinality metrics and one structured log line per delivery, through
the OpenTelemetry API (a no-op until the app configures an SDK, e.g. the Azure Monitor
distro). The names are one namespace's (``TelemetryNames``).

One ``ConsumerTelemetry`` per consumer of the kit: its span, every metric point and every log
record carry the consumer's name, so that the consumers of one app share the metrics and their
queries split them. A decision's business counts (``Decision.measures``) are exported as the
counters the app lists (``business_counters``), and only those.

A message's own values (its MessageId) appear in a log message only quoted (``%r``: CR, LF, ESC
and every other unprintable character escaped), so a sender can neither forge a line nor reach
a terminal; as fields (``customDimensions``) they stay as sent: data, not lines.

Metric attributes are bounded by construction (consumer, outcome, settlement, operation, a
listed message type): a message id or an order id in a metric attribute would create one time
series per message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from idempotent_consumer import ConfigurationError, Decision, IncomingMessage, Outcome, Settlement
from idempotent_consumer.servicebus import HungSettlements
from idempotent_consumer.telemetry._names import (
    ATTR_CONVERSATION_ID,
    ATTR_DELIVERY_COUNT,
    ATTR_DESTINATION,
    ATTR_DISPOSITION,
    ATTR_MESSAGE_ID,
    ATTR_OPERATION_NAME,
    ATTR_OPERATION_TYPE,
    ATTR_SUBSCRIPTION,
    ATTR_SYSTEM,
    MESSAGING_SYSTEM,
    NOT_SETTLED,
    OPERATION_TYPE,
    OTHER_MESSAGE_TYPE,
    BusinessCounter,
    TelemetryNames,
)
from idempotent_consumer.telemetry._spans import (
    producer_links,
    qualified_name,
    set_error_type,
    traceparent_of,
)

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
    # A signal (a producer resending an old version, a replay), never a page: counted, and
    # logged with both versions, so an operator can tell which producer sent what.
    Outcome.STALE: logging.INFO,
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

# Request units charged during the current delivery (set by ``processing``).
_delivery_charge: ContextVar[list[float] | None] = ContextVar(
    "idempotent_consumer_charge", default=None
)


class ConsumerTelemetry:
    """One consumer's telemetry. Instruments are created once, here, not per message (several
    consumers on one provider share them: the SDK returns the instrument already registered
    under a name). Providers default to the global ones (configured by the app's exporters);
    tests inject SDK providers instead.

    ``destination`` is the queue the consumer reads, or the topic when it reads a
    ``subscription`` of it: the messaging semantic conventions put the topic in
    ``messaging.destination.name`` and the subscription in
    ``messaging.destination.subscription.name``, and name the span after the destination
    (``process <topic>``); the consumer tells the topic's consumers apart. The
    subscription is a separate argument rather than a ``topic/subscription`` string because a
    queue's name may itself contain a slash ("Cannot start or end with a slash":
    learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties.name).
    ``consumer`` is the kit's consumer name (``ConsumerDefinition.name``).

    ``names``: the namespace of every exported name. ``business_counters``: the
    ``Decision.measures`` keys exported, each as ``<namespace>.<key>``; any other is logged once
    and dropped. ``message_types``: the message types (a decision's, or else the Subject) kept
    as the ``message_type`` attribute, any other exported as ``other``; ``default_message_type``
    is a message's without either."""

    def __init__(
        self,
        destination: str,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        subscription: str | None = None,
        consumer: str,
        names: TelemetryNames | None = None,
        business_counters: Mapping[str, BusinessCounter] | None = None,
        message_types: frozenset[str] = frozenset(),
        default_message_type: str = OTHER_MESSAGE_TYPE,
    ) -> None:
        self.names = names = names or TelemetryNames()
        self._logger = logging.getLogger(names.logger_name)
        self._message_types = message_types
        self._default_message_type = default_message_type
        self.destination = destination
        self.subscription = subscription
        self.consumer = consumer
        self.span_name = f"{OPERATION_TYPE} {destination}"
        # On every metric point and log record of this consumer.
        self._consumer_attribute: Mapping[str, str] = {names.consumer: consumer}
        # The metric attributes of each (outcome, settlement, message type): built once, not
        # per delivery. Bounded: each is one of a small closed set (``_message_type``), and the
        # SDK only reads what it is given (a frozenset of the items is its key).
        self._attributes_by_outcome: dict[
            tuple[str, str, str], tuple[Mapping[str, str], Mapping[str, str]]
        ] = {}
        self._charge_attributes: dict[str, Mapping[str, str]] = {}
        self._span_attributes: dict[str, Any] = {
            ATTR_SYSTEM: MESSAGING_SYSTEM,
            ATTR_OPERATION_TYPE: OPERATION_TYPE,
            ATTR_OPERATION_NAME: OPERATION_TYPE,
            ATTR_DESTINATION: destination,
            names.consumer: consumer,
        }
        if subscription is None:
            self._span_attributes[names.kept_queue] = destination
        else:
            self._span_attributes |= {
                ATTR_SUBSCRIPTION: subscription,
                names.topic: destination,
                names.kept_subscription: subscription,
            }
        # Measure names already refused, each logged once (a consumer reports it per delivery).
        self._unknown_measures: set[str] = set()
        self._tracer = trace.get_tracer(
            names.instrumentation_scope, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(names.instrumentation_scope, meter_provider=meter_provider)
        self._messages = meter.create_counter(
            names.metric_messages,
            unit="{message}",
            description="Deliveries handled, by outcome and settlement",
        )
        self._duration = meter.create_histogram(
            names.metric_duration,
            unit="s",
            description="Time to decide and settle one delivery, by outcome",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS_S,
        )
        self._request_charge = meter.create_histogram(
            names.metric_request_charge,
            unit="{request_unit}",
            description="Cosmos DB request charge of one operation, by operation",
            explicit_bucket_boundaries_advisory=_REQUEST_CHARGE_BUCKETS,
        )
        self._retries = meter.create_counter(
            names.metric_retries,
            unit="{retry}",
            description="In-delivery retries of transient or systemic failures, by outcome",
        )
        self._delivery_count = meter.create_histogram(
            names.metric_delivery_count,
            unit="{delivery}",
            description="Service Bus delivery count of each handled delivery, by outcome",
            explicit_bucket_boundaries_advisory=_DELIVERY_COUNT_BUCKETS,
        )
        # Up and down: +1 per hang, -1 per late return; the exporter sends its running total.
        self._settlements_hung = meter.create_up_down_counter(
            names.metric_settlement_hung,
            unit="{call}",
            description="Settlement calls past their timeout that still hold a thread",
        )
        self._business = {
            measure: meter.create_counter(
                names.metric_of_measure(measure), unit=counter.unit, description=counter.description
            )
            for measure, counter in (business_counters or {}).items()
        }

    def processing(self, message: IncomingMessage) -> AbstractContextManager[str | None]:
        """The consumer span of one delivery; yields its W3C traceparent (None when tracing is
        off), which the core stores on the outbox event so that the relay's publish span links
        back to it. The span is current while the delivery is handled, so the Cosmos DB SDK's
        spans become its children, and ``retrying``, ``settlement_failed`` and
        ``record_outcome`` record on it. It is linked to the producer's span when the message
        carries trace context; its parent is the ambient context (the Functions host's
        invocation when the worker propagates it)."""
        return _DeliverySpan(self, message)

    def _start_span(self, message: IncomingMessage) -> Span:
        attributes = dict(self._span_attributes)
        if message.message_id is not None:
            attributes[ATTR_MESSAGE_ID] = message.message_id
            attributes[self.names.kept_message_id] = message.message_id
        if message.correlation_id is not None:
            attributes[ATTR_CONVERSATION_ID] = message.correlation_id
            attributes[self.names.kept_correlation_id] = message.correlation_id
        if message.delivery_count is not None:
            attributes[ATTR_DELIVERY_COUNT] = message.delivery_count
            attributes[self.names.kept_delivery_count] = message.delivery_count
        return self._tracer.start_span(
            self.span_name,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=producer_links(message.application_properties),
            # Decisions are not exceptions; what does escape is recorded by _DeliverySpan.
            record_exception=False,
            set_status_on_exception=False,
        )

    def record_request_charge(self, operation: str, request_units: float) -> None:
        """The Cosmos DB store's request charge hook (operation: create, batch or read)."""
        attributes = self._charge_attributes.get(operation)
        if attributes is None:  # the store's few operations: create, batch, read
            attributes = {**self._consumer_attribute, "operation": operation}
            self._charge_attributes[operation] = attributes
        self._request_charge.record(request_units, attributes)
        charges = _delivery_charge.get()
        if charges is not None:
            charges.append(request_units)

    def record_outcome(
        self,
        message: IncomingMessage,
        decision: Decision,
        *,
        settled: bool,
        duration_s: float,
        attempts: int = 1,
    ) -> None:
        """Called inside ``processing``: the current span is the delivery's."""
        span = trace.get_current_span()
        names = self.names
        outcome = decision.outcome.value
        settlement = decision.settlement.value if settled else NOT_SETTLED

        message_type = self._message_type(decision, message)
        # A span that is not recording (tracing off, or sampled out) keeps nothing: its
        # attributes are not computed (opentelemetry.trace.Span.is_recording).
        if span.is_recording():
            span.set_attribute(names.outcome, outcome)
            span.set_attribute(names.settlement, settlement)
            span.set_attribute(names.attempts, attempts)
            if settled:
                span.set_attribute(ATTR_DISPOSITION, _DISPOSITION[decision.settlement])
            if decision.deadletter_reason:
                span.set_attribute(names.deadletter_reason, decision.deadletter_reason)
            if decision.order_id is not None:
                span.set_attribute(names.order_id, decision.order_id)
            span.set_attribute(names.message_type, message_type)
            if decision.order_version is not None:
                span.set_attribute(names.order_version, decision.order_version)
            if decision.stored_version is not None:
                span.set_attribute(names.stored_version, decision.stored_version)
            charges = _delivery_charge.get()
            if charges:
                span.set_attribute(names.request_charge, sum(charges))
            if decision.outcome in _FAILED_OUTCOMES:
                error_type = (
                    qualified_name(type(decision.error)) if decision.error is not None else outcome
                )
                set_error_type(span, error_type, names.kept_error_type)
                span.set_status(Status(StatusCode.ERROR, decision.description or outcome))
                if decision.error is not None and decision.outcome in _RECORDED_OUTCOMES:
                    span.record_exception(decision.error)
            elif not settled:
                # settlement_failed() has set error.type to the settlement error.
                span.set_status(Status(StatusCode.ERROR, f"{decision.settlement.value} failed"))

        by_outcome, by_message = self._outcome_attributes(outcome, settlement, message_type)
        self._messages.add(1, by_message)
        self._duration.record(duration_s, by_outcome)
        if message.delivery_count is not None:
            self._delivery_count.record(message.delivery_count, by_outcome)
        self._record_measures(decision.measures)

        level = _LOG_LEVEL_BY_OUTCOME[decision.outcome]
        if not self._logger.isEnabledFor(level):
            return  # the record's fields are built only for a level that is kept
        self._logger.log(
            level,
            "%s message %r: %s, %s",
            self.consumer,
            message.message_id,
            outcome,
            settlement,
            exc_info=decision.error if decision.outcome is Outcome.UNEXPECTED else None,
            extra={
                "outcome": outcome,
                "settlement": settlement,
                "deadletter_reason": decision.deadletter_reason,
                "description": decision.description,
                "message_type": message_type,
                "order_version": decision.order_version,
                "stored_version": decision.stored_version,
                **self._message_fields(message, decision),
            },
        )

    def _record_measures(self, measures: Mapping[str, int]) -> None:
        """The decision's business counts, each on its counter (``business_counters``). A
        name not listed is not exported: every name would be a metric, for good (bounded
        cardinality, as the attributes); nor is a negative count (a counter only rises). Each
        refused name is logged once, at warning: a consumer reporting it is a bug to fix."""
        for measure, count in measures.items():
            counter = self._business.get(measure)
            if counter is not None and count >= 0:
                if count:
                    counter.add(count, self._consumer_attribute)
                continue
            if measure in self._unknown_measures:
                continue
            self._unknown_measures.add(measure)
            self._logger.warning(
                "%s reported the measure %r (%d), not exported: %s",
                self.consumer,
                measure,
                count,
                "a negative count" if counter is not None else "not a known measure",
                extra={**self._consumer_attribute, "measure": measure},
            )

    def _message_fields(self, message: IncomingMessage, decision: Decision) -> dict[str, Any]:
        """What every log record of a delivery carries, to find the delivery, its order and
        the consumer that handled it."""
        return {
            **self._consumer_attribute,
            "message_id": message.message_id,
            "correlation_id": message.correlation_id,
            "delivery_count": message.delivery_count,
            "order_id": decision.order_id,
        }

    def retrying(
        self, message: IncomingMessage, decision: Decision, attempt: int, delay_s: float
    ) -> None:
        """A transient or systemic failure that the delivery rides out while holding its lock.
        Counted, so an outage shows up on dashboards before any message is abandoned."""
        span = trace.get_current_span()
        span.add_event(
            "retry",
            {
                self.names.outcome: decision.outcome.value,
                self.names.attempt: attempt,
                "delay_s": delay_s,
            },
        )
        self._retries.add(1, {**self._consumer_attribute, "outcome": decision.outcome.value})
        # Not ``outcome``: one log record per delivery carries the outcome, so that counting
        # outcomes in App Insights counts deliveries. The final record is logged at its
        # outcome's level (error for systemic) once the delivery gives up.
        self._logger.warning(
            "%s message %r: %s on attempt %d, retrying in %.1f s",
            self.consumer,
            message.message_id,
            decision.outcome.value,
            attempt,
            delay_s,
            extra={
                "attempt_outcome": decision.outcome.value,
                **self._message_fields(message, decision),
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
        set_error_type(span, qualified_name(type(error)), self.names.kept_error_type)
        span.record_exception(error)
        # Expected after a lock loss: the redelivery is classified as a duplicate.
        self._logger.warning(
            "settling message %r (%s) failed: %s",
            message.message_id,
            decision.settlement.value,
            error,
            extra={
                "outcome": decision.outcome.value,
                "settlement": decision.settlement.value,
                **self._message_fields(message, decision),
                "settlement_error": type(error).__name__,
            },
        )

    def configuration_invalid(self, message: IncomingMessage, error: ConfigurationError) -> None:
        """The consumer cannot be built (an invalid app setting): a critical log naming the
        setting, before the delivery is held and abandoned (and recorded as systemic)."""
        self._logger.critical(
            "invalid configuration (%s), holding then abandoning message %r: %s",
            error.setting,
            message.message_id,
            error,
            extra={
                **self._consumer_attribute,
                "message_id": message.message_id,
                "setting": error.setting,
            },
        )

    def _outcome_attributes(
        self, outcome: str, settlement: str, message_type: str
    ) -> tuple[Mapping[str, str], Mapping[str, str]]:
        """The attributes by outcome, and with the settlement and the message type."""
        key = (outcome, settlement, message_type)
        found = self._attributes_by_outcome.get(key)
        if found is None:
            by_outcome = {**self._consumer_attribute, "outcome": outcome}
            by_message = {**by_outcome, "settlement": settlement, "message_type": message_type}
            found = self._attributes_by_outcome[key] = (by_outcome, by_message)
        return found

    def _message_type(self, decision: Decision, message: IncomingMessage) -> str:
        """The message type as a bounded attribute: the decision's, or its Subject (neither:
        ``default_message_type``); ``other`` for one not listed in ``message_types``."""
        message_type = decision.message_type or message.subject or self._default_message_type
        return message_type if message_type in self._message_types else OTHER_MESSAGE_TYPE

    def settlements_hung(self, report: HungSettlements) -> None:
        """The settler's watcher (``idempotent_consumer.servicebus.Settler``): a settlement call
        outlived its timeout and keeps its thread, or such a call has returned at last. May run
        on a pool thread."""
        fields = {
            **self._consumer_attribute,
            "hung_settlements": report.hung,
            "settlement_pool_replaced": report.replaced_pool,
            "settlement_pool_exhausted": report.exhausted,
        }
        if report.returned_after_s is not None:
            self._settlements_hung.add(-1, self._consumer_attribute)
            self._logger.warning(
                "a hung settlement call returned after %.1f s; %d still hung",
                report.returned_after_s,
                report.hung,
                extra=fields,
            )
            return
        self._settlements_hung.add(1, self._consumer_attribute)
        self._logger.log(
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


class _DeliverySpan:
    """``ConsumerTelemetry.processing``: the delivery's span started and made current, as
    opentelemetry-api's ``Tracer.start_as_current_span`` does (then ``trace.use_span`` with
    ``end_on_exit``), and the delivery's request charges collected. A class, not generator
    context managers: a fifth of their cost, on every delivery."""

    __slots__ = ("_charge_token", "_context_token", "_message", "_span", "_telemetry")

    def __init__(self, telemetry: ConsumerTelemetry, message: IncomingMessage) -> None:
        self._telemetry = telemetry
        self._message = message

    def __enter__(self) -> str | None:
        self._charge_token = _delivery_charge.set([])
        try:
            self._span = span = self._telemetry._start_span(self._message)
            self._context_token = otel_context.attach(trace.set_span_in_context(span))
        except BaseException:
            _delivery_charge.reset(self._charge_token)
            raise
        try:
            return traceparent_of(span)
        except BaseException as error:
            self.__exit__(type(error), error, error.__traceback__)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        span = self._span
        try:
            if error is not None:
                # Only cancellation (or a bug in the consumer) gets here: nothing was settled,
                # the lock will lapse and the message come back.
                names = self._telemetry.names
                set_error_type(span, qualified_name(type(error)), names.kept_error_type)
                span.set_status(Status(StatusCode.ERROR, f"not settled: {error!r}"))
                span.record_exception(error)
        finally:
            try:
                otel_context.detach(self._context_token)
                span.end()
            finally:
                _delivery_charge.reset(self._charge_token)
