"""Shared fixtures: the local stand-in built by ``local.assembly.world`` (the one entry point the
demo, chaos and bench use too) around the real app: the real azure-cosmos aio client against a local
Cosmos DB API server, the peek-lock queue model, the gRPC settlement server, and the host's Service
Bus trigger invoking the function through Microsoft's worker (``azure_functions_runtime``).

The app composes itself from the exported app settings on its first message, as in Azure;
``compose_app`` is the one fixture that composes it instead (fault transport, telemetry, the
manual clock), through ``World.compose``.

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

from local.assembly import world as stand_in
from local.assembly.world import CosmosAccount, World, app_settings, local_world
from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.cosmos_server import EMULATOR_KEY, ensure_container
from local.standins.faults import FaultInjectingTransport
from local.standins.host import LocalFunctionsHost
from local.standins.settlement_server import SettlementServer
from shared import bootstrap

REAL_COSMOS = os.environ.get("COSMOS_EMULATOR_ENDPOINT", "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REAL_COSMOS:
        return
    skip = pytest.mark.skip(reason="needs the real Cosmos DB emulator (COSMOS_EMULATOR_ENDPOINT)")
    for item in items:
        if "emulator" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cosmos_account() -> Iterator[CosmosAccount]:
    """The real emulator or account if ``COSMOS_EMULATOR_ENDPOINT`` is set, else one local
    cosmosdb-server for the session."""
    key = os.environ.get("COSMOS_EMULATOR_KEY", EMULATOR_KEY)
    with stand_in.cosmos_account(REAL_COSMOS or None, key) as account:
        yield account


@pytest.fixture
def app_env(cosmos_account: CosmosAccount, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """App settings of a fresh, isolated container, exported as the worker would see them."""
    env = app_settings(cosmos_account, container=f"test-{uuid.uuid4().hex[:12]}")
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
    await bootstrap.close()
    yield
    await bootstrap.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
) -> AsyncIterator[World]:
    """The stand-in around the app, on the test's container and manual clock."""
    async with local_world(
        account=cosmos_account, container=app_env["COSMOS_CONTAINER"], clock=clock
    ) as started:
        yield started
    # The host logs an invocation the worker reports as failed, as the real host does (the
    # lock just expires), which would hide a bug: the function must never raise.
    assert started.host.stats.errors == [], "the function raised"


@pytest.fixture
def queue(world: World) -> PeekLockQueue:
    return world.queue


@pytest.fixture
def settlement_server(world: World) -> SettlementServer:
    return world.settlement


@pytest.fixture
def host(world: World) -> LocalFunctionsHost:
    return world.host


# The SDK's own retries (503, connection errors) back off in real time, a second apiece; the
# consumer's policy under test runs on the manual clock. Shorten only the SDK's real-time wait.
FAST_SDK_BACKOFF: dict[str, Any] = {"retry_backoff_factor": 0.01}


def manual_time(clock: ManualClock) -> dict[str, Any]:
    """Runtime options that make in-delivery retries wait on the queue's manual clock:
    no sleeping, and lock expiry and backoff measured on one time line."""

    return {"clock": clock, "jitter": lambda: 1.0}


ComposeApp = Callable[..., bootstrap.Runtime]


@pytest.fixture
async def compose_app(world: World) -> ComposeApp:
    """Compose the app for this event loop on the manual clock (jitter 1.0): ``transport``,
    ``telemetry`` and Cosmos client options (over ``FAST_SDK_BACKOFF``) as keywords."""
    loop = asyncio.get_running_loop()

    def compose(**options: Any) -> bootstrap.Runtime:
        assert asyncio.get_running_loop() is loop
        return world.compose(jitter=lambda: 1.0, **{**FAST_SDK_BACKOFF, **options})

    return compose


InstallFaulty = Callable[..., FaultInjectingTransport]


@pytest.fixture
async def install_faulty(compose_app: ComposeApp) -> InstallFaulty:
    """Compose the app with a fault-injecting transport; ``client_options`` go to the Cosmos
    client (over ``FAST_SDK_BACKOFF``)."""

    def install(**client_options: Any) -> FaultInjectingTransport:
        transport = FaultInjectingTransport(connection_verify=False)
        compose_app(transport=transport, **client_options)
        return transport

    return install


@pytest.fixture
async def faulty(install_faulty: InstallFaulty) -> FaultInjectingTransport:
    """The app's Cosmos client with a fault-injecting transport, on the manual clock."""
    return install_faulty()
