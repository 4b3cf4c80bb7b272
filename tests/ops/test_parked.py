"""``python -m ops parked``: outbox events the relay parked, listed, shown and republished through
the tool's Cosmos DB adapter (the real azure-cosmos SDK against the local Cosmos DB server), and
then published by the real relay (the world's change feed invoking ``relay_outbox`` through the
worker) to the topic model. What an operator checks: the documents, and the topic's deliveries.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessageSizeExceededError

from local.assembly.world import World
from local.standins.broker import ManualClock
from ops.cli import main
from ops.cosmos import CosmosOutboxDocuments, container_client
from ops.parked import Outcome, StuckEvent, republish
from shared.relay.core import PARKED_INVALID_EVENT, PARKED_REJECTED
from tests.conftest import FAST_SDK_BACKOFF
from tests.relay.conftest import accept_order, new_order_ids, outbox_by_order


@pytest.fixture
def outbox(app_env: dict[str, str]) -> CosmosOutboxDocuments:
    return CosmosOutboxDocuments(
        container_client(
            app_env["COSMOS_ENDPOINT"],
            app_env["COSMOS_DATABASE"],
            app_env["COSMOS_CONTAINER"],
            key=app_env["COSMOS_KEY"],
            verify_tls=False,
        )
    )


@pytest.fixture
def relaying(world: World) -> World:
    """The app composed on the world's clock, the world's topic its relay's sender."""
    world.compose(jitter=lambda: 1.0, **FAST_SDK_BACKOFF)
    return world


