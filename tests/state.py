"""What a test reads back after a run: the container's documents and the queue's settlements."""

from __future__ import annotations

from typing import Any

from azure.cosmos.aio import ContainerProxy

from local.standins.broker import PeekLockQueue


async def documents(container: ContainerProxy) -> list[dict[str, Any]]:
    """Every document in the container (orders and outbox entries alike)."""
    return [item async for item in container.query_items("SELECT * FROM c")]


def settlements(queue: PeekLockQueue) -> list[tuple[str, bool]]:
    """Each settlement the broker saw, in order: its operation and whether it succeeded."""
    return [(record.operation, record.ok) for record in queue.settlement_log]
