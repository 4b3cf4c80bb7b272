"""The audit: its invariants as pure functions over plain data (documents as the consumer builds
them), and ``python -m ops audit`` over the whole stand-in: the real function and relay through
Microsoft's worker, the local Cosmos DB server through the real azure-cosmos SDK, the dead-letter
queue and the topic's subscription through the real azure-servicebus SDK
(``local.standins.servicebus_link``).
Each FAIL case breaks the one thing its invariant guards and checks the offending id is named."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.assembly.world import World
from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from local.standins.topic import RETAINED_SUBSCRIPTION, topic_name
from ops.audit import (
    NOTHING_PENDING,
    ONE_EVENT_PER_ORDER,
    SeenEvent,
    dead_lettered_as,
    every_dead_letter_has_a_reason,
    no_dead_letter_for,
    no_event_for_rejected,
    no_order_lost,
    nothing_pending,
    one_event_per_accepted_order,
    one_order_per_id,
    orders_are_the_requests,
)
from ops.cli import main
from ops.cosmos import CosmosAuditReader, container_client
from ops.sample_orders import amended_body, cancelled_body
from ops.servicebus import ServiceBusEvents
from shared.relay.outbox import outbox_document_id
from tests.conftest import FAST_SDK_BACKOFF
from tests.ops.audit_data import NOW, accepted, letter, seen_event
from tests.orders import message, order_body

# ---- the invariants, pure -----------------------------------------------------------------------


def test_one_order_per_id_names_an_order_stored_under_another_id() -> None:
    good, _ = accepted("ord-1")
    stranger = {**accepted("ord-2")[0], "messageId": "ord-9"}

    assert one_order_per_id([good]).passed
    check = one_order_per_id([good, stranger, {**good}])
    assert (check.passed, check.offending) == (False, ["ord-1", "ord-2"])
    assert "1 stored twice ['ord-1']" in check.detail


def test_each_accepted_order_has_one_event_and_one_delivery() -> None:
    (one, one_event), (two, two_event) = accepted("ord-1"), accepted("ord-2")
    orders, outbox = [one, two], [one_event, two_event]

    assert one_event_per_accepted_order(orders, outbox).passed
    assert one_event_per_accepted_order(orders, outbox, [seen_event(one), seen_event(two)]).passed
    missing = one_event_per_accepted_order(orders, [one_event])
    assert missing.offending == ["ord-2"]
    doubled = one_event_per_accepted_order(
        orders, outbox, [seen_event(one)] * 2 + [seen_event(two)]
    )
    assert (doubled.passed, doubled.offending) == (False, ["ord-1"])


def test_no_event_is_published_for_an_order_that_is_not_stored_or_not_this_one() -> None:
    (one, one_event), (_, ghost_event) = accepted("ord-1"), accepted("ord-ghost")

    assert no_event_for_rejected([one], [one_event], [seen_event(one)]).passed
    check = no_event_for_rejected(
        [one],
        [one_event, ghost_event],
        [seen_event(one, total_minor=1), SeenEvent("x", "ord-none")],
    )
    assert check.offending == ["ord-1", "ord-ghost", "ord-none"]
    outside = no_event_for_rejected([], [one_event], [seen_event(one)], referenced={"ord-1": one})
    assert outside.passed  # an order accepted before the window is still an order


def test_nothing_is_parked_or_pending_past_the_grace() -> None:
    _, fresh = accepted("ord-1")
    _, parked = accepted("ord-2")
    parked = {**parked, "status": "parked"}
    dispatched = {**accepted("ord-3")[1], "status": "dispatched"}

    assert nothing_pending(
        [fresh, dispatched], now=NOW + timedelta(minutes=1), grace=timedelta(minutes=5)
    ).passed
    late = nothing_pending(
        [fresh, parked], now=NOW + timedelta(minutes=6), grace=timedelta(minutes=5)
    )
    assert late.offending == ["ord-1", "ord-2"]
    assert nothing_pending([fresh], now=NOW).offending == ["ord-1"]  # grace 0: the demo's


def test_dead_letters_carry_a_known_reason_and_the_expected_ones_are_there() -> None:
    letters = [letter("ord-1", "HashMismatch"), letter("m-2", "InvalidPayload"), letter("m-3", "")]

    check = every_dead_letter_has_a_reason(letters)
    assert (check.passed, check.offending) == (False, ["m-3#1"])
    assert every_dead_letter_has_a_reason(letters[:2]).passed
    assert dead_lettered_as(letters, [("m-2", "InvalidPayload")], "poison").passed
    assert dead_lettered_as(letters, [("m-2", "MissingMessageId")], "poison").offending == ["m-2"]
    assert no_dead_letter_for(letters, ["ord-1"], allowed=["HashMismatch"]).passed
    assert not no_dead_letter_for(letters, ["ord-1", "m-2"], allowed=["HashMismatch"]).passed


def test_the_expected_dead_letters_are_there_exactly_as_often_as_expected() -> None:
    """Several poison messages have no MessageId: each must be there once, no more, no fewer,
    and a MessageId expected once must not be dead-lettered twice or for another reason."""
    nameless = [letter(None, "MissingMessageId"), letter(None, "MissingMessageId")]
    expected = [(None, "MissingMessageId"), (None, "MissingMessageId"), ("m-1", "InvalidPayload")]
    found = [*nameless, letter("m-1", "InvalidPayload")]

    assert dead_lettered_as(found, expected, "poison").passed
    assert dead_lettered_as(found[1:], expected, "poison").offending == ["(no MessageId)"]
    twice = [*found, letter("m-1", "InvalidPayload")]
    assert dead_lettered_as(twice, expected, "poison").offending == ["m-1"]
    also = [*found, letter("m-1", "MaxDeliveryCountExceeded")]
    assert dead_lettered_as(also, expected, "poison").offending == ["m-1"]
    # Dead letters of MessageIds nobody expected are another invariant's (no_dead_letter_for).
    assert dead_lettered_as([*found, letter("m-9", "x")], expected, "poison").passed


def test_the_demos_expectations_are_expressed_with_the_same_functions() -> None:
    one, _ = accepted("ord-1")
    changed, _ = accepted("ord-2", currency="USD")
    expected = {"ord-1": one["requestHash"], "ord-2": accepted("ord-2")[0]["requestHash"]}

    assert no_order_lost([one], expected).offending == ["ord-2"]
    assert orders_are_the_requests([one, changed], expected).offending == ["ord-2"]


# ---- python -m ops audit over the stand-in -------------------------------------------------------


@pytest.fixture
def relaying(world: World) -> World:
    world.compose(jitter=lambda: 1.0, **FAST_SDK_BACKOFF)
    return world


@pytest.fixture
def namespace(world: World) -> LocalNamespace:
    entities = [world.queue, world.topic.subscription]
    return LocalNamespace({entity.settings.queue_name: entity for entity in entities})


@pytest.fixture
def reader(app_env: dict[str, str]) -> CosmosAuditReader:
    return CosmosAuditReader(
        container_client(
            app_env["COSMOS_ENDPOINT"],
            app_env["COSMOS_DATABASE"],
            app_env["COSMOS_CONTAINER"],
            key=app_env["COSMOS_KEY"],
            verify_tls=False,
        )
    )


@pytest.fixture
def audit(
    world: World, namespace: LocalNamespace, reader: CosmosAuditReader, clock: ManualClock
) -> Iterator[Any]:
    queue = LocalDeadLetterQueue(world.queue, namespace)

    def run(*argv: str) -> tuple[int, dict[str, Any]]:
        out = io.StringIO()
        code = main(
            ["audit", "--since", "1h", "--json", *argv],
            queue=queue,
            audit=reader,
            events=ServiceBusEvents(servicebus_client(namespace), topic_name()),
            clock=clock,
            out=out,
        )
        return code, json.loads(out.getvalue())

    yield run
    queue.close()


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {i["name"]: (i["verdict"], i["offending"]) for i in report["invariants"]}


async def flow(relaying: World, *order_ids: str) -> None:
    for order_id in order_ids:
        relaying.queue.send(message(order_body(order_id), message_id=order_id))
    await relaying.host.run_until_idle()
    await relaying.change_feed.drain()


async def test_a_healthy_run_passes_every_invariant_and_says_what_it_read(
    relaying: World, audit: Any
) -> None:
    await flow(relaying, "ord-a1", "ord-a2", "ord-a3")
    relaying.queue.send(message(b"not json", message_id="poison-1"))
    await relaying.host.run_until_idle()

    code, report = audit("--subscription", RETAINED_SUBSCRIPTION)

    assert code == 0, report
    assert {v for v, _ in verdicts(report).values()} == {"PASS"}
    read = report["read"]
    assert (read["orders"], read["outboxEvents"], read["deadLetters"]) == (3, 3, 1)
    assert read["deliveredEvents"] == 3
    assert read["requestCharge"] > 0  # measured from the responses (1 RU each here)


def change(body: dict[str, Any], subject: str, message_id: str) -> OutgoingMessage:
    return OutgoingMessage(message_id, json.dumps(body).encode(), subject=subject)


async def test_a_healthy_lifecycle_passes_every_invariant(relaying: World, audit: Any) -> None:
    """An order amended then cancelled; one created by its amendment, its OrderPlaced late and
    stale; a producer retry under a new MessageId, stale: several events per order, orders
    without an OrderAccepted, stale markers, and every invariant still PASSes."""
    await flow(relaying, "ord-l1")
    relaying.queue.send(change(amended_body("ord-l1", 2), "OrderAmended", "ord-l1:v2"))
    relaying.queue.send(change(amended_body("ord-l2", 3), "OrderAmended", "ord-l2:v3"))
    await relaying.host.run_until_idle()
    relaying.queue.send(change(cancelled_body("ord-l1", 3), "OrderCancelled", "ord-l1:v3"))
    relaying.queue.send(change(amended_body("ord-l1", 2), "OrderAmended", "ord-l1:v2:retry"))
    relaying.queue.send(message(order_body("ord-l2"), message_id="ord-l2"))
    await relaying.host.run_until_idle()
    await relaying.change_feed.drain()

    code, report = audit("--subscription", RETAINED_SUBSCRIPTION)

    assert code == 0, report
    assert {v for v, _ in verdicts(report).values()} == {"PASS"}
    read = report["read"]
    # ord-l1: OrderAccepted v1, OrderAmended v2, OrderCancelled v3; ord-l2: OrderAmended v3.
    assert (read["orders"], read["outboxEvents"], read["deliveredEvents"]) == (2, 4, 4)
    assert read["markers"] == 5  # l1:v2, l1:v3, the stale retry; l2:v3, the stale OrderPlaced


async def test_each_broken_invariant_fails_with_the_id_that_breaks_it(
    relaying: World, audit: Any, container: ContainerProxy, clock: ManualClock
) -> None:
    await flow(relaying, "ord-b1", "ord-b2")
    # a stranger: an order stored under another MessageId
    stranger, _ = accepted("ord-b3")
    await container.create_item({**stranger, "messageId": "something-else"})
    # an outbox event left pending for an hour, for which nothing was delivered
    _, pending = accepted("ord-b4")
    await container.create_item(
        {**pending, "createdAt": (clock.now() - timedelta(hours=1)).isoformat()}
    )
    # an event delivered for an order nobody stored
    relaying.topic.subscription.send(
        OutgoingMessage("e-ghost", json.dumps({"payload": {"orderId": "ord-ghost"}}).encode())
    )
    # a dead letter without a reason
    relaying.queue.send(message(b"{}", message_id="m-noreason"))
    [delivery] = relaying.queue.receive(1)
    relaying.queue.dead_letter(delivery.lock_token)

    # a marker of an order nobody stored
    await container.create_item(
        {
            "id": "inbox:orders:ord-b5:v2",
            "orderId": "ord-b5",
            "type": "inbox",
            "messageId": "ord-b5:v2",
            "orderVersion": 2,
            "outcome": "processed",
        }
    )

    code, report = audit("--subscription", RETAINED_SUBSCRIPTION)

    assert code == 1
    assert verdicts(report) == {
        "one order document per valid order id": ("FAIL", ["ord-b3"]),
        "exactly one event per applied version, in increasing versions": ("FAIL", ["ord-b3"]),
        "no event for a rejected message or above its order's version": (
            "FAIL",
            ["ord-b4", "ord-ghost"],
        ),
        "every inbox marker of a stored order, processed or stale, at or below it": (
            "FAIL",
            ["ord-b5/ord-b5:v2"],
        ),
        "no outbox event left pending or parked": ("FAIL", ["ord-b4"]),
        "every dead letter with its reason": ("FAIL", [f"m-noreason#{delivery.sequence_number}"]),
    }


async def test_an_order_accepted_just_before_until_whose_event_is_dispatched_after_it_passes(
    relaying: World, audit: Any, container: ContainerProxy
) -> None:
    """The relay's dispatch patch rewrites the event's ``_ts``: read by its order's window, not
    its own. Fails with the window's outbox events selected by ``_ts`` alone ("1 without an
    outbox event")."""
    relaying.queue.send(message(order_body("ord-e1"), message_id="ord-e1"))
    await relaying.host.run_until_idle()  # accepted: the order and its pending event
    accepted_ts = (await container.read_item("ord-e1", partition_key="ord-e1"))["_ts"]
    until = datetime.fromtimestamp(accepted_ts + 1, UTC)  # the order is in [since, until)
    await asyncio.sleep(max(0.0, until.timestamp() - time.time()))  # _ts counts seconds
    await relaying.change_feed.drain()  # dispatched at or after --until
    event = await container.read_item(outbox_document_id("ord-e1"), partition_key="ord-e1")
    assert (event["status"], event["_ts"] >= until.timestamp()) == ("dispatched", True)

    code, report = audit("--until", until.isoformat(), "--subscription", RETAINED_SUBSCRIPTION)

    assert code == 0, report
    assert {v for v, _ in verdicts(report).values()} == {"PASS"}
    assert (report["read"]["orders"], report["read"]["outboxEvents"]) == (1, 1)


