"""Where the relay's trigger starts when no lease exists yet (a first deployment against a
backlog, or a recreated ``leases`` container). The Cosmos DB trigger starts "from now" by
default, and only then: its ``StartFromBeginning`` is read only while the lease store is empty
(``local.standins.change_feed`` cites the Learn pages). From now, every outbox document written
before the leases existed stays ``pending`` for ever; ``relay_outbox`` therefore starts from the
beginning.

``test_outbox_documents_written_before_the_leases_existed_are_published`` fails on 223dafd
(its binding set no start position: the emulation, which now reproduces the default, skips
them).
"""

from __future__ import annotations

from azure.cosmos.aio import ContainerProxy

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from tests.relay.conftest import accept_order, new_order_ids, outbox_by_order
from tests.state import documents


def test_the_binding_starts_from_the_beginning(world: World) -> None:
    trigger = world.worker.functions["relay_outbox"].trigger
    assert trigger["startFromBeginning"] is True  # as the worker reports it to the host


async def test_outbox_documents_written_before_the_leases_existed_are_published(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    # A backlog accepted before the relay's first start (the lease store is still empty).
    ids = new_order_ids(3)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    assert not change_feed.lease.initialised

    stats = await change_feed.drain()

    assert stats.skipped_at_start == 0
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in (await outbox_by_order(container)).values()
    )
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"dispatched"}


async def test_a_recreated_leases_container_replays_everything_and_publishes_nothing_twice(
    container: ContainerProxy,
    world: World,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    for order_id in new_order_ids(3):
        await accept_order(container, order_id, accepted_at=clock.now())
    await change_feed.drain()
    sends = topic.stats.sends
    [late] = new_order_ids(1)
    await accept_order(container, late, accepted_at=clock.now())  # pending when leases vanish

    replay = await world.recreate_leases().drain()

    # The replay reads every document once (the cost of starting from the beginning) ...
    assert replay.delivered_documents == len(await documents(container)) + 1  # + late's mark
    # ... and publishes only what was pending: orders and dispatched events are ignored.
    assert topic.stats.sends == sends + 1
    assert [m.message_id for m in topic.delivered()][-1] == (await outbox_by_order(container))[
        late
    ]["eventId"]


async def test_a_trigger_started_from_now_never_delivers_what_was_written_before(
    container: ContainerProxy,
    world: World,
    relay: object,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    """The emulation of the default start (what a binding without ``startFromBeginning``
    does): the documents written before the lease are never delivered unless they change."""
    before, after = new_order_ids(2)
    await accept_order(container, before, accepted_at=clock.now())

    feed = world.recreate_leases(start_from_beginning=False)
    await feed.drain()
    assert feed.stats.skipped_at_start == 2  # the order and its outbox document
    await accept_order(container, after, accepted_at=clock.now())
    await feed.drain()

    outbox = await outbox_by_order(container)
    assert outbox[before]["status"] == "pending"  # stuck for ever, silently (the watchdog's job)
    assert outbox[after]["status"] == "dispatched"
    assert [m.message_id for m in topic.delivered()] == [outbox[after]["eventId"]]
