"""Relay fixtures: the order-events topic model, the relay built by the composition root
(``runtime.start_relay``, called from exactly this place) with the test's clock, telemetry
(in-memory OpenTelemetry SDK readers) and the topic as its sender, and the change-feed emulation
delivering the test container's changes to ``function_app.relay_outbox``."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import function_app
from local.broker import ManualClock
from local.change_feed import BatchInvoker, ChangeFeedEmulator, Lease, function_invoker
from local.topic import OrderEventsTopic
from shared import runtime
from shared.contract import parse_order
from shared.core import IncomingMessage, build_documents
from shared.relay import OutboxRelay
from shared.telemetry import RelayTelemetry
from tests.conftest import FAST_SDK_BACKOFF
from tests.orders import order_body

TOPIC = "order-events"  # infra/messaging.json topicName


@dataclass
class RelayCaptured:
    telemetry: RelayTelemetry
    spans: InMemorySpanExporter
    metric_reader: InMemoryMetricReader

    def send_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == self.telemetry.span_name]

    def points(self, name: str) -> list[NumberDataPoint | HistogramDataPoint]:
        data = self.metric_reader.get_metrics_data()
        found: list[NumberDataPoint | HistogramDataPoint] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "orders.relay"
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(
                            p
                            for p in metric.data.data_points
                            if isinstance(p, NumberDataPoint | HistogramDataPoint)
                        )
        return found

    def total(self, name: str) -> float:
        return sum(getattr(p, "value", 0) for p in self.points(name))


@pytest.fixture
def captured_relay() -> RelayCaptured:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry = RelayTelemetry(
        TOPIC, tracer_provider=tracer_provider, meter_provider=MeterProvider([reader])
    )
    return RelayCaptured(telemetry, spans, reader)


@pytest.fixture
def relay_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        **app_env,
        "ORDER_EVENTS_TOPIC_NAME": TOPIC,
        "ServiceBusConnection__fullyQualifiedNamespace": "local.servicebus.windows.net",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def topic(clock: ManualClock) -> OrderEventsTopic:
    return OrderEventsTopic.from_messaging_file(clock)


@pytest.fixture
async def relay(
    relay_env: dict[str, str],
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    relay_cosmos_options: dict[str, Any],
) -> AsyncIterator[OutboxRelay]:
    """The relay the function uses in this event loop, as the stand-in composes it."""
    relay = await runtime.start_relay(
        relay_env,
        clock=clock,
        sender=topic,
        telemetry=captured_relay.telemetry,
        cosmos_options={**FAST_SDK_BACKOFF, **relay_cosmos_options},
    )
    yield relay
    await runtime.close_relay()


@pytest.fixture
def relay_cosmos_options() -> dict[str, Any]:
    """Extra options of the relay's Cosmos client; a test module overrides this fixture to
    inject a fault-injecting transport."""
    return {}


@pytest.fixture
def invoke() -> BatchInvoker:
    return function_invoker(function_app.app)


@pytest.fixture
def lease() -> Lease:
    return Lease()


@pytest.fixture
def change_feed(
    container: ContainerProxy,
    relay: OutboxRelay,
    invoke: BatchInvoker,
    lease: Lease,
    clock: ManualClock,
) -> ChangeFeedEmulator:
    return ChangeFeedEmulator(container, invoke, lease=lease, clock=clock)


async def accept_order(
    container: ContainerProxy, order_id: str, *, accepted_at: datetime, **overrides: Any
) -> list[dict[str, Any]]:
    """Write an order and its outbox document as the consumer does (one batch)."""
    body = order_body(order_id, **overrides)
    raw = json.dumps(body).encode()
    valid = parse_order(raw, order_id)
    incoming = IncomingMessage(order_id, raw, correlation_id=f"corr-{order_id}")
    documents = build_documents(valid, incoming, outbox_enabled=True, accepted_at=accepted_at)
    await container.execute_item_batch(
        [("create", (document,)) for document in documents], partition_key=order_id
    )
    return documents


def new_order_ids(count: int) -> list[str]:
    prefix = uuid.uuid4().hex[:6]
    return [f"ord-{prefix}-{index}" for index in range(count)]