async def test_events_pending_within_the_grace_pass_the_delivery_check_and_past_it_fail(
    relaying: World, audit: Any, clock: ManualClock
) -> None:
    """On live traffic the last seconds' events are still pending: not "without a delivered
    event" while they are within ``--pending-grace``; past it, that and "left pending" FAIL. A
    dispatched event missing from the subscription FAILs at once, grace or not. Fails with no
    grace in the delivery check."""
    await flow(relaying, "ord-g1", "ord-g2")  # delivered
    for order_id in ("ord-g3", "ord-g4"):  # accepted, not yet relayed
        relaying.queue.send(message(order_body(order_id), message_id=order_id))
    await relaying.host.run_until_idle()
    grace = ("--subscription", RETAINED_SUBSCRIPTION, "--pending-grace", "5m")

    code, report = audit(*grace)

    assert code == 0, report
    [row] = [r for r in report["invariants"] if r["name"] == ONE_EVENT_PER_ORDER]
    assert row["detail"] == "4 orders, 4 outbox events, 2 delivered, 2 pending within 0:05:00"

    relaying.topic.delivered()  # downstream consumed ord-g1's and ord-g2's events
    code, report = audit(*grace)

    assert code == 1
    rows = verdicts(report)
    assert rows[ONE_EVENT_PER_ORDER] == ("FAIL", ["ord-g1", "ord-g2"])  # dispatched, not there
    assert rows[NOTHING_PENDING] == ("PASS", [])

    clock.advance(timedelta(minutes=6))  # past the grace: the relay should have published them
    code, report = audit(*grace)

    assert code == 1
    rows = verdicts(report)
    assert rows[ONE_EVENT_PER_ORDER] == ("FAIL", ["ord-g1", "ord-g2", "ord-g3", "ord-g4"])
    assert rows[NOTHING_PENDING] == ("FAIL", ["ord-g3", "ord-g4"])


