"""Smoke test of the split stand-in behind benchmark target 3: the host's side in a child process,
the worker's side (decode, the real function, gRPC settlement) on this event loop. Every message
is processed once and settled; nothing is left locked or dead-lettered."""

from __future__ import annotations

import uuid

from azure.cosmos.aio import ContainerProxy

from bench import floor_app
from bench.split_host import SplitHost
from local.host import index_function
from local.settlement_server import bind_message_actions, worker_arguments_restored
from shared import runtime


def every_message_settled(count: int) -> dict[str, int]:
    """The host's statistics when each of ``count`` messages ran once and was settled."""
    return {"invocations": count, "failed_invocations": 0, "dead_letters": 0, "not_settled": 0}


async def stored_ids(container: ContainerProxy, prefix: str) -> list[str]:
    found = [
        str(item["id"])
        async for item in container.query_items(
            "SELECT c.id FROM c WHERE STARTSWITH(c.id, @prefix)",
            parameters=[{"name": "@prefix", "value": prefix}],
        )
    ]
    return sorted(found)


async def test_split_host_processes_and_settles_every_message(
    container: ContainerProxy, app_env: dict[str, str], fresh_runtime: None
) -> None:
    runtime.configure(app_env)
    with worker_arguments_restored():
        async with SplitHost(app_env, max_concurrent_calls=4) as host:
            bind_message_actions(host.grpc_port)
            prefix = f"split-{uuid.uuid4().hex[:6]}"
            assert await host.enqueue(prefix, 12, lines=2) == 12

            stats = await host.run_until_idle()

            assert stats == every_message_settled(12)
            assert host.errors == []
            # Outbox on (app_env): each order and its event.
            assert await stored_ids(container, prefix) == sorted(
                [f"{prefix}-{index}" for index in range(12)]
                + [f"{prefix}-{index}:OrderAccepted" for index in range(12)]
            )


async def test_platform_floor_writes_the_prepared_documents_and_settles(
    container: ContainerProxy, app_env: dict[str, str]
) -> None:
    """The floor variant of target 3 runs bench.floor_app's function on the same split host: it
    must write exactly the documents it is given (the bare loop's) and complete every message."""
    with worker_arguments_restored():
        async with SplitHost(app_env, max_concurrent_calls=4) as host:
            host.function = index_function(floor_app.app, app_env)
            bind_message_actions(host.grpc_port)
            prefix = f"floor-{uuid.uuid4().hex[:6]}"
            ids = [f"{prefix}-{index}" for index in range(8)]
            floor_app.expect(
                container,
                {
                    message_id: [{"id": message_id, "orderId": message_id, "type": "order"}]
                    for message_id in ids
                },
            )
            assert await host.enqueue(prefix, len(ids), lines=2) == len(ids)

            stats = await host.run_until_idle()

            assert stats == every_message_settled(len(ids))
            assert host.errors == []
            assert await stored_ids(container, prefix) == sorted(ids)
