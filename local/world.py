"""The local stand-in, assembled in one place for tests, ``make demo``, ``make chaos`` and bench.

``local_world`` builds what this machine lacks around the real app: a Cosmos DB API server (or
uses the account it is given), the peek-lock queue model on a clock, the host's gRPC settlement
service, Microsoft's worker (``azure_functions_runtime``) started on the app directory with its
``ServiceBusMessageActions`` pointed at that service, and the host's Service Bus trigger.
``World.compose`` is the only place in ``local/`` that calls the app's composition root.

It must never reach into the app past the composition root's parameters: the app runs as in
Azure, only its clock, Cosmos client options and telemetry are injected.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.core.pipeline.transport import AsyncHttpTransport

from local.broker import ManualClock, PeekLockQueue, QueueSettings
from local.cosmos_server import EMULATOR_KEY, LocalCosmosServer
from local.host import LocalFunctionsHost
from local.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from local.worker import REPO_ROOT, FunctionsWorker
from shared import runtime
from shared.config import Settings
from shared.telemetry import ConsumerTelemetry

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the manual clock's default start


@dataclass(frozen=True)
class CosmosAccount:
    endpoint: str
    key: str | None  # None: DefaultAzureCredential (a real account)
    server_pid: int | None = None  # the local cosmosdb-server's process, when it is ours

    @property
    def is_local_server(self) -> bool:
        return self.server_pid is not None


@contextlib.contextmanager
def cosmos_account(
    endpoint: str | None = None, key: str | None = None, *, keep_alive: bool = True
) -> Iterator[CosmosAccount]:
    """The given account (the real emulator or an account), else a local cosmosdb-server for the
    duration."""
    if endpoint:
        yield CosmosAccount(endpoint, key)
        return
    with LocalCosmosServer(keep_alive=keep_alive) as server:
        yield CosmosAccount(server.endpoint, EMULATOR_KEY, server.pid)


def app_settings(
    account: CosmosAccount,
    *,
    container: str,
    queue_name: str = "orders",
    outbox: bool = True,
    verify_tls: bool = False,
) -> dict[str, str]:
    """The app settings of the stand-in: what ``local.settings.json`` holds for ``func start``."""
    return {
        "ORDERS_QUEUE_NAME": queue_name,
        "COSMOS_ENDPOINT": account.endpoint,
        "COSMOS_DATABASE": "orders",
        "COSMOS_CONTAINER": container,
        # cosmosdb-server's certificate is self-signed
        "COSMOS_VERIFY_TLS": "true" if verify_tls and not account.is_local_server else "false",
        "OUTBOX_ENABLED": "true" if outbox else "false",
        **({"COSMOS_KEY": account.key} if account.key else {}),
    }


@dataclass
class World:
    env: dict[str, str]
    clock: ManualClock
    queue: PeekLockQueue
    settlement: SettlementServer
    worker: FunctionsWorker
    host: LocalFunctionsHost

    @property
    def settings(self) -> Settings:
        return Settings.from_env(self.env)

    def compose(
        self,
        *,
        transport: AsyncHttpTransport[Any, Any] | None = None,
        telemetry: ConsumerTelemetry | None = None,
        jitter: Callable[[], float] | None = None,
        env: Mapping[str, str] | None = None,
        **client_options: Any,
    ) -> runtime.Runtime:
        """Compose the app on the world's clock, optionally with a fault-injecting ``transport``
        under the Cosmos SDK and other client options: the stand-in's one call of the composition
        root. Until this is called the app composes itself from the app settings on its first
        message, as in Azure."""
        if transport is not None:
            client_options["transport"] = transport
        return runtime.configure(
            self.env if env is None else env,
            clock=self.clock,
            cosmos_options=client_options,
            telemetry=telemetry,
            **({} if jitter is None else {"jitter": jitter}),
        )


@contextlib.asynccontextmanager
async def local_world(
    *,
    account: CosmosAccount | None = None,
    container: str = "orders",
    outbox: bool = True,
    verify_tls: bool = False,
    clock: ManualClock | None = None,
    queue_settings: QueueSettings | None = None,
    max_concurrent_calls: int | None = None,
    settlement_threads: int = 8,
    app_directory: Path = REPO_ROOT,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[World]:
    """Start the stand-in; on exit stop it and close the app's composed Cosmos client.

    ``account`` None starts a local Cosmos server for the world's lifetime. ``env`` overrides
    the stand-in's app settings (``app_settings``). The container is the caller's to create."""
    with contextlib.ExitStack() as stack:
        if account is None:
            account = stack.enter_context(cosmos_account())
        settings_env = {
            **app_settings(account, container=container, outbox=outbox, verify_tls=verify_tls),
            **(env or {}),
        }
        clock = clock or ManualClock(START)
        queue = PeekLockQueue(queue_settings or QueueSettings.from_messaging_file(), clock=clock)
        # The host launches the worker with --host/--port of its gRPC services: the worker's
        # ServiceBusMessageActions settles against our settlement server.
        stack.enter_context(worker_arguments_restored())
        settlement = stack.enter_context(SettlementServer(queue, max_workers=settlement_threads))
        bind_message_actions(settlement.port)
        worker = await FunctionsWorker.start(app_directory)
        stack.callback(worker.close)
        host = LocalFunctionsHost(
            queue, worker, app_settings=settings_env, max_concurrent_calls=max_concurrent_calls
        )
        try:
            yield World(settings_env, clock, queue, settlement, worker, host)
        finally:
            await runtime.close()
