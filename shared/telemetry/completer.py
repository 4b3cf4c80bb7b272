"""The request completer's instrumentation, its observer port implemented
(``shared.edge.completer.CompleterObserver``): two histograms recorded once per run (the unsent
records found, the oldest one's age), two counters (sent, left unsent by error type) and its log
records. The names are ``shared.telemetry.names``'s ("the request completer"): a contract with
infra/app/completer-alerts.bicep and docs/operations.md.

A record's ids came with a request (the order id and MessageId the edge derived from the
client's key, the record id holding the key itself): a log message holds them quoted (``%r``),
as the relay's does an event id.
"""

from __future__ import annotations

import logging

from idempotent_consumer import StoreError
from opentelemetry import metrics

from shared.edge.completer import RunEnd
from shared.telemetry.names import (
    ATTR_COMPLETER_END,
    ATTR_KEPT_ERROR_TYPE,
    COMPLETER_INSTRUMENTATION_SCOPE,
    COMPLETER_LOGGER_NAME,
    METRIC_COMPLETER_FAILED,
    METRIC_COMPLETER_FOUND,
    METRIC_COMPLETER_SENT,
    METRIC_COMPLETER_UNSENT_AGE,
)

_FOUND_BUCKETS = (0, 1, 10, 100, 1000)
_AGE_BUCKETS_S = (0, 90, 180, 300, 600, 1800, 3600, 21600, 86400)

completer_logger = logging.getLogger(COMPLETER_LOGGER_NAME)


class CompleterTelemetry:
    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter(COMPLETER_INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        # Histograms, not gauges (as the outbox watchdog's, shared.telemetry.relay): a gauge's
        # last value is exported again every interval, so a completer that stopped would look
        # healthy; a histogram exports only what was recorded in the interval.
        self._found = meter.create_histogram(
            METRIC_COMPLETER_FOUND,
            unit="{request}",
            description="Request records committed but not sent past the completer's age, per run",
            explicit_bucket_boundaries_advisory=_FOUND_BUCKETS,
        )
        self._unsent_age = meter.create_histogram(
            METRIC_COMPLETER_UNSENT_AGE,
            unit="s",
            description="Age (now - startedAt) of the oldest unsent request record, per run",
            explicit_bucket_boundaries_advisory=_AGE_BUCKETS_S,
        )
        self._sent = meter.create_counter(
            METRIC_COMPLETER_SENT,
            unit="{message}",
            description="Messages of unsent request records the completer sent to the queue",
        )
        self._failed = meter.create_counter(
            METRIC_COMPLETER_FAILED,
            unit="{request}",
            description="Unsent request records the completer could not send, by error type",
        )

    def request_completed(
        self, order_id: str, message_id: str, age_s: float, mark_error: StoreError | None
    ) -> None:
        self._sent.add(1)
        completer_logger.info(
            "message %r of order %r sent by the request completer, %.0f s after its request "
            "was committed",
            message_id,
            order_id,
            age_s,
            extra={"order_id": order_id, "message_id": message_id, "unsent_age_s": age_s},
        )
        if mark_error is not None:
            completer_logger.warning(
                "the sent mark of message %r of order %r failed (%s): the next run sends it "
                "again, a duplicate the queue and the consumer absorb",
                message_id,
                order_id,
                type(mark_error).__name__,
                extra={
                    "order_id": order_id,
                    "message_id": message_id,
                    "error_type": type(mark_error).__name__,
                },
            )

    def request_not_completed(self, record_id: str, order_id: str, error: BaseException) -> None:
        # Bounded: a class name, the SDK's own when the adapter translated it.
        cause = error.__cause__
        shown = cause if isinstance(cause, Exception) else error
        error_type = type(shown).__name__
        self._failed.add(1, {ATTR_KEPT_ERROR_TYPE: error_type})
        completer_logger.error(
            "the request completer could not send request %r of order %r: %s: %s; "
            "it stays unsent for the next run",
            record_id,
            order_id,
            error_type,
            shown,
            extra={"record_id": record_id, "order_id": order_id, "error_type": error_type},
        )

    def completer_checked(
        self, found: int, sent: int, failed: int, oldest_age_s: float, end: RunEnd
    ) -> None:
        attributes = {ATTR_COMPLETER_END: end.value}
        self._found.record(found, attributes)
        self._unsent_age.record(max(0.0, oldest_age_s), attributes)
        if found:
            completer_logger.warning(
                "request completer: %d request(s) committed but not sent (oldest %.0f s): "
                "sent %d, failed %d (run ended: %s)",
                found,
                oldest_age_s,
                sent,
                failed,
                end.value,
                extra={
                    "unsent_requests": found,
                    "oldest_unsent_age_s": oldest_age_s,
                    "completer_sent": sent,
                    "completer_failed": failed,
                    "completer_end": end.value,
                },
            )