def tool(outbox: CosmosOutboxDocuments, clock: ManualClock, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main(list(argv), outbox=outbox, clock=clock, out=out)
    text = out.getvalue()
    return code, json.loads(text) if "--json" in argv or argv[:2] == ("parked", "show") else text


async def park_two(
    relaying: World, container: ContainerProxy, clock: ManualClock
) -> tuple[str, str, str]:
    """A: published; B: refused by the broker as too large (parked RejectedByBroker); C: an
    invalid event (parked InvalidOutboxEvent). Each by the real relay."""
    a, b, c = new_order_ids(3)
    await accept_order(container, b, accepted_at=clock.now())
    relaying.topic.fail_next_sends(lambda: MessageSizeExceededError(message="too large"))
    await relaying.change_feed.drain()
    clock.advance(timedelta(hours=1))
    await accept_order(container, a, accepted_at=clock.now())
    _, event = await accept_order(container, c, accepted_at=clock.now())
    await container.replace_item(event["id"], {**event, "payload": {**event["payload"], "x": 1}})
    await relaying.change_feed.drain()
    clock.advance(timedelta(hours=1))
    return a, b, c


async def test_parked_events_are_listed_with_reason_description_and_age(
    relaying: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    _, b, c = await park_two(relaying, container, clock)

    code, rows = tool(outbox, clock, "parked", "list", "--json")

    assert code == 0
    assert [(r["orderId"], r["status"], r["reason"]) for r in rows] == [
        (b, "parked", PARKED_REJECTED),
        (c, "parked", PARKED_INVALID_EVENT),
    ]
    assert [r["ageSeconds"] for r in rows] == [7200, 3600]
    assert "too large" in rows[0]["description"]
    assert "payload" in rows[1]["description"]
    code, only = tool(outbox, clock, "parked", "list", "--reason", PARKED_REJECTED, "--json")
    assert [r["orderId"] for r in only] == [b]
    code, text = tool(outbox, clock, "parked", "list")
    assert "2 outbox event(s) not published" in text


async def test_show_prints_the_event_with_its_order(
    relaying: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    _, b, _ = await park_two(relaying, container, clock)

    code, shown = tool(outbox, clock, "parked", "show", b)

    assert code == 0
    assert (shown["outbox"]["status"], shown["order"]["id"]) == ("parked", b)
    out = io.StringIO()
    assert main(["parked", "show", "ord-nope"], outbox=outbox, out=out) == 1
    assert "no outbox document for order 'ord-nope'" in out.getvalue()


async def test_republish_by_reason_sets_pending_and_the_relay_publishes_the_same_event_id(
    relaying: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    _, b, c = await park_two(relaying, container, clock)
    before = await outbox_by_order(container)
    relaying.topic.delivered()  # downstream takes what was published so far

    code, dry = tool(
        outbox, clock, "parked", "republish", "--reason", PARKED_REJECTED, "--dry-run", "--json"
    )
    assert (code, [r["outcome"] for r in dry["results"]]) == (0, ["would-republish"])
    assert (await outbox_by_order(container))[b]["_etag"] == before[b]["_etag"]  # untouched

    code, done = tool(outbox, clock, "parked", "republish", "--reason", PARKED_REJECTED, "--json")

    assert code == 0
    assert [(r["orderId"], r["outcome"]) for r in done["results"]] == [(b, "republished")]
    republished = (await outbox_by_order(container))[b]
    assert republished["status"] == "pending"
    assert republished["eventId"] == before[b]["eventId"]  # never a new event id
    assert republished["payload"] == before[b]["payload"]
    assert relaying.topic.delivered() == []  # the tool published nothing itself
    await relaying.change_feed.drain()
    after = await outbox_by_order(container)
    assert after[b]["status"] == "dispatched"
    assert after[c]["status"] == "parked"  # another reason: not taken
    assert [m.message_id for m in relaying.topic.delivered()] == [before[b]["eventId"]]


async def test_republishing_what_is_not_stuck_or_not_there_says_so_and_exits_1(
    relaying: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    a, _, _ = await park_two(relaying, container, clock)

    code, report = tool(outbox, clock, "parked", "republish", a, "ord-nope", "--json")

    assert code == 1
    assert {r["orderId"]: r["outcome"] for r in report["results"]} == {
        a: "not-stuck",
        "ord-nope": "not-found",
    }
    assert (await outbox_by_order(container))[a]["status"] == "dispatched"


async def test_a_document_changed_since_it_was_read_is_left_alone(
    relaying: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    """Fails if the patch were not conditional on the etag the tool read."""
    _, b, _ = await park_two(relaying, container, clock)
    [read] = [d for d in outbox.stuck() if d["orderId"] == b]
    edited = {**read, "parkedDescription": "an operator's note"}
    await container.replace_item(read["id"], edited)  # meanwhile, someone else writes it

    [result] = republish(outbox, [StuckEvent(read, clock.now())])

    assert result.outcome is Outcome.CHANGED
    current = (await outbox_by_order(container))[b]
    assert (current["status"], current["parkedDescription"]) == ("parked", "an operator's note")


async def test_long_pending_events_are_listed_and_republished_only_when_asked(
    world: World, container: ContainerProxy, clock: ManualClock, outbox: CosmosOutboxDocuments
) -> None:
    old, recent = new_order_ids(2)
    await accept_order(container, old, accepted_at=clock.now() - timedelta(minutes=30))
    await accept_order(container, recent, accepted_at=clock.now())  # nobody relays either

    code, listed = tool(outbox, clock, "parked", "list", "--json")
    assert (code, listed) == (0, [])  # parked ones only, unless asked
    code, listed = tool(outbox, clock, "parked", "list", "--pending-older-than", "10m", "--json")
    assert [(r["orderId"], r["reason"], r["ageSeconds"]) for r in listed] == [
        (old, "pending", 1800)
    ]
    before = (await outbox_by_order(container))[old]

    code, report = tool(
        outbox, clock, "parked", "republish", "--pending-older-than", "10m", "--json"
    )

    assert code == 0
    assert [(r["orderId"], r["outcome"]) for r in report["results"]] == [(old, "republished")]
    touched = (await outbox_by_order(container))[old]
    assert touched["_etag"] != before["_etag"]  # a new version for the change feed
    assert {k: touched[k] for k in ("status", "eventId", "createdAt")} == {
        k: before[k] for k in ("status", "eventId", "createdAt")
    }
