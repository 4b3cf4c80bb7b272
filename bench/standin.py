"""The local stand-in, assembled for benchmarks: the Cosmos DB API server, the peek-lock queue
model, the gRPC settlement server, the Functions host stand-in and the real function.

The app's Cosmos client is built with ``shared.cosmos_store.create_client`` (the production client
options) plus a ``CountingTransport``, and installed with ``shared.runtime.install``, so every
request the function sends is counted below the SDK.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta

from azure.cosmos.aio import ContainerProxy, CosmosClient

from bench.transport import CountingTransport
from local.broker import OutgoingMessage, PeekLockQueue, QueueSettings
from local.cosmos_server import EMULATOR_KEY, LocalCosmosServer, ensure_container
from local.host import LocalFunctionsHost
from local.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from local.worker import FunctionsWorker
from shared import runtime
from shared.config import Settings
from shared.cosmos_store import create_client


@dataclass
class CosmosAccount:
    endpoint: str
    key: str
    server_pid: int | None = None  # the local server's process, when it is ours


@contextlib.contextmanager
def cosmos_account(*, keep_alive: bool = True) -> Iterator[CosmosAccount]:
    """``COSMOS_EMULATOR_ENDPOINT`` (the real emulator or an account) if set, else a local
    cosmosdb-server for the duration, with keep-alive unless told otherwise."""
    endpoint = os.environ.get("COSMOS_EMULATOR_ENDPOINT", "")
    if endpoint:
        yield CosmosAccount(endpoint, os.environ.get("COSMOS_EMULATOR_KEY", EMULATOR_KEY))
        return
    server = LocalCosmosServer(keep_alive=keep_alive)
    with server:
        yield CosmosAccount(server.endpoint, EMULATOR_KEY, server.pid)


def app_settings(account: CosmosAccount, *, outbox: bool, container: str) -> dict[str, str]:
    return {
        "ORDERS_QUEUE_NAME": "orders",
        "COSMOS_ENDPOINT": account.endpoint,
        "COSMOS_KEY": account.key,
        "COSMOS_DATABASE": "orders",
        "COSMOS_CONTAINER": container,
        "COSMOS_VERIFY_TLS": "false",
        "OUTBOX_ENABLED": "true" if outbox else "false",
    }


@dataclass
class StandIn:
    env: dict[str, str]
    settings: Settings
    transport: CountingTransport
    client: CosmosClient
    container: ContainerProxy
    queue: PeekLockQueue
    host: LocalFunctionsHost
    server_pid: int | None = None  # the local Cosmos server's process, if ours
    settlement_port: int = 0  # the in-process settlement server's port

    def use_outbox(self, enabled: bool) -> None:
        """Rebuild the consumer on the same client with the outbox on or off."""
        self.settings = dataclasses.replace(self.settings, outbox_enabled=enabled)
        runtime.install(self.settings, self.client)

    async def deliver(self, *messages: OutgoingMessage) -> None:
        """Send, then let the host run until the queue is idle; fail loudly on a host error."""
        for message in messages:
            if not self.queue.send(message):
                raise RuntimeError(f"the queue dropped {message.message_id} as a duplicate")
        failed = self.host.stats.failed_invocations
        await self.host.run_until_idle()
        if self.host.stats.failed_invocations != failed:
            raise RuntimeError(f"function invocations failed: {self.host.stats.errors[-3:]}")


@contextlib.asynccontextmanager
async def standin(account: CosmosAccount, *, outbox: bool = True) -> AsyncIterator[StandIn]:
    """A fresh container, queue and settlement server; the app's runtime installed with a
    counting transport. Send-side duplicate detection is off so that a re-sent message reaches
    the consumer (as after the detection window)."""
    container_name = f"bench-{uuid.uuid4().hex[:10]}"
    env = app_settings(account, outbox=outbox, container=container_name)
    saved_env = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    os.environ.pop("APPLICATIONINSIGHTS_CONNECTION_STRING", None)
    settings = Settings.from_env(env)
    transport = CountingTransport(connection_verify=False)
    client = create_client(settings, transport=transport)
    queue = PeekLockQueue(
        QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(0))
    )
    with worker_arguments_restored():
        server = SettlementServer(queue, max_workers=16).start()
        try:
            bind_message_actions(server.port)
            container = await ensure_container(client, settings.cosmos_database, container_name)
            await runtime.close()
            runtime.install(settings, client)
            host = LocalFunctionsHost(queue, await FunctionsWorker.start(), app_settings=env)
            yield StandIn(
                env,
                settings,
                transport,
                client,
                container,
                queue,
                host,
                account.server_pid,
                server.port,
            )
            with contextlib.suppress(Exception):
                await client.get_database_client(settings.cosmos_database).delete_container(
                    container_name
                )
        finally:
            await runtime.close()  # closes the installed client: ours
            with contextlib.suppress(Exception):
                await client.close()
            server.stop()
            for name, value in saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
