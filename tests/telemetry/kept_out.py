"""What operators and Service Bus keep of a delivery, searched for a message's values: the
dead-letter description, the consumer span (attributes, status, events) as the OpenTelemetry SDK
exports it, and the consumer's log records, as logged (message and every field) and as the
OpenTelemetry logging handler exports them (``customDimensions`` in Application Insights).

The values are marked with ``MARK`` (a customer id, an address): a body that fails its contract
carries it in the fields it fails on and in a field whose whole object fails (pydantic's
``input_value`` echoes the field's value, or the whole object for a missing field). The MessageId
is the one input value meant to be seen: it never carries the mark. It is seen quoted:
``FORGING_ID`` would forge a log line and clear a terminal's line if a log message held it raw
(``unquoted`` finds such messages).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan

from shared.telemetry import names

MARK = "S3cr3t-7Qx"
# First in its object: pydantic shows the first and last characters of a long input value.
ADDRESS = {"address": f"{MARK} Lane 1"}
TOO_LONG = f"{MARK}-{'x' * 64}"  # over every 64-character limit (customerId, sku)

# CR LF and a record of its own, then ESC [2K (erase the line); within the 128 characters a
# Service Bus MessageId may have.
FORGING_ID = "ord-1\r\n2026-11-29 12:00:00 CRITICAL orders.consumer forged\x1b[2K"
_RAW_CONTROLS = ("\n", "\r", "\x1b")


def marked_event(event_type: str = "OrderAccepted") -> dict[str, Any]:
    """An order event (docs/events.md) that fails every topic consumer's contract on the marked
    values: no ``orderId`` (a missing field echoes its whole object, the address first), a
    customer id and a SKU over their limits; every other field valid."""
    return {
        "schemaVersion": 1,
        "eventId": "3f2c1a9e-0b7d-4c55-9a6e-1d2f3a4b5c6d",
        "eventType": event_type,
        "occurredAt": "2026-11-29T12:00:00Z",
        "payload": {
            **ADDRESS,
            "orderVersion": 1,
            "customerId": TOO_LONG,
            "currency": "EUR",
            "totalMinor": 4200,
            "placedAt": "2026-11-29T12:00:00Z",
            "lines": [{"sku": TOO_LONG, "quantity": 1, "unitPriceMinor": 4200}],
        },
    }


@contextmanager
def exported_logs() -> Iterator[InMemoryLogRecordExporter]:
    """The consumer's records as ``configure_exporters`` exports them: the distro's handler on
    the ``orders`` logger, to memory; the consumer logger at INFO for the duration."""
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    handler = LoggingHandler(level=logging.INFO, logger_provider=provider)
    exported = logging.getLogger(names.EXPORTED_LOGGER_NAME)
    consumer_logger = logging.getLogger(names.LOGGER_NAME)
    level = consumer_logger.level
    exported.addHandler(handler)
    consumer_logger.setLevel(logging.INFO)
    try:
        yield exporter
    finally:
        exported.removeHandler(handler)
        consumer_logger.setLevel(level)


def showing(
    secret: str,
    *,
    descriptions: Iterable[str | None],
    spans: Iterable[ReadableSpan],
    records: Iterable[logging.LogRecord],
    exported: InMemoryLogRecordExporter,
) -> list[str]:
    """Every place ``secret`` shows in, named for the assertion's message: [] when none."""
    found = [f"dead-letter description {d!r}" for d in descriptions if secret in (d or "")]
    for span in spans:
        if secret in (span.status.description or ""):
            found.append(f"span {span.name!r} status {span.status.description!r}")
        found += _in(secret, f"span {span.name!r} attribute", span.attributes or {})
        for event in span.events:
            found += _in(secret, f"span event {event.name!r}", event.attributes or {})
    for record in consumer_records(records):
        if secret in record.getMessage():
            found.append(f"log message {record.getMessage()!r}")
        found += _in(secret, "log field", vars(record))
    for data in exported.get_finished_logs():
        log = data.log_record
        if secret in str(log.body):
            found.append(f"exported log body {log.body!r}")
        found += _in(secret, "customDimensions", log.attributes or {})
    return found


def consumer_records(records: Iterable[logging.LogRecord]) -> list[logging.LogRecord]:
    """The records of the consumers' loggers (``orders.*``)."""
    return [r for r in records if r.name.startswith(names.EXPORTED_LOGGER_NAME)]


def unquoted(records: Iterable[logging.LogRecord]) -> list[str]:
    """The log messages that hold a raw line break or ESC: [] when every value is quoted."""
    return [r.getMessage() for r in records if any(c in r.getMessage() for c in _RAW_CONTROLS)]


def _in(secret: str, where: str, values: Mapping[str, Any]) -> list[str]:
    return [f"{where} {name}={value!r}" for name, value in values.items() if secret in str(value)]
