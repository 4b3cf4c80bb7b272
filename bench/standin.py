"""The benchmarks' view of the one local stand-in, ``local.assembly.world.local_world``:
``standin``.

One world (Cosmos DB API, peek-lock queue, gRPC settlement server, Microsoft's worker) whose worker
loads ``bench/bench_app.py``: the product's ``function_app`` plus the platform floor, so that both
are invoked through ``azure_functions_runtime`` by the same worker, on the same queue and
settlement server. One host per function picks it by name. The app is composed through
``World.compose`` with a counting transport under its Cosmos client; the bench's own client (the
production ``create_client``, for the container, target 2 and the floor's writes) shares that
transport, so every request of either function is counted. It owns the assembly only: it must
never measure anything, nor be imported by product code.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from azure.cosmos.aio import ContainerProxy, CosmosClient

from bench.transport import SharedCountingTransport
from local.assembly.world import CosmosAccount, World, app_settings, cosmos_account, local_world
from local.standins.broker import OutgoingMessage, PeekLockQueue, QueueSettings
from local.standins.cosmos_server import EMULATOR_KEY, ensure_container
from local.standins.host import LocalFunctionsHost
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings

Function = Literal["consumer", "floor"]
FUNCTION_NAMES: dict[Function, str] = {"consumer": "consume_order", "floor": "platform_floor"}
APP_DIRECTORY = Path(__file__).resolve().parent
SCRIPT = "bench_app.py"
SCRIPT_SETTING = "PYTHON_SCRIPT_FILE_NAME"  # the runtime reads it from the environment


@contextlib.contextmanager
def bench_account() -> Iterator[CosmosAccount]:
    """The Cosmos DB API every target measures against: ``COSMOS_EMULATOR_ENDPOINT``'s (the real
    emulator or an account, ``COSMOS_EMULATOR_KEY``), else a local server for the duration."""
    endpoint = os.environ.get("COSMOS_EMULATOR_ENDPOINT") or None
    key = os.environ.get("COSMOS_EMULATOR_KEY", EMULATOR_KEY)
    with cosmos_account(endpoint, key) as account:
        yield account


@dataclass
class StandIn:
    world: World
    settings: Settings
    transport: SharedCountingTransport  # under the app's client and the bench's
    container: ContainerProxy  # the app's container, through the bench's client
    hosts: dict[Function, LocalFunctionsHost]
    client: CosmosClient  # the bench's own (on ``transport``): more containers, if a target needs

    @property
    def queue(self) -> PeekLockQueue:
        return self.world.queue

    async def run_until_idle(self, function: Function = "consumer") -> None:
        """Let one function's host invoke until the queue is idle; fail loudly if an invocation
        failed (the function must never raise)."""
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


@contextlib.contextmanager
def _bench_app_script() -> Iterator[None]:
    """The worker loads bench_app.py, imported afresh as by a new worker process (the runtime
    calls ``get_functions()`` once per app object)."""
    previous = os.environ.get(SCRIPT_SETTING)
    os.environ[SCRIPT_SETTING] = SCRIPT
    sys.modules.pop(Path(SCRIPT).stem, None)
    try:
        yield
    finally:
        sys.modules.pop(Path(SCRIPT).stem, None)
        if previous is None:
            os.environ.pop(SCRIPT_SETTING, None)
        else:
            os.environ[SCRIPT_SETTING] = previous


@contextlib.asynccontextmanager
async def standin(account: CosmosAccount, *, outbox: bool = True) -> AsyncIterator[StandIn]:
    """Send-side duplicate detection is off, so that a re-sent message reaches the consumer (as
    after the detection window)."""
    container_name = f"bench-{uuid.uuid4().hex[:10]}"
    settings = Settings.from_env(app_settings(account, container=container_name, outbox=outbox))
    transport = SharedCountingTransport(connection_verify=False)
    client = create_client(settings, transport=transport)
    queue_settings = QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(0))
    try:
        container = await ensure_container(client, settings.cosmos_database, container_name)
        with _bench_app_script():
            async with local_world(
                account=account,
                container=container_name,
                outbox=outbox,
                queue_settings=queue_settings,
                settlement_threads=16,  # the host's concurrency
                app_directory=APP_DIRECTORY,
            ) as world:
                world.compose(transport=transport)
                hosts = {
                    function: LocalFunctionsHost(
                        world.queue, world.worker, app_settings=world.env, function_name=name
                    )
                    for function, name in FUNCTION_NAMES.items()
                }
                yield StandIn(world, settings, transport, container, hosts, client)
                await client.get_database_client(settings.cosmos_database).delete_container(
                    container_name
                )
    finally:
        await client.close()
        await transport.close()
