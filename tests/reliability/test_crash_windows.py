"""Every window in which a delivery can die, and what the redelivery makes of it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import pytest
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import Delivery, ManualClock, PeekLockQueue
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from local.standins.settlement_server import SettlementServer
from tests.orders import message, order_body
from tests.state import documents, settlements

Invoke = Callable[[], Awaitable[None]]


async def test_stop_after_commit_before_settlement_is_completed_as_a_duplicate(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    settlement_server: SettlementServer,
) -> None:
    async def host_dies_before_settling(delivery: Delivery, invoke: Invoke) -> None:
        if delivery.delivery_count == 1:
            settlement_server.servicer.lost_settlements.add(delivery.lock_token)
        await invoke()

    queue.send(message(order_body()))
    await host.run_until_idle(on_delivery=host_dies_before_settling)

    assert queue.stats.deliveries == 2
    assert queue.stats.lock_expired == 1
    assert settlements(queue) == [("complete", True)]  # the lost one never reached the broker
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_settlement_fails_with_lost_lock_after_commit(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    async def lock_lost_while_working(delivery: Delivery, invoke: Invoke) -> None:
        if delivery.delivery_count == 1:
            queue.expire_lock(delivery.lock_token)
        await invoke()

    host.max_concurrent_calls = 1  # the redelivery starts only after the first one finished
    queue.send(message(order_body()))
    await host.run_until_idle(on_delivery=lock_lost_while_working)

    assert settlements(queue) == [("complete", False), ("complete", True)]
    assert queue.dead_letters == []
    assert len(await documents(container)) == 2


async def test_failed_batch_writes_nothing_and_the_redelivery_processes(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
) -> None:
    # The batch is refused as a whole (a 500 on the batch request), every time, for longer
    # than one delivery's retry budget: the first delivery abandons, the next one processes.
    outage = faulty.add(FaultRule(FaultKind.STATUS, status=500, times=None, **WRITES))
    queue.send(message(order_body()))

    delivery = queue.receive(1)[0]
    await host.invoke(delivery)
    assert settlements(queue) == [("abandon", True)]
    assert await documents(container) == []

    faulty.clear()
    await host.run_until_idle()

    assert outage.fired > 1  # retried within the first delivery before abandoning
    assert settlements(queue) == [("abandon", True), ("complete", True)]
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_batch_rolls_back_as_a_whole(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy, clock: ManualClock
) -> None:
    """The order's create succeeds and the event's conflicts: Cosmos DB undoes the batch as a
    whole (the local server too: local/standins/cosmos_batch.js), so nothing half-written is
    left to block the resubmission once the operator removed the event. Written for the real
    emulator only, it never ran: it still expected a redelivery where the product has since
    dead-lettered the message as ``OrphanedDocument`` (test_batch_conflicts.py). Fails on the
    package's own batch: the order stays written, and the resubmission is then a duplicate
    without its event."""
    blocker = {"id": "ord-1001:OrderAccepted", "orderId": "ord-1001", "type": "outbox"}
    await container.create_item(blocker)
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    assert [doc["type"] for doc in await documents(container)] == ["outbox"]  # no order
    assert [dead.reason for dead in queue.dead_letters] == ["OrphanedDocument"]

    await container.delete_item(blocker["id"], partition_key="ord-1001")
    clock.advance(queue.settings.duplicate_detection_window)  # the resubmission is accepted
    assert queue.send(message(order_body()))
    await host.run_until_idle()
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


@pytest.mark.parametrize("cancel_after_requests", [0, 1, 3])
async def test_invocation_cancelled_mid_flight_is_redelivered_correctly(
    cancel_after_requests: int,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
) -> None:
    """The worker process is killed at different points: before any request, after the first,
    after the write. Nothing is settled; the lock expires; the redelivery is right."""

    async def killed(delivery: Delivery, invoke: Invoke) -> None:
        if delivery.delivery_count > 1:
            await invoke()
            return
        task = asyncio.ensure_future(invoke())
        for _ in range(10_000):  # bounded: yield until enough requests went out
            if faulty.requests_sent >= cancel_after_requests or task.done():
                break
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    queue.send(message(order_body()))
    await host.run_until_idle(on_delivery=killed)

    assert queue.stats.lock_expired >= 1
    assert settlements(queue)[-1] == ("complete", True)
    assert queue.dead_letters == []
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_lock_expires_while_the_first_delivery_is_still_writing(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
) -> None:
    # The first delivery's write commits but its answer is slow; meanwhile its lock expires
    # and a second delivery of the same message runs concurrently.
    faulty.add(FaultRule(FaultKind.SLOW_RESPONSE, delay_s=0.5, **WRITES))
    started_second = asyncio.Event()

    async def lock_expires(delivery: Delivery, invoke: Invoke) -> None:
        if delivery.delivery_count == 1:
            queue.expire_lock(delivery.lock_token)
        else:
            started_second.set()
        await invoke()

    queue.send(message(order_body()))
    await host.run_until_idle(on_delivery=lock_expires)

    assert started_second.is_set()
    assert host.stats.invocations == 2
    # The second delivery completed (a duplicate of the first one's committed write); the first
    # one's complete was refused for its lost lock, and swallowed.
    assert sorted(settlements(queue)) == [("complete", False), ("complete", True)]
    assert queue.dead_letters == []
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]
