"""Relay fixtures: the world's order-events topic model, the app composed by ``World.compose``
(the stand-in's one call of the composition root) with the test's clock, relay telemetry
(in-memory OpenTelemetry SDK readers) and the topic as the relay's sender, and the world's
change-feed emulation delivering the test container's changes to ``relay_outbox`` through
Microsoft's worker."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import IncomingMessage
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from local.assembly.world import World
from local.standins.change_feed import ChangeFeedEmulator, Lease
from local.standins.topic import OrderEventsTopic
from shared import bootstrap
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.telemetry.relay import RelayTelemetry
from tests.conftest import FAST_SDK_BACKOFF
from tests.orders import order_body
from tests.state import documents

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
def relay_env(app_env: dict[str, str]) -> dict[str, str]:
    """The app settings, the relay's included (``local.assembly.world.app_settings``), exported."""
    assert app_env["ORDER_EVENTS_TOPIC_NAME"] == TOPIC
    return app_env


@pytest.fixture
def topic(world: World) -> OrderEventsTopic:
    return world.topic


@pytest.fixture
def relay_cosmos_options() -> dict[str, Any]:
    """Extra options of the app's Cosmos client; a test module overrides this fixture to
    inject a fault-injecting transport."""
    return {}


@pytest.fixture
async def relay(
    world: World, captured_relay: RelayCaptured, relay_cosmos_options: dict[str, Any]
) -> bootstrap.Runtime:
    """The app as the stand-in composes it: the world's clock and topic, the test's telemetry."""
    return world.compose(
        relay_telemetry=captured_relay.telemetry,
        jitter=lambda: 1.0,
        **{**FAST_SDK_BACKOFF, **relay_cosmos_options},
    )


@pytest.fixture
def lease(world: World) -> Lease:
    return world.change_feed.lease


@pytest.fixture
def change_feed(world: World, relay: bootstrap.Runtime) -> ChangeFeedEmulator:
    """The world's Cosmos DB trigger on the test's container, the app composed."""
    return world.change_feed


async def accept_order(
    container: ContainerProxy,
    order_id: str,
    *,
    accepted_at: datetime,
    traceparent: str | None = None,
    **overrides: Any,
) -> list[dict[str, Any]]:
    """Write an order and its outbox document as the consumer does (one batch)."""
    body = order_body(order_id, **overrides)
    raw = json.dumps(body).encode()
    valid = parse_order(raw, order_id)
    incoming = IncomingMessage(order_id, raw, correlation_id=f"corr-{order_id}")
    documents = build_documents(
        valid, incoming, outbox_enabled=True, accepted_at=accepted_at, traceparent=traceparent
    )
    await container.execute_item_batch(
        [("create", (document,)) for document in documents], partition_key=order_id
    )
    return documents


def new_order_ids(count: int) -> list[str]:
    prefix = uuid.uuid4().hex[:6]
    return [f"ord-{prefix}-{index}" for index in range(count)]


async def outbox_by_order(container: ContainerProxy) -> dict[str, dict[str, Any]]:
    """The container's outbox documents, by ``orderId``."""
    return {d["orderId"]: d for d in await documents(container) if d["type"] == "outbox"}
