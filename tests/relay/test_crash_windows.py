"""The relay's crash windows (before the send, after the send before the mark, during the mark)
and a failed mark: each ends with exactly one OrderAccepted per order delivered to the
subscription and no outbox document pending. A crash is ``WorkerCrashed`` (a ``BaseException``)
escaping the invocation through the worker (the process dies): the restarted trigger, on the same
lease, starts from the last checkpoint with its retry count lost."""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator, Lease
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.standins.topic import OrderEventsTopic, WorkerCrashed
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids
from tests.state import documents


@pytest.fixture
def cosmos_faults() -> FaultInjectingTransport:
    return FaultInjectingTransport(connection_verify=False)


@pytest.fixture
def relay_cosmos_options(cosmos_faults: FaultInjectingTransport) -> dict[str, Any]:
    return {"transport": cosmos_faults}


async def settled_state(
    container: ContainerProxy, topic: OrderEventsTopic, order_ids: list[str]
) -> tuple[list[str], set[str]]:
    outbox = [d for d in await documents(container) if d["type"] == "outbox"]
    by_event = {d["eventId"]: d["orderId"] for d in outbox}
    delivered = sorted(by_event[m.message_id or ""] for m in topic.delivered())
    return delivered, {d["status"] for d in outbox}


@pytest.mark.parametrize("after_send", [False, True], ids=["before-send", "after-send"])
async def test_a_crash_around_the_send_delivers_exactly_one_event_per_order(
    after_send: bool,
    container: ContainerProxy,
    world: World,
    topic: OrderEventsTopic,
    clock: ManualClock,
    lease: Lease,
    change_feed: ChangeFeedEmulator,
) -> None:
    ids = new_order_ids(3)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    topic.crash_next_sends(after_send=after_send)

    with pytest.raises(WorkerCrashed):
        await change_feed.drain()
    assert lease.continuation is None  # the invocation never returned: no checkpoint
    assert topic.stats.accepted == (3 if after_send else 0)

    await world.restart_change_feed().drain()

    delivered, statuses = await settled_state(container, topic, ids)
    assert delivered == sorted(ids)
    assert statuses == {"dispatched"}
    assert topic.stats.dropped_duplicates == (3 if after_send else 0)


async def test_a_crash_during_the_mark_is_resolved_by_the_etag(
    container: ContainerProxy,
    cosmos_faults: FaultInjectingTransport,
    topic: OrderEventsTopic,
    clock: ManualClock,
    change_feed: ChangeFeedEmulator,
) -> None:
    # The patch commits and its response is lost: the invocation fails, the batch comes back with
    # the old etag, its republish is dropped and its mark is a 412 (already dispatched).
    ids = new_order_ids(2)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    rule = cosmos_faults.add(FaultRule(FaultKind.LOST_RESPONSE, method="PATCH", times=1))

    stats = await change_feed.drain()

    assert rule.fired == 1
    assert stats.failed_invocations == 1
    delivered, statuses = await settled_state(container, topic, ids)
    assert delivered == sorted(ids)
    assert statuses == {"dispatched"}
    assert topic.stats.dropped_duplicates == 2


async def test_a_mark_failure_after_the_send_keeps_the_event_published_and_the_republish_is_dropped(
    container: ContainerProxy,
    cosmos_faults: FaultInjectingTransport,
    topic: OrderEventsTopic,
    clock: ManualClock,
    change_feed: ChangeFeedEmulator,
    captured_relay: RelayCaptured,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    cosmos_faults.add(FaultRule(FaultKind.STATUS, method="PATCH", status=403, times=1))

    stats = await change_feed.drain()

    # The send succeeded: the event counts as published, never as a failed send. The invocation
    # still asks for a retry, so the document does not stay pending behind a checkpoint.
    assert stats.failed_invocations == 1
    assert "not marked" in stats.errors[0]
    assert captured_relay.total("orders.relay.failed") == 0
    assert topic.stats.messages == 2 and topic.stats.dropped_duplicates == 1
    delivered, statuses = await settled_state(container, topic, [order_id])
    assert delivered == [order_id]
    assert statuses == {"dispatched"}
