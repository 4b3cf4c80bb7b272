"""The local stand-in the benchmarks run on, assembled in ONE place: ``standin``.

It owns the assembly only: a fresh container, the peek-lock queue, the gRPC settlement server, one
host per function app (the real ``function_app`` and the platform floor, ``bench.floor_app``) and
the app's Cosmos client with a counting transport, given to the composition root (the only call
of it in bench/). It must never measure anything, nor be imported by product code.

Round two replaces the body of ``standin`` with ``local.world``'s entry point (whose host runs
``azure_functions_runtime`` in-process); ``StandIn`` is all the benchmarks see of it. The floor
then loads as a script of its own (``PYTHON_SCRIPT_FILE_NAME=floor_app.py``, script root bench/),
which the runtime imports as the module ``floor_app``, not ``bench.floor_app``: ``expect`` must
be called on the module the runtime loaded.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from azure.cosmos.aio import ContainerProxy

import function_app
from bench import floor_app
from bench.transport import CountingTransport
from local.broker import OutgoingMessage, PeekLockQueue, QueueSettings
from local.cosmos_server import EMULATOR_KEY, LocalCosmosServer, ensure_container
from local.host import LocalFunctionsHost
from local.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from shared import runtime
from shared.config import Settings
from shared.cosmos_store import create_client

Function = Literal["consumer", "floor"]


@contextlib.contextmanager
def cosmos_account() -> Iterator[tuple[str, str]]:
    """(endpoint, key): ``COSMOS_EMULATOR_ENDPOINT`` (the real emulator or an account) if set,
    else a local cosmosdb-server for the duration."""
    endpoint = os.environ.get("COSMOS_EMULATOR_ENDPOINT", "")
    if endpoint:
        yield endpoint, os.environ.get("COSMOS_EMULATOR_KEY", EMULATOR_KEY)
        return
    with LocalCosmosServer() as server:
        yield server.endpoint, EMULATOR_KEY


@dataclass
class StandIn:
    settings: Settings
    transport: CountingTransport  # under the app's client: every request the function sends
    container: ContainerProxy  # the app's container, through the app's client
    queue: PeekLockQueue
    hosts: dict[Function, LocalFunctionsHost]

    async def run_until_idle(self, function: Function = "consumer") -> None:
        """Let one app's host invoke until the queue is idle; fail loudly if an invocation
        raised (the function must never raise)."""
        host = self.hosts[function]
        failed = host.stats.failed_invocations
        await host.run_until_idle()
        if host.stats.failed_invocations != failed:
            raise RuntimeError(f"{function}: invocations failed: {host.stats.errors[-3:]}")

    async def deliver(self, *messages: OutgoingMessage) -> None:
        for message in messages:
            if not self.queue.send(message):
                raise RuntimeError(f"the queue dropped {message.message_id} as a duplicate")
        await self.run_until_idle()


@contextlib.asynccontextmanager
async def standin(account: tuple[str, str], *, outbox: bool = True) -> AsyncIterator[StandIn]:
    """Send-side duplicate detection is off, so that a re-sent message reaches the consumer (as
    after the detection window)."""
    endpoint, key = account
    container_name = f"bench-{uuid.uuid4().hex[:10]}"
    env = {
        "ORDERS_QUEUE_NAME": "orders",
        "COSMOS_ENDPOINT": endpoint,
        "COSMOS_KEY": key,
        "COSMOS_DATABASE": "orders",
        "COSMOS_CONTAINER": container_name,
        "COSMOS_VERIFY_TLS": "false",
        "OUTBOX_ENABLED": str(outbox).lower(),
    }
    settings = Settings.from_env(env)
    transport = CountingTransport(connection_verify=False)
    client = create_client(settings, transport=transport)
    queue = PeekLockQueue(
        QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(0))
    )
    with worker_arguments_restored(), SettlementServer(queue, max_workers=16) as server:
        bind_message_actions(server.port)
        await runtime.close()
        # The composition root: its one call in bench/. The app's client shares the counting
        # transport with ``client``, so every request of either function is counted.
        runtime.configure(env, cosmos_options={"transport": transport})
        try:
            container = await ensure_container(client, settings.cosmos_database, container_name)
            hosts: dict[Function, LocalFunctionsHost] = {
                "consumer": LocalFunctionsHost(queue, function_app.app, app_settings=env),
                "floor": LocalFunctionsHost(queue, floor_app.app, app_settings=env),
            }
            yield StandIn(settings, transport, container, queue, hosts)
            database = client.get_database_client(settings.cosmos_database)
            await database.delete_container(container_name)
        finally:
            await runtime.close()  # closes the installed client: ours
