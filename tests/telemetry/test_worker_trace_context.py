"""Telemetry under Microsoft's worker: with ``PYTHON_ENABLE_OPENTELEMETRY=true`` (what the Bicep
sets) the runtime makes the host's invocation context current before it calls the function, so
the consumer span is a child of the invocation's trace (one ``operation_Id`` in Application
Insights with the host's own telemetry), still links the producer, and the structured log
records carry that trace id. Without the setting the consumer span starts a trace of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

from local.standins.broker import PeekLockQueue
from local.standins.host import LocalFunctionsHost
from tests.orders import message, order_body
from tests.telemetry import kept_out
from tests.telemetry.conftest import Captured

PRODUCER_TRACE_ID = "1" * 32
PRODUCER_TRACEPARENT = f"00-{PRODUCER_TRACE_ID}-{'2' * 16}-01"


@pytest.fixture
def worker_opentelemetry(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The worker's app setting, exported before the worker starts (it reads it at init)."""
    enabled: bool = request.param
    if enabled:
        monkeypatch.setenv("PYTHON_ENABLE_OPENTELEMETRY", "true")
    else:
        monkeypatch.delenv("PYTHON_ENABLE_OPENTELEMETRY", raising=False)
    return enabled


@pytest.fixture
def app_env(app_env: dict[str, str], worker_opentelemetry: bool) -> dict[str, str]:
    return app_env  # the worker starts after the setting is exported


@pytest.fixture
def exported_logs() -> Iterator[InMemoryLogRecordExporter]:
    """What ``configure_exporters`` wires: an OpenTelemetry handler on the ``orders`` logger."""
    with kept_out.exported_logs() as exporter:
        yield exporter


def ids(trace_parent: str) -> tuple[int, int]:
    _, trace_id, span_id, _ = trace_parent.split("-")
    return int(trace_id, 16), int(span_id, 16)


@pytest.mark.parametrize("worker_opentelemetry", [True], indirect=True)
async def test_consumer_span_and_logs_join_the_invocations_trace_and_link_the_producer(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    exported_logs: InMemoryLogRecordExporter,
) -> None:
    queue.send(message(order_body(), traceparent=PRODUCER_TRACEPARENT))

    await telemetry_host.run_until_idle()

    assert telemetry_host.stats.last is not None
    invocation_trace_id, invocation_span_id = ids(telemetry_host.stats.last.trace_parent)
    [span] = captured.consumer_spans()
    assert span.context.trace_id == invocation_trace_id  # operation_Id of the host's request
    assert span.parent is not None
    assert span.parent.span_id == invocation_span_id
    assert span.parent.is_remote
    [link] = span.links
    assert f"{link.context.trace_id:032x}" == PRODUCER_TRACE_ID  # the producer, linked
    [log] = [
        data.log_record
        for data in exported_logs.get_finished_logs()
        if (data.log_record.attributes or {}).get("outcome") == "processed"
    ]
    assert log.trace_id == invocation_trace_id
    assert log.span_id == span.context.span_id


@pytest.mark.parametrize("worker_opentelemetry", [False], indirect=True)
async def test_without_the_setting_the_consumer_span_starts_a_trace_of_its_own(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured
) -> None:
    queue.send(message(order_body(), traceparent=PRODUCER_TRACEPARENT))

    await telemetry_host.run_until_idle()

    assert telemetry_host.stats.last is not None
    invocation_trace_id, _ = ids(telemetry_host.stats.last.trace_parent)
    [span] = captured.consumer_spans()
    assert span.parent is None
    assert span.context.trace_id != invocation_trace_id
