"""Shared fixtures: the real azure-cosmos aio client against a local Cosmos DB API server, the
peek-lock queue model, the gRPC settlement server, and the local Functions host that indexes
``function_app.app`` and calls it as the worker does.

Set ``COSMOS_EMULATOR_ENDPOINT`` (and ``COSMOS_EMULATOR_KEY`` if not the well-known one) to run
everything against the real Cosmos DB emulator or an account instead of cosmosdb-server; tests
marked ``emulator`` run only then.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient

import function_app
from local.broker import ManualClock, PeekLockQueue, QueueSettings
from local.cosmos_server import EMULATOR_KEY, LocalCosmosServer, ensure_container
from local.faults import FaultInjectingTransport
from local.host import LocalFunctionsHost
from local.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from shared import runtime

REAL_COSMOS = os.environ.get("COSMOS_EMULATOR_ENDPOINT", "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REAL_COSMOS:
        return
    skip = pytest.mark.skip(reason="needs the real Cosmos DB emulator (COSMOS_EMULATOR_ENDPOINT)")
    for item in items:
        if "emulator" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cosmos_account() -> Iterator[tuple[str, str]]:
    if REAL_COSMOS:
        yield REAL_COSMOS, os.environ.get("COSMOS_EMULATOR_KEY", EMULATOR_KEY)
        return
    with LocalCosmosServer() as server:
        yield server.endpoint, EMULATOR_KEY


@pytest.fixture
def app_env(cosmos_account: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """App settings of a fresh, isolated container, exported as the worker would see them."""
    endpoint, key = cosmos_account
    env = {
        "ORDERS_QUEUE_NAME": "orders",
        "COSMOS_ENDPOINT": endpoint,
        "COSMOS_KEY": key,
        "COSMOS_DATABASE": "orders",
        "COSMOS_CONTAINER": f"test-{uuid.uuid4().hex[:12]}",
        "COSMOS_VERIFY_TLS": "false",
        "OUTBOX_ENABLED": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("APPLICATIONINSIGHTS_CONNECTION_STRING", raising=False)
    return env


@pytest.fixture
async def container(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """The test's container, read through a separate client (the app has its own)."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        proxy = await ensure_container(
            client, app_env["COSMOS_DATABASE"], app_env["COSMOS_CONTAINER"]
        )
        yield proxy
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        await database.delete_container(app_env["COSMOS_CONTAINER"])


@pytest.fixture
async def fresh_runtime() -> AsyncIterator[None]:
    """Each test gets the app's lazily-built client anew, as a fresh worker would."""
    await runtime.close()
    yield
    await runtime.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
def queue(clock: ManualClock) -> PeekLockQueue:
    return PeekLockQueue(QueueSettings.from_messaging_file(), clock=clock)


@pytest.fixture
def settlement_server(queue: PeekLockQueue) -> Iterator[SettlementServer]:
    with worker_arguments_restored(), SettlementServer(queue) as server:
        bind_message_actions(server.port)
        yield server


# The SDK's own retries (503, connection errors) back off in real time, a second apiece; the
# consumer's policy under test runs on the manual clock. Shorten only the SDK's real-time wait.
FAST_SDK_BACKOFF: dict[str, Any] = {"retry_backoff_factor": 0.01}


def manual_time(clock: ManualClock) -> dict[str, Any]:
    """Runtime options that make in-delivery retries wait on the queue's manual clock:
    no sleeping, and lock expiry and backoff measured on one time line."""

    return {"clock": clock, "jitter": lambda: 1.0}


InstallFaulty = Callable[..., FaultInjectingTransport]


@pytest.fixture
async def install_faulty(
    app_env: dict[str, str], clock: ManualClock, host: LocalFunctionsHost
) -> InstallFaulty:
    """Install, for this event loop, the app's Cosmos client with a fault-injecting transport,
    on the manual clock; ``client_options`` go to the Cosmos client (over ``FAST_SDK_BACKOFF``)."""
    loop = asyncio.get_running_loop()

    def install(**client_options: Any) -> FaultInjectingTransport:
        assert asyncio.get_running_loop() is loop
        transport = FaultInjectingTransport(connection_verify=False)
        options = {"transport": transport, **FAST_SDK_BACKOFF, **client_options}
        runtime.configure(app_env, cosmos_options=options, **manual_time(clock))
        return transport

    return install


@pytest.fixture
async def faulty(install_faulty: InstallFaulty) -> FaultInjectingTransport:
    """The app's Cosmos client with a fault-injecting transport, on the manual clock."""
    return install_faulty()


@pytest.fixture
def host(
    queue: PeekLockQueue,
    settlement_server: SettlementServer,
    app_env: dict[str, str],
    container: ContainerProxy,
    fresh_runtime: None,
) -> Iterator[LocalFunctionsHost]:
    host = LocalFunctionsHost(queue, function_app.app, app_settings=app_env)
    yield host
    # The host treats an exception escaping the function as the real host does (the lock just
    # expires), which would hide a bug: the function must never raise.
    assert host.stats.errors == [], "the function raised"
