"""Telemetry fixtures: SDK providers with in-memory exporters, injected into a consumer that the
local Functions host reaches through the real function (``function_app`` ->
``bootstrap.handle_order_message`` -> ``Runtime.consumer``).

The consumer's own providers are injected (the global ones can be set only once per process).
The Cosmos DB SDK's spans, though, always go to the *global* tracer provider: ``cosmos_spans``
installs one SDK provider for the whole session, once, as the distro does in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.core.settings import settings as azure_settings
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.faults import FaultInjectingTransport
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from shared.config import Settings
from shared.telemetry.consumer import ConsumerTelemetry
from tests.conftest import FAST_SDK_BACKOFF, manual_time
from tests.orders import message, order_body


@dataclass
class Captured:
    """What one test's consumer emitted."""

    telemetry: ConsumerTelemetry
    span_exporter: InMemorySpanExporter
    metric_reader: InMemoryMetricReader

    def consumer_spans(self) -> list[ReadableSpan]:
        return [
            span
            for span in self.span_exporter.get_finished_spans()
            if span.name == self.telemetry.span_name
        ]

    def points(self, name: str) -> list[NumberDataPoint | HistogramDataPoint]:
        """The data points of one metric (cumulative: one per attribute set)."""
        found: list[NumberDataPoint | HistogramDataPoint] = []
        for metric in self.metrics():
            if metric.name == name:
                found.extend(
                    point
                    for point in metric.data.data_points
                    if isinstance(point, NumberDataPoint | HistogramDataPoint)
                )
        return found

    def metrics(self) -> Iterator[Any]:
        data = self.metric_reader.get_metrics_data()
        if data is None:
            return
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                yield from scope_metrics.metrics


InstallConsumer = Callable[..., bootstrap.Runtime]


QUEUE_NAME = "orders"  # app_env's ORDERS_QUEUE_NAME


def make_captured(queue_name: str = QUEUE_NAME, sampler: Sampler | None = None) -> Captured:
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    metric_reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metric_reader])
    telemetry = ConsumerTelemetry(
        queue_name, tracer_provider=tracer_provider, meter_provider=meter_provider
    )
    return Captured(telemetry, span_exporter, metric_reader)


@pytest.fixture
def captured() -> Captured:
    return make_captured()


@pytest.fixture
async def install_consumer(
    app_env: dict[str, str], captured: Captured, clock: ManualClock, fresh_runtime: None
) -> InstallConsumer:
    """Install, for this event loop, a consumer built as ``bootstrap.build_consumer`` builds it
    but with the test's telemetry; ``client_options`` go to the Cosmos client (a transport)."""
    loop = asyncio.get_running_loop()

    def install(
        telemetry: ConsumerTelemetry | None = None, **client_options: Any
    ) -> bootstrap.Runtime:
        assert asyncio.get_running_loop() is loop
        settings = Settings.from_env(app_env)
        telemetry = telemetry or captured.telemetry
        assert telemetry.destination == settings.queue_name
        return bootstrap.configure(
            bootstrap.Composition(
                app_env, cosmos_options=client_options, telemetry=telemetry, **manual_time(clock)
            )
        )

    return install


@pytest.fixture
async def faulty(install_consumer: InstallConsumer) -> FaultInjectingTransport:
    """The test's telemetry consumer on a fault-injecting transport (overrides the root
    ``faulty``, which installs the consumer without the test's telemetry)."""
    transport = FaultInjectingTransport(connection_verify=False)
    install_consumer(transport=transport, **FAST_SDK_BACKOFF)
    return transport


async def deliver_twice(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    first: OutgoingMessage | None = None,
    second: OutgoingMessage | None = None,
) -> None:
    """Send and deliver ``first``, then ``second`` once the broker's duplicate detection window
    has passed, so that it reaches the consumer (both default to the sample order)."""
    queue.send(message(order_body()) if first is None else first)
    await host.run_until_idle()
    clock.advance(queue.settings.duplicate_detection_window)
    queue.send(message(order_body()) if second is None else second)
    await host.run_until_idle()


@pytest.fixture(scope="session")
def global_span_exporter() -> InMemorySpanExporter:
    """An SDK tracer provider as the process's global one, set once for the session (as
    ``configure_azure_monitor`` does in production), exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another global tracer provider is set"
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def cosmos_spans(global_span_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """Azure SDK tracing through the azure-core OpenTelemetry plugin, which the distro turns on
    (``settings.tracing_implementation``), for this test only."""
    global_span_exporter.clear()
    azure_settings.tracing_implementation.set_value("opentelemetry")
    try:
        yield global_span_exporter
    finally:
        azure_settings.tracing_implementation.unset_value()
        global_span_exporter.clear()


@pytest.fixture
async def telemetry_host(
    host: LocalFunctionsHost, install_consumer: InstallConsumer
) -> LocalFunctionsHost:
    """The local Functions host, its consumer using the test's telemetry."""
    install_consumer()
    return host