async def test_an_audit_while_orders_flow_continuously_passes(relaying: World, audit: Any) -> None:
    """Steady load: orders accepted, relayed and delivered without pause while three audits
    read the window (default --until, now), each in its own thread as an operator's would run
    against a live deployment. Each PASSes: no order of the last seconds is reported without its
    event or its delivery."""
    stop = asyncio.Event()

    async def steady_load() -> int:
        sent = 0
        while not stop.is_set():
            for _ in range(3):
                order_id = f"ord-s{sent:05d}"
                relaying.queue.send(message(order_body(order_id), message_id=order_id))
                sent += 1
            await relaying.host.run_until_idle()
            await asyncio.sleep(0.05)  # accepted, not yet relayed: pending for a moment
            await relaying.change_feed.drain()
        return sent

    load = asyncio.create_task(steady_load())
    reports: list[tuple[int, dict[str, Any]]] = []
    try:
        while len(reports) < 3:
            await asyncio.sleep(0.3)
            reports.append(await asyncio.to_thread(audit, "--subscription", RETAINED_SUBSCRIPTION))
    finally:
        stop.set()
        sent = await load

    for code, report in reports:
        assert code == 0, [i for i in report["invariants"] if i["verdict"] == "FAIL"]
    assert 0 < reports[0][1]["read"]["orders"] < reports[-1][1]["read"]["orders"] <= sent


