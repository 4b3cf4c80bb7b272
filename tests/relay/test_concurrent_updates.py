"""Marks and parks in flight together, with a bound (``RelayPolicy.max_concurrent_updates``),
through the real SDK: a transport under the app's Cosmos client holds every PATCH for a moment
and counts how many are in flight at once. Every crash window still holds: a failed mark among
concurrent ones retries the batch, a crash in the middle of the marks escapes as itself and the
batch comes back whole, and the bound is one per relay, shared by the lease's invocation and the
watchdog's run.

Each test fails on the relay of 2fb4db9, which marked one event after another (at most one PATCH
in flight), or, for the crash, if the bounded runner let the crash escape wrapped in a
``BaseExceptionGroup`` (the worker would not see a crash).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest
from azure.cosmos.aio import ContainerProxy

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator, Lease
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.standins.topic import OrderEventsTopic, WorkerCrashed
from shared import bootstrap
from shared.relay.core import RelayPolicy
from tests.conftest import FAST_SDK_BACKOFF
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order


class HeldPatches(FaultInjectingTransport):
    """Holds each PATCH ``hold_s`` (real time) before sending it, counting those in flight;
    ``crash_at``: the n-th PATCH (1-based) raises ``WorkerCrashed`` instead, the others held."""

    def __init__(self, hold_s: float = 0.05, crash_at: int | None = None, **kwargs: Any) -> None:
        super().__init__(connection_verify=False, **kwargs)
        self.hold_s = hold_s
        self.crash_at = crash_at
        self.patches = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        if request.method.upper() != "PATCH":
            return await super().send(request, **kwargs)
        self.patches += 1
        if self.patches == self.crash_at:
            await asyncio.sleep(self.hold_s / 2)  # the others are in flight
            raise WorkerCrashed("the worker process died during the marks")
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.hold_s)
            return await super().send(request, **kwargs)
        finally:
            self.in_flight -= 1


def compose(
    world: World, captured: RelayCaptured, transport: HeldPatches, bound: int | None
) -> bootstrap.Runtime:
    policy = RelayPolicy() if bound is None else RelayPolicy(max_concurrent_updates=bound)
    return world.compose(
        transport=transport,
        relay_telemetry=captured.telemetry,
        relay_policy=policy,
        jitter=lambda: 1.0,
        **FAST_SDK_BACKOFF,
    )


@pytest.mark.parametrize(("bound", "expected"), [(4, 4), (None, 10)], ids=["bound-4", "default"])
async def test_marks_are_in_flight_together_up_to_the_bound(
    bound: int | None,
    expected: int,
    world: World,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    ids = new_order_ids(10)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    transport = HeldPatches()
    compose(world, captured_relay, transport, bound)

    stats = await world.change_feed.drain()

    assert stats.failed_invocations == 0
    assert transport.patches == 10
    # The default bound (32) is above the batch's 10 events: all ten at once.
    assert transport.most_in_flight == expected
    assert topic.stats.sends == 1  # the sends stay batched
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in (await outbox_by_order(container)).values()
    )


async def test_one_failed_mark_among_concurrent_ones_retries_the_batch_and_keeps_the_others(
    world: World,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    ids = new_order_ids(5)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    transport = HeldPatches(hold_s=0.02)
    transport.add(FaultRule(FaultKind.STATUS, method="PATCH", status=403, times=1))
    compose(world, captured_relay, transport, None)
    batch = await world.change_feed.read_changes()

    first = await world.change_feed.invoke(batch)

    assert not first.succeeded and "1 not marked" in str(first.error)
    statuses = sorted(d["status"] for d in (await outbox_by_order(container)).values())
    assert statuses == ["dispatched"] * 4 + ["pending"]  # the other marks committed
    stats = await world.change_feed.drain()  # the retry: the republish is dropped, then marked
    assert stats.failed_invocations == 1  # the first invocation's, none since
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"dispatched"}
    assert len(topic.delivered()) == 5
    assert captured_relay.total("orders.relay.failed") == 0  # a failed mark is no failed send


async def test_a_crash_during_the_marks_escapes_as_itself_and_the_batch_comes_back_whole(
    world: World,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    lease: Lease,
    captured_relay: RelayCaptured,
) -> None:
    ids = new_order_ids(6)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    compose(world, captured_relay, HeldPatches(crash_at=3), None)

    with pytest.raises(WorkerCrashed):  # not a BaseExceptionGroup: the worker dies of it
        await world.change_feed.drain()
    assert lease.continuation is None  # the invocation never returned: no checkpoint

    compose(world, captured_relay, HeldPatches(), None)  # the restarted worker
    await world.restart_change_feed().drain()

    outbox = await outbox_by_order(container)
    assert {d["status"] for d in outbox.values()} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in outbox.values()
    )
    assert topic.stats.dropped_duplicates == 6  # all six were sent before the crash


async def test_the_bound_is_shared_by_the_lease_and_the_watchdog(
    world: World,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    ids = new_order_ids(8)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(timedelta(minutes=10))  # old enough for the watchdog
    transport = HeldPatches()
    compose(world, captured_relay, transport, 3)

    ticks, stats = await asyncio.gather(world.watchdog.tick(), change_feed.drain())

    assert ticks.succeeded and stats.failed_invocations == 0
    assert transport.most_in_flight == 3  # one bound for the process, not one per invocation
    outbox = await outbox_by_order(container)
    assert {d["status"] for d in outbox.values()} == {"dispatched"}
    assert topic.stats.accepted == len(ids)
