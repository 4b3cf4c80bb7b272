"""The structured log line of each delivery (logger ``orders.consumer``): its level by outcome,
its fields (``customDimensions`` in App Insights, which the alert rules query), and its trace
context once it reaches OpenTelemetry."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared.telemetry import names as telemetry
from shared.telemetry.exporters import ExportedLogRecords
from tests.orders import message, order_body
from tests.telemetry.conftest import Captured, InstallConsumer, deliver_twice, make_captured

FIELDS = (
    "outcome",
    "settlement",
    "deadletter_reason",
    "message_id",
    "correlation_id",
    "delivery_count",
    "order_id",
)


def outcome_records(caplog: pytest.LogCaptureFixture) -> dict[str, logging.LogRecord]:
    """The one record per delivery that carries its outcome (retries carry attempt_outcome)."""
    records = [
        r for r in caplog.records if r.name == telemetry.LOGGER_NAME and hasattr(r, "outcome")
    ]
    by_outcome = {getattr(record, "outcome", None): record for record in records}
    assert len(by_outcome) == len(records), [r.getMessage() for r in records]
    return {str(key): value for key, value in by_outcome.items()}


def fields(record: logging.LogRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in FIELDS}


async def test_duplicate_is_info_and_mismatch_is_a_warning_with_its_reason(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=telemetry.LOGGER_NAME)
    await deliver_twice(telemetry_host, queue, clock)
    clock.advance(queue.settings.duplicate_detection_window)
    changed = order_body()
    changed["lines"][0]["quantity"] = 3
    queue.send(message(changed, correlation_id="corr-3"))
    await telemetry_host.run_until_idle()

    records = outcome_records(caplog)
    assert set(records) == {"processed", "duplicate", "mismatch"}
    assert records["processed"].levelno == logging.INFO
    assert records["duplicate"].levelno == logging.INFO
    assert records["mismatch"].levelno == logging.WARNING
    assert fields(records["duplicate"]) == {
        "outcome": "duplicate",
        "settlement": "complete",
        "deadletter_reason": None,
        "message_id": "ord-1001",
        "correlation_id": "corr-1",
        "delivery_count": 1,
        "order_id": "ord-1001",
    }
    assert fields(records["mismatch"]) == {
        "outcome": "mismatch",
        "settlement": "deadletter",
        "deadletter_reason": "HashMismatch",
        "message_id": "ord-1001",
        "correlation_id": "corr-3",
        "delivery_count": 1,
        "order_id": "ord-1001",
    }
    assert "HashMismatch" not in records["mismatch"].getMessage()  # the reason is a field
    assert records["mismatch"].exc_info is None


async def test_a_systemic_error_is_logged_at_error_level(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    faulty: FaultInjectingTransport,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A missing RBAC role: every write answers 403.
    faulty.add(FaultRule(FaultKind.STATUS, status=403, times=None, **WRITES))
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    [record] = outcome_records(caplog).values()
    assert record.levelno == logging.ERROR
    assert fields(record) == {
        "outcome": "systemic",
        "settlement": "abandon",
        "deadletter_reason": None,
        "message_id": "ord-1001",
        "correlation_id": "corr-1",
        "delivery_count": 1,
        "order_id": "ord-1001",
    }
    description = getattr(record, "description", "")
    assert isinstance(description, str)
    assert "403" in description
    # Before giving up, the delivery retried while holding its lock: one warning per retry.
    retries = [r for r in caplog.records if hasattr(r, "attempt_outcome")]
    assert len(retries) >= 5
    assert {(r.levelno, getattr(r, "attempt_outcome")) for r in retries} == {  # noqa: B009
        (logging.WARNING, "systemic")
    }
    assert [r.attempt for r in retries] == list(range(1, len(retries) + 1))  # type: ignore[attr-defined]


async def test_an_invalid_message_is_a_warning_naming_its_reason(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, caplog: pytest.LogCaptureFixture
) -> None:
    queue.send(message(order_body(), message_id=None))

    await telemetry_host.run_until_idle()

    [record] = outcome_records(caplog).values()
    assert record.levelno == logging.WARNING
    assert fields(record)["deadletter_reason"] == "MissingMessageId"
    assert fields(record)["message_id"] is None


async def test_logs_reach_opentelemetry_with_their_fields_and_the_span_context(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What configure_exporters() wires: the distro's handler on the "orders" logger.
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    handler = LoggingHandler(level=logging.INFO, logger_provider=provider)
    exported = logging.getLogger(telemetry.EXPORTED_LOGGER_NAME)
    exported.addHandler(handler)
    level = logging.getLogger(telemetry.LOGGER_NAME).level
    logging.getLogger(telemetry.LOGGER_NAME).setLevel(logging.INFO)
    try:
        queue.send(message(order_body()))
        await telemetry_host.run_until_idle()
    finally:
        exported.removeHandler(handler)
        logging.getLogger(telemetry.LOGGER_NAME).setLevel(level)

    outcome_logs = [
        data.log_record
        for data in exporter.get_finished_logs()
        if (data.log_record.attributes or {}).get("outcome") is not None
    ]
    [log] = outcome_logs
    span = captured.consumer_spans()[0]
    assert log.trace_id == span.context.trace_id  # operation_Id in App Insights
    assert log.span_id == span.context.span_id
    assert log.severity_text == "INFO"
    attributes = dict(log.attributes or {})
    assert "deadletter_reason" in attributes  # kept as a null value, not dropped
    # ... and without the SDK complaining about it (a warning per message would be noise).
    assert [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")] == []
    assert {name: attributes[name] for name in FIELDS} == {
        "outcome": "processed",
        "settlement": "complete",
        "deadletter_reason": None,
        "message_id": "ord-1001",
        "correlation_id": "corr-1",
        "delivery_count": 1,
        "order_id": "ord-1001",
    }


@pytest.mark.parametrize("sampled", [True, False], ids=["sampled", "not-sampled"])
async def test_only_a_sampled_delivery_s_healthy_outcome_is_exported_and_every_warning_is(
    sampled: bool,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    install_consumer: InstallConsumer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The exporter's handler as ``configure_exporters`` wires it (``ExportedLogRecords``), with
    a sampler that keeps every trace or none: a processed and a duplicate delivery are exported
    only when sampled, a mismatch always; locally (caplog) all three are INFO/WARNING records.
    Fails without the filter (the healthy records are exported unsampled)."""
    captured = make_captured(sampler=ALWAYS_ON if sampled else ALWAYS_OFF)
    install_consumer(captured.telemetry)
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    handler = LoggingHandler(level=logging.NOTSET, logger_provider=provider)
    handler.addFilter(ExportedLogRecords())
    exported = logging.getLogger(telemetry.EXPORTED_LOGGER_NAME)
    exported.addHandler(handler)
    caplog.set_level(logging.INFO, logger=telemetry.LOGGER_NAME)
    try:
        await deliver_twice(host, queue, clock)
        clock.advance(queue.settings.duplicate_detection_window)
        changed = order_body()
        changed["lines"][0]["quantity"] = 3
        queue.send(message(changed, correlation_id="corr-3"))
        await host.run_until_idle()
    finally:
        exported.removeHandler(handler)

    assert set(outcome_records(caplog)) == {"processed", "duplicate", "mismatch"}  # local logs
    outcomes = sorted(
        str((data.log_record.attributes or {}).get("outcome"))
        for data in exporter.get_finished_logs()
        if (data.log_record.attributes or {}).get("outcome") is not None
    )
    assert outcomes == (["duplicate", "mismatch", "processed"] if sampled else ["mismatch"])
    counted = [getattr(p, "value", 0) for p in captured.points("orders.messages")]
    assert sum(counted) == 3  # the metric counts every delivery