async def test_without_a_subscription_the_outbox_is_the_evidence(
    relaying: World, audit: Any
) -> None:
    await flow(relaying, "ord-c1")

    code, report = audit()

    assert code == 0
    assert report["read"]["deliveredEvents"] is None


def test_the_window_is_bounded_by_the_outbox_expiry() -> None:
    out = io.StringIO()
    assert main(["audit", "--since", "8d"], audit=object(), out=out) == 2  # type: ignore[arg-type]
    assert "more than 7 days" in out.getvalue()


async def test_an_audit_too_large_for_its_bound_stops_with_exit_2(
    relaying: World, world: World, namespace: LocalNamespace, app_env: dict[str, str]
) -> None:
    await flow(relaying, "ord-d1", "ord-d2")
    small = CosmosAuditReader(
        container_client(
            app_env["COSMOS_ENDPOINT"],
            app_env["COSMOS_DATABASE"],
            app_env["COSMOS_CONTAINER"],
            key=app_env["COSMOS_KEY"],
            verify_tls=False,
        ),
        max_documents=3,
    )
    out = io.StringIO()

    code = main(
        ["audit", "--since", "1h"],
        queue=LocalDeadLetterQueue(world.queue, namespace),
        audit=small,
        out=out,
    )

    assert code == 2
    assert "more than 3 documents" in out.getvalue()
