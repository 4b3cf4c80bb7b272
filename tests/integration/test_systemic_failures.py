"""What an operator must fix, through the real SDK and the real function: a broken setting or
key, a rejected credential, a missing role or container. The order is healthy and the system is
not, so the delivery holds its lock (retrying where a retry can help), then abandons, and is
never dead-lettered by the consumer; it is recorded as systemic, loudly. Faults come from the
fault-injecting transport below the azure-cosmos SDK (and below azure-identity)."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.identity.aio import ClientSecretCredential
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from shared.telemetry.consumer import ConsumerTelemetry
from tests.conftest import FAST_SDK_BACKOFF, manual_time
from tests.orders import message, order_body
from tests.state import documents, settlements

REPO = Path(__file__).resolve().parents[2]


def outcomes(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The outcome of each delivery, from its one outcome-carrying log record."""
    return [
        str(record.outcome)
        for record in caplog.records
        if record.name == "orders.consumer" and hasattr(record, "outcome")
    ]


def critical_settings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(record, "setting", None))
        for record in caplog.records
        if record.levelno == logging.CRITICAL
    ]


@pytest.mark.parametrize(
    "status", [401, 403, 404], ids=["401 key rejected", "403 role missing", "404 no container"]
)
async def test_a_systemic_answer_to_every_write_abandons_and_never_dead_letters(
    status: int,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rule = faulty.add(FaultRule(FaultKind.STATUS, status=status, times=None, **WRITES))
    queue.send(message(order_body()))

    for _ in range(3):
        delivery = queue.receive(1)[0]
        await host.invoke(delivery)
        # Retried while the lock lasted: a fixed role or container is picked up in-delivery.
        assert clock.now() >= delivery.locked_until - timedelta(seconds=6)
        clock.advance(delivery.locked_until - clock.now())

    assert rule.fired > 3
    assert settlements(queue) == [("abandon", True)] * 3
    assert queue.dead_letters == []
    assert outcomes(caplog) == ["systemic"] * 3
    assert await documents(container) == []


async def test_a_rejected_credential_is_systemic_and_never_dead_letters(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    app_env: dict[str, str],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No key: the client authenticates with Entra ID, and the token endpoint refuses (a
    # managed identity without a federated credential, a deleted app registration).
    token_endpoint = FaultInjectingTransport()
    refused = token_endpoint.add(FaultRule(FaultKind.STATUS, status=401, times=None))
    credential = ClientSecretCredential(
        "00000000-0000-0000-0000-000000000000",
        "11111111-1111-1111-1111-111111111111",
        "not-the-secret",
        authority="https://127.0.0.1:9",
        transport=token_endpoint,
    )
    env = {name: value for name, value in app_env.items() if name != "COSMOS_KEY"}
    options: dict[str, Any] = {"credential": credential, **FAST_SDK_BACKOFF}
    bootstrap.configure(bootstrap.Composition(env, cosmos_options=options, **manual_time(clock)))
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    assert refused.fired >= 1
    assert settlements(queue) == [("abandon", True)]
    assert queue.dead_letters == []
    assert outcomes(caplog) == ["systemic"]
    assert await documents(container) == []


async def test_an_unexpected_error_holds_the_lock_before_abandoning(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A 400 is nothing a retry or an operator is known to fix: unexpected. Abandoned at once,
    # ten deliveries would dead-letter the order within seconds.
    faulty.add(FaultRule(FaultKind.STATUS, status=400, times=None, **WRITES))
    queue.send(message(order_body()))
    delivery = queue.receive(1)[0]
    started = clock.now()

    await host.invoke(delivery)

    assert settlements(queue) == [("abandon", True)]
    assert clock.now() - started == timedelta(seconds=30)  # RetryPolicy.unexpected_hold_s
    assert outcomes(caplog) == ["unexpected"]
    assert queue.dead_letters == []


@pytest.mark.parametrize(
    ("setting", "value"),
    [("OUTBOX_ENABLED", "maybe"), ("COSMOS_KEY", "not/a+key"), ("COSMOS_ENDPOINT", "http://x")],
    ids=["invalid flag", "malformed key", "not https"],
)
async def test_invalid_configuration_holds_the_lock_then_abandons_and_names_the_setting(
    setting: str,
    value: str,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A malformed key used to surface as binascii.Error on the first request: unexpected,
    # abandoned at once, ten fast redeliveries to MaxDeliveryCountExceeded.
    monkeypatch.setenv(setting, value)
    bootstrap.configure(
        bootstrap.Composition(**manual_time(clock))
    )  # the worker's environment, the manual clock
    queue.send(message(order_body()))
    delivery = queue.receive(1)[0]

    await host.invoke(delivery)

    assert settlements(queue) == [("abandon", True)]
    assert queue.dead_letters == []
    # Held until 5 s before the lock's expiry, not abandoned at once: ten deliveries take about
    # ten lock durations, time enough to fix the setting before Service Bus dead-letters.
    assert clock.now() == delivery.locked_until - timedelta(seconds=5)
    assert critical_settings(caplog) == [setting]
    assert outcomes(caplog) == ["systemic"]
    if setting == "COSMOS_KEY":  # a key is never logged, even a broken one
        assert all(value not in record.getMessage() for record in caplog.records)


async def test_invalid_configuration_is_recorded_as_a_systemic_delivery(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    app_env: dict[str, str],
    clock: ManualClock,
) -> None:
    # The span, the orders.messages point and the error log that every systemic delivery
    # has: the alert on systemic outcomes and the runbook's queries must see this one too.
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    telemetry = ConsumerTelemetry(
        "orders", tracer_provider=tracer_provider, meter_provider=MeterProvider([metrics])
    )
    bootstrap.configure(
        bootstrap.Composition(
            {**app_env, "OUTBOX_ENABLED": "maybe"}, telemetry=telemetry, **manual_time(clock)
        )
    )
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    [span] = [s for s in spans.get_finished_spans() if s.name == "process orders"]
    attributes = dict(span.attributes or {})
    assert attributes["orders.outcome"] == "systemic"
    assert attributes["orders.settlement"] == "abandon"
    assert attributes["error.type"] == "idempotent_consumer.ConfigurationError"
    assert span.status.status_code is StatusCode.ERROR
    assert "OUTBOX_ENABLED" in (span.status.description or "")
    data = metrics.get_metrics_data()
    assert data is not None
    points = [
        dict(point.attributes or {})
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "orders.messages"
        for point in metric.data.data_points
        if isinstance(point, NumberDataPoint) and point.value == 1
    ]
    assert points == [
        {
            "orders.consumer": "orders",
            "outcome": "systemic",
            "settlement": "abandon",
            "message_type": "OrderPlaced",
        }
    ]


EXPORT_PROBE = """
import asyncio, socket
from datetime import UTC, datetime
from types import SimpleNamespace
def refuse_remote(self, address):
    if address[0] not in {"127.0.0.1", "::1"}:
        raise OSError("non-loopback connection refused by the probe")
    return connect(self, address)
connect, socket.socket.connect = socket.socket.connect, refuse_remote
from opentelemetry import trace
from shared.bootstrap import Composition, Runtime
from local.standins.doubles import ABANDON, RecordingActions
actions = RecordingActions(expected={ABANDON})
env = {
    "APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=00000000-0000-0000-0000-"
    "000000000000;IngestionEndpoint=https://127.0.0.1:9/;LiveEndpoint=https://127.0.0.1:9/",
    "ORDERS_QUEUE_NAME": "orders",
    "COSMOS_ENDPOINT": "https://127.0.0.1:9/",
    "OUTBOX_ENABLED": "maybe",
}
received = SimpleNamespace(message_id="ord-1", body=b"{}", correlation_id=None,
    delivery_count=1, application_properties={}, locked_until_utc=datetime.now(UTC), subject=None)
decision = asyncio.run(Runtime(Composition(env)).handle(received, actions))
assert decision.outcome == "systemic", decision
assert actions.operations == ["abandon"]
print(type(trace.get_tracer_provider()).__module__, flush=True)
import os; os._exit(0)
"""


def test_exporters_are_configured_even_when_a_setting_is_invalid(tmp_path: Path) -> None:
    # Validating first left the app invisible: no exporter, so neither the critical log nor
    # the systemic alert ever saw the broken setting. A fresh interpreter: global providers
    # are set once per process.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", EXPORT_PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "opentelemetry.sdk.trace"  # the distro's, not the no-op


class RecordingCredential(ClientSecretCredential):
    """A real azure-identity credential that counts its closes."""

    closes = 0

    async def close(self) -> None:
        type(self).closes += 1
        await super().close()


async def test_a_replaced_or_closed_runtime_closes_its_client_and_credential(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    app_env: dict[str, str],
    clock: ManualClock,
) -> None:
    first, second = (FaultInjectingTransport(connection_verify=False) for _ in range(2))
    bootstrap.configure(
        bootstrap.Composition(app_env, cosmos_options={"transport": first}, **manual_time(clock))
    )
    queue.send(message(order_body()))
    await host.run_until_idle()
    assert first.session is not None  # the first client's connection pool is open

    bootstrap.configure(
        bootstrap.Composition(app_env, cosmos_options={"transport": second}, **manual_time(clock))
    )
    queue.send(message(order_body("ord-1002"), message_id="ord-1002"))
    await host.run_until_idle()

    assert first.session is None  # closed when its runtime was replaced
    assert second.session is not None
    assert settlements(queue) == [("complete", True)] * 2

    # CosmosClient.close() leaves its credential open: the runtime closes it too.
    credential = RecordingCredential("tenant", "client", "secret", authority="https://127.0.0.1:9")
    keyless = {name: value for name, value in app_env.items() if name != "COSMOS_KEY"}
    bootstrap.configure(bootstrap.Composition(keyless, cosmos_options={"credential": credential}))
    await bootstrap.current().consumer()
    await bootstrap.close()

    assert second.session is None
    assert RecordingCredential.closes == 1
