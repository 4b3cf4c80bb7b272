"""What is parked (and seen by an operator) and what is retried without bound."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessagingEntityNotFoundError

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
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids
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


async def test_an_unclassified_failure_is_parked_after_the_bound(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: RuntimeError("unheard of"), times=1000)

    stats = await change_feed.drain(max_attempts_per_batch=30)

    assert not stats.stalled
    assert stats.failed_invocations == RelayPolicy().park_after_attempts - 1
    parked = await outbox_of(container, order_id)
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_RETRIES_EXHAUSTED
    assert "attempt 10" in parked["parkedDescription"]
    assert topic.delivered() == []
