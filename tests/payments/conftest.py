"""Payment capture fixtures: the local world with the test's own payments (``/orderId``) and
inventory (``/sku``) containers, created by the world (``local.assembly.world``) and deleted after
the test; the world's payment provider stand-in, its ledger the referee; telemetry on in-memory
SDK providers; and order events as the relay publishes them, sent to the payments subscription.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from idempotent_consumer.cosmos import CosmosDocumentStore
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.cosmos_server import ensure_container
from local.standins.faults import FaultInjectingTransport
from local.standins.payment_provider import PaymentProviderStandIn
from shared.adapters.cosmos_orders import create_client
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.config import (
    PAYMENT_PROVIDER_API_KEY_SETTING,
    PAYMENT_PROVIDER_BASE_URL_SETTING,
    Settings,
)
from shared.telemetry.consumer import ConsumerTelemetry
from tests.payments.events import payment_event

# The provider client's timeout, and so the kit's call deadline: short, the faults hold longer.
PROVIDER_TIMEOUT_S = 0.5
# The provider client's timeout of ``cosmos_payments`` (the kit's call deadline there).
COSMOS_PAYMENTS_TIMEOUT_S = 0.3


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with payments and inventory containers of the test's own and a short
    provider timeout (exported: the uncomposed app reads them from the environment)."""
    own = {
        "PAYMENTS_CONTAINER": f"payments-{uuid.uuid4().hex[:10]}",
        "INVENTORY_CONTAINER": f"inventory-{uuid.uuid4().hex[:10]}",
        "PAYMENT_PROVIDER_TIMEOUT_SECONDS": str(PROVIDER_TIMEOUT_S),
    }
    for name, value in own.items():
        monkeypatch.setenv(name, value)
    return {**app_env, **own}


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[World]:
    """The stand-in around the app, on the test's containers and manual clock, with the payment
    provider stand-in the world starts (its URL and key exported too)."""
    own = ("PAYMENTS_CONTAINER", "INVENTORY_CONTAINER", "PAYMENT_PROVIDER_TIMEOUT_SECONDS")
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={name: app_env[name] for name in own},
    ) as started:
        for name in (PAYMENT_PROVIDER_BASE_URL_SETTING, PAYMENT_PROVIDER_API_KEY_SETTING):
            monkeypatch.setenv(name, started.env[name])
        yield started
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        for name in ("PAYMENTS_CONTAINER", "INVENTORY_CONTAINER"):
            await database.delete_container(app_env[name])
    # A failed invocation settles nothing and would hide a bug: the functions never raise.
    assert started.host.stats.errors == [], "consume_order raised"
    assert started.payment_host.stats.errors == [], "capture_payment raised"
    assert started.stock_host.stats.errors == [], "reserve_stock raised"


def payment_message(
    order_id: str,
    version: int,
    total_minor: int | None,
    *,
    customer_id: str = "customer-1",
    message_id: str | None = None,
) -> OutgoingMessage:
    """Version ``version`` of ``order_id`` (``None``: its cancellation) as the relay sends it:
    MessageId the eventId, Subject and ``eventType`` the event's type."""
    event = payment_event(order_id, version, total_minor, customer_id=customer_id)
    assert event.subject is not None
    return OutgoingMessage(
        message_id or event.message_id,
        event.body,
        subject=event.subject,
        application_properties={"eventType": event.subject},
    )


@dataclass
class Exported:
    """What one consumer's telemetry exported, in memory."""

    telemetry: ConsumerTelemetry
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def span_attributes(self) -> list[dict[str, object]]:
        finished: tuple[ReadableSpan, ...] = self.spans.get_finished_spans()
        return [
            dict(span.attributes or {})
            for span in finished
            if span.name == self.telemetry.span_name
        ]

    def counter(self, name: str) -> dict[str, float]:
        """A counter's total per ``orders.consumer``."""
        totals: dict[str, float] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)
                        consumer = str((point.attributes or {}).get("orders.consumer"))
                        totals[consumer] = totals.get(consumer, 0) + point.value
        return totals


def exported(topic: str, subscription: str, consumer: str) -> Exported:
    """A consumer's telemetry as the composition root names it, on in-memory SDK providers."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    telemetry = ConsumerTelemetry(
        topic,
        tracer_provider,
        MeterProvider(metric_readers=[metrics]),
        subscription=subscription,
        consumer=consumer,
    )
    return Exported(telemetry, spans, metrics)


@dataclass
class CosmosPayments:
    """A payments container of the test's own, reached by the app's Cosmos client through the
    fault transport, and the provider stand-in reached by the app's adapter."""

    store: CosmosDocumentStore
    transport: FaultInjectingTransport
    provider: PaymentProviderStandIn
    client: HttpPaymentProvider
    container: ContainerProxy  # the same container through a client of the test's own

    async def read_state(self, order_id: str) -> dict[str, Any]:
        item: dict[str, Any] = await self.container.read_item("payment", partition_key=order_id)
        return item


@pytest.fixture
async def cosmos_payments(
    app_env: dict[str, str], provider: PaymentProviderStandIn
) -> AsyncIterator[CosmosPayments]:
    """``CosmosPayments`` on the module's ``provider`` fixture (its key mode)."""
    name = f"payments-{uuid.uuid4().hex[:10]}"
    settings = Settings.from_env(app_env)
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as admin:
        container = await ensure_container(admin, settings.cosmos_database, name, "/orderId")
        transport = FaultInjectingTransport()
        client = create_client(settings, transport=transport)
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(name)

        try:
            async with HttpPaymentProvider(
                provider.url,
                provider.api_key,
                honours_idempotency_keys=provider.honour_keys,
                timeout_s=COSMOS_PAYMENTS_TIMEOUT_S,
            ) as http:
                yield CosmosPayments(
                    CosmosDocumentStore(proxy), transport, provider, http, container
                )
        finally:
            await client.close()
            await admin.get_database_client(settings.cosmos_database).delete_container(name)
