"""What is parked (and seen by an operator) and what is retried without bound."""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus._pyamqp.error import ErrorCondition
from azure.servicebus.exceptions import MessagingEntityNotFoundError

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from shared.relay.core import (
    PARKED_INVALID_EVENT,
    PARKED_RETRIES_EXHAUSTED,
    EventRejected,
    FailureKind,
    PublishMisconfigured,
    PublishUnavailable,
    RelayPolicy,
    classify,
)
from tests.conftest import FAST_SDK_BACKOFF
from tests.relay.amqp_link import service_bus_error
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order
from tests.state import documents


@pytest.mark.parametrize(
    ("error", "kind", "parked_at"),
    [
        (EventRejected("too large"), FailureKind.EVENT, 1),
        (PublishUnavailable("timeout"), FailureKind.TRANSIENT, None),
        (PublishMisconfigured("403"), FailureKind.SYSTEMIC, None),
        (RuntimeError("?"), FailureKind.UNEXPECTED, 10),
    ],
)
def test_only_the_event_s_own_faults_and_unclassified_errors_are_ever_parked(
    error: BaseException, kind: FailureKind, parked_at: int | None
) -> None:
    policy = RelayPolicy()
    assert classify(error) is kind
    verdicts = [policy.should_park(kind, attempt) for attempt in range(1, 1001)]
    first = verdicts.index(True) + 1 if True in verdicts else None
    assert first == parked_at


async def outbox_of(container: ContainerProxy, order_id: str) -> dict[str, Any]:
    [document] = [
        d for d in await documents(container) if d["type"] == "outbox" and d["orderId"] == order_id
    ]
    return document


async def test_an_outbox_document_that_is_no_valid_event_is_parked_loudly_not_skipped(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, bad = new_order_ids(2)
    await accept_order(container, good, accepted_at=clock.now())
    _, event = await accept_order(container, bad, accepted_at=clock.now())
    broken = {**event, "payload": {**event["payload"], "currency": "euro"}}
    await container.replace_item(broken["id"], broken)

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        stats = await change_feed.drain()

    assert stats.failed_invocations == 0  # the good event is not held back by the bad one
    parked = await outbox_of(container, bad)
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_INVALID_EVENT
    assert "payload.currency" in parked["parkedDescription"]
    assert "ttl" not in parked  # stays until an operator acts
    assert [m.message_id for m in topic.delivered()] == [
        (await outbox_of(container, good))["eventId"]
    ]
    assert captured_relay.total("orders.relay.parked") == 1
    [critical] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical.name == "orders.relay"
    assert getattr(critical, "parked_reason", None) == PARKED_INVALID_EVENT

    # The operator fixes it and resets the status: the change feed delivers it again.
    fixed = {**parked, "status": "pending", "payload": event["payload"]}
    await container.replace_item(fixed["id"], fixed)
    await change_feed.drain()
    assert (await outbox_of(container, bad))["status"] == "dispatched"
    assert len(topic.delivered()) == 1


async def test_a_systemic_failure_is_retried_without_bound_and_never_parks(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: MessagingEntityNotFoundError(message="no topic"), times=1000)

    with caplog.at_level(logging.ERROR, logger="orders.relay"):
        stats = await change_feed.drain(max_attempts_per_batch=30)

    assert stats.stalled
    assert (await outbox_of(container, order_id))["status"] == "pending"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 30
    assert {getattr(r, "error_type", None) for r in errors} == {"MessagingEntityNotFoundError"}


async def test_only_the_event_that_fails_alone_is_parked_and_the_rest_of_its_batch_go_on(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """Six events in one batch, one of which the broker refuses every time (a condition nobody
    classified, ``amqp:decode-error``), alone or with the others. Fails on 95191bf: the refused
    batch was charged to all six, and at the runtime's tenth attempt all six were parked."""
    ids = new_order_ids(6)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    poison = (await outbox_by_order(container))[ids[2]]["eventId"]
    topic.fail_sends_of(poison, lambda: service_bus_error(ErrorCondition.DecodeError))

    stats = await change_feed.drain(max_attempts_per_batch=30)

    assert not stats.stalled
    assert stats.failed_invocations == RelayPolicy().park_after_attempts - 1
    outbox = await outbox_by_order(container)
    parked = outbox[ids[2]]
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_RETRIES_EXHAUSTED
    assert "amqp:decode-error" in parked["parkedDescription"]
    assert "10 failures of this event sent alone" in parked["parkedDescription"]
    healthy = [i for i in ids if i != ids[2]]
    assert {outbox[i]["status"] for i in healthy} == {"dispatched"}
    # Published on the first invocation, once each downstream (the retries' copies dropped).
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        outbox[i]["eventId"] for i in healthy
    )
    assert captured_relay.total("orders.relay.parked") == 1


async def test_a_long_outage_then_a_stolen_link_parks_nothing(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """The issue's reproduction: nine invocations fail on an outage (about 25 minutes of the
    retry policy's backoff), then one send fails with the plain, non-retryable
    ``ServiceBusError`` the SDK raises for ``amqp:link:stolen``. Fails on 95191bf: the three
    events were parked ``RetriesExhausted ... (attempt 10)`` and never published."""
    ids = new_order_ids(3)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    outage = partial(service_bus_error, ErrorCondition.SocketError, on="connection")
    topic.fail_next_sends(outage, times=9)
    topic.fail_next_sends(partial(service_bus_error, ErrorCondition.LinkStolen), times=1)

    stats = await change_feed.drain(max_attempts_per_batch=30)

    assert not stats.stalled
    assert stats.failed_invocations == 10
    outbox = await outbox_by_order(container)
    assert {outbox[i]["status"] for i in ids} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        outbox[i]["eventId"] for i in ids
    )
    assert captured_relay.total("orders.relay.parked") == 0


@pytest.mark.parametrize(
    ("condition", "error_type"),
    [
        (ErrorCondition.ResourceDeleted, "ServiceBusError"),  # the topic deleted under the link
        (ErrorCondition.UnauthorizedAccess, "ServiceBusAuthorizationError"),
    ],
)
async def test_a_deleted_topic_or_a_refused_authorization_is_systemic_and_never_parks(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    condition: ErrorCondition,
    error_type: str,
) -> None:
    """Every send refused for the system, far past the parking bound: the batch fails every
    invocation and is never checkpointed past; nothing parked. Fails on 95191bf for
    ``amqp:resource-deleted`` (unclassified: parked at the tenth attempt)."""
    ids = new_order_ids(3)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(partial(service_bus_error, condition), times=1000)

    stats = await change_feed.drain(max_attempts_per_batch=30)

    assert stats.stalled and stats.failed_invocations == 30  # the lease does not move
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}
    assert captured_relay.total("orders.relay.parked") == 0
    [failed] = captured_relay.points("orders.relay.failed")
    assert failed.attributes is not None and failed.attributes["error.type"] == error_type
    assert getattr(failed, "value", None) == 30 * 3


