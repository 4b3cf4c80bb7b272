"""The relay's and the watchdog's instrumentation, their observer ports implemented
(``shared.relay.core.RelayObserver``, ``shared.relay.watchdog.WatchdogObserver``): a PRODUCER span
per published event, the relay's counters and histograms, and its log records. The names are
``shared.telemetry.names``'s: a contract with infra/ (queries, alerts, workbook) and
docs/operations.md; tests/telemetry/test_envelopes.py holds them against the exporter's output.

An event's ids, its order's id and a parking description came with an order: a log message holds
them quoted (``%r``), as the consumer's does a MessageId (``shared.telemetry.consumer``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from idempotent_consumer.telemetry import producer_links, set_error_type, traceparent_of
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from shared.relay.watchdog import RunEnd
from shared.telemetry.names import (
    ATTR_DESTINATION,
    ATTR_ERROR_TYPE,
    ATTR_EVENT_ID,
    ATTR_KEPT_ERROR_TYPE,
    ATTR_MESSAGE_ID,
    ATTR_OPERATION_NAME,
    ATTR_OPERATION_TYPE,
    ATTR_ORDER_ID,
    ATTR_RELAY_OUTCOME,
    ATTR_SYSTEM,
    ATTR_TOPIC,
    ATTR_WATCHDOG_END,
    MESSAGING_SYSTEM,
    METRIC_RELAY_FAILED,
    METRIC_RELAY_LAG,
    METRIC_RELAY_PARKED,
    METRIC_RELAY_PUBLISHED,
    METRIC_RELAY_STUCK,
    METRIC_RELAY_STUCK_AGE,
    RELAY_FAILED,
    RELAY_INSTRUMENTATION_SCOPE,
    RELAY_LOGGER_NAME,
    RELAY_OPERATION_TYPE,
    RELAY_PARKED,
    RELAY_PUBLISHED,
)

# Relay lag: seconds from the order's acceptance to its event's publish.
_LAG_BUCKETS_S = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
_STUCK_BUCKETS = (0, 1, 10, 100, 1000, 10000)
_STUCK_AGE_BUCKETS_S = (0, 300, 600, 900, 1800, 3600, 21600, 86400)

relay_logger = logging.getLogger(RELAY_LOGGER_NAME)


@dataclass(frozen=True, slots=True)
class PublishSpan:
    """One event's publish as the relay core sees it (``shared.relay.core.PublishObservation``):
    the span's traceparent, and its end (published, or failed)."""

    telemetry: RelayTelemetry
    span: Span
    event_id: str
    order_id: str

    @property
    def traceparent(self) -> str | None:
        return traceparent_of(self.span)

    def published(self, lag_s: float) -> None:
        self.telemetry._end_published(self.span, self.event_id, self.order_id, lag_s)

    def failed(self, error: BaseException, *, parked: bool = False) -> None:
        """A failed send; ``parked``: it will not be retried (``parked`` logs it)."""
        self.telemetry._end_failed(self.span, self.event_id, self.order_id, error, parked=parked)


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
    ) -> PublishSpan:
        """The producer span of one event, started before its message is built (the message's
        ``traceparent`` is this span's); ended by the observation's ``published`` or ``failed``.
        Linked to the consumer's span when the outbox document carries its ``traceparent``."""
        return PublishSpan(
            self, self._span(event_id, order_id, stored_traceparent), event_id, order_id
        )

    def _span(self, event_id: str, order_id: str, stored_traceparent: str | None) -> Span:
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

    def _end_published(self, span: Span, event_id: str, order_id: str, lag_s: float) -> None:
        span.set_attribute(ATTR_RELAY_OUTCOME, RELAY_PUBLISHED)
        self._published.add(1, {ATTR_TOPIC: self.topic_name})
        self._lag.record(max(0.0, lag_s), {ATTR_TOPIC: self.topic_name})
        # Logged with its publish span current: the record carries the event's trace (it joins
        # the span's dependencies row) and is exported exactly when that span is sampled.
        with trace.use_span(span, end_on_exit=True):
            relay_logger.info(
                "event %r of order %r published",
                event_id,
                order_id,
                extra={"event_id": event_id, "order_id": order_id, "topic": self.topic_name},
            )

    def _end_failed(
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
        # error.type and its kept copy orders.error_type
        set_error_type(span, error_type, ATTR_KEPT_ERROR_TYPE)
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {shown}"[:300]))
        span.end()
        self._failed.add(1, {ATTR_TOPIC: self.topic_name, ATTR_ERROR_TYPE: error_type})
        relay_logger.error(
            "sending event %r of order %r failed: %s: %s",
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
        span = self._span(event_id, order_id, None)
        self._failed_send(span, event_id, order_id, error, parked=False)

    def parked(self, event_id: str, order_id: str, reason: str, description: str) -> None:
        self._parked.add(1, {ATTR_TOPIC: self.topic_name})
        relay_logger.critical(
            "event %r of order %r parked (%s): %r; reset its status to pending to publish it again",
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

    def watchdog_checked(
        self, stuck: int, oldest_age_s: float, min_age_s: float, end: RunEnd
    ) -> None:
        """One watchdog run: how many stuck outbox documents it read, the oldest one's age (0
        when none) and how it ended. Recorded on every run, the quiet ones included."""
        attributes = {ATTR_TOPIC: self.topic_name, ATTR_WATCHDOG_END: end.value}
        self._stuck.record(stuck, attributes)
        self._stuck_age.record(max(0.0, oldest_age_s), attributes)
        if stuck:
            relay_logger.warning(
                "outbox watchdog: %d event(s) still pending more than %d s after "
                "their order was accepted (oldest %.0f s): the change feed did not publish them; "
                "the watchdog published them (run ended: %s)",
                stuck,
                min_age_s,
                oldest_age_s,
                end.value,
                extra={
                    "topic": self.topic_name,
                    "stuck_outbox_documents": stuck,
                    "oldest_stuck_age_s": oldest_age_s,
                    "watchdog_end": end.value,
                },
            )

    def mark_failed(self, event_id: str, order_id: str, error: BaseException) -> None:
        """Marking (or parking) an outbox document failed: the batch's redelivery resolves it."""
        relay_logger.warning(
            "updating the outbox document of %r (order %r) failed: %s: %s",
            event_id,
            order_id,
            type(error).__name__,
            error,
            extra={"event_id": event_id, "order_id": order_id, "error_type": type(error).__name__},
        )

    def already_marked(self, document_id: str, event_id: str, order_id: str) -> None:
        """The mark met a newer version (412: an earlier run marked it) or no document."""
        relay_logger.info(
            "outbox document %s changed since it was read: already marked",
            document_id,
            extra={"event_id": event_id, "order_id": order_id},
        )

    def not_parked_again(self, document_id: str, event_id: str, order_id: str) -> None:
        """The park met a newer version: a retry meeting what an earlier run parked (counting it
        again would page twice), or an operator's newer version."""
        relay_logger.info(
            "outbox document %s changed since it was read: not parked again",
            document_id,
            extra={"event_id": event_id, "order_id": order_id},
        )