async def test_the_watchdog_publishes_the_rest_of_its_page_and_parks_only_the_failing_event(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    """The watchdog relays every run as a first attempt; one event of its page refused every
    time (unclassified) must neither block the others nor stay pending for ever. Fails on
    95191bf: every run failed the whole page, and nothing of it was ever published."""
    ids = new_order_ids(4)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    await world.recreate_leases(start_from_beginning=False).drain()  # the feed skips them
    poison = (await outbox_by_order(container))[ids[1]]["eventId"]
    topic.fail_sends_of(poison, lambda: service_bus_error(ErrorCondition.InvalidField))
    clock.advance(timedelta(minutes=6))
    healthy = [i for i in ids if i != ids[1]]

    first = await world.watchdog.tick()

    assert not first.succeeded  # the refused event stays pending for the next run
    outbox = await outbox_by_order(container)
    assert {outbox[i]["status"] for i in healthy} == {"dispatched"}
    assert outbox[ids[1]]["status"] == "pending"
    runs = [first]
    while len(runs) < RelayPolicy().park_after_attempts:
        clock.advance(timedelta(minutes=5))
        runs.append(await world.watchdog.tick())
    assert [run.succeeded for run in runs] == [False] * 9 + [True]
    parked = (await outbox_by_order(container))[ids[1]]
    assert (parked["status"], parked["parkedReason"]) == ("parked", PARKED_RETRIES_EXHAUSTED)
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        outbox[i]["eventId"] for i in healthy
    )


def compose_with_policy(world: World, captured: RelayCaptured, policy: RelayPolicy) -> None:
    world.compose(
        relay_telemetry=captured.telemetry,
        relay_policy=policy,
        jitter=lambda: 1.0,
        **FAST_SDK_BACKOFF,
    )


async def test_an_event_s_count_kept_within_the_bound_parks_it(
    world: World,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """Room for one event's count is enough for one poison event: parked at its second failure.
    Fails with the bound kept one below ``max_tracked_failures`` (``>=`` for ``>``): its count
    is forgotten as soon as it is made, and it is retried for ever."""
    compose_with_policy(
        world, captured_relay, RelayPolicy(park_after_attempts=2, max_tracked_failures=1)
    )
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    poison = (await outbox_by_order(container))[order_id]["eventId"]
    topic.fail_sends_of(poison, lambda: service_bus_error(ErrorCondition.DecodeError))

    stats = await world.change_feed.drain(max_attempts_per_batch=5)

    assert not stats.stalled and stats.failed_invocations == 1
    assert (await outbox_of(container, order_id))["parkedReason"] == PARKED_RETRIES_EXHAUSTED


async def test_beyond_the_bound_the_oldest_count_is_forgotten_first(
    world: World,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """Two poison events, room for one count: each one's count pushes out the other's (the
    oldest), so neither reaches the bound: the bound delays parking, it never parks early.
    Fails when the newest count is dropped instead: the first event would keep its count and be
    parked on the next invocation, on the second event's failures."""
    compose_with_policy(
        world, captured_relay, RelayPolicy(park_after_attempts=2, max_tracked_failures=1)
    )
    ids = new_order_ids(2)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    outbox = await outbox_by_order(container)
    for order_id in ids:
        topic.fail_sends_of(
            outbox[order_id]["eventId"], lambda: service_bus_error(ErrorCondition.DecodeError)
        )

    stats = await world.change_feed.drain(max_attempts_per_batch=4)

    assert stats.stalled
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}
    assert captured_relay.total("orders.relay.parked") == 0


async def test_the_isolation_stops_at_the_first_send_alone_that_fails_for_the_moment(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """A batch refused for a reason nobody classified, then the link drops: the first event
    sent alone meets the outage, and the other two are not sent alone into it (retried with the
    outage's error, none charged, none parked)."""
    for order_id in new_order_ids(3):
        await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: service_bus_error(ErrorCondition.DecodeError), times=1)
    topic.fail_next_sends(
        partial(service_bus_error, ErrorCondition.SocketError, on="connection"), times=1000
    )

    stats = await change_feed.drain(max_attempts_per_batch=1)

    assert stats.stalled
    assert topic.stats.failed_sends == 2  # the batch, then one event alone
    assert captured_relay.total("orders.relay.parked") == 0
    # Not sent, so not marked: all three are retried.
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}
