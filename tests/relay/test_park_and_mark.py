"""The relay's updates of an outbox document (``OutboxRelay._mark_dispatched`` and ``_park`` over
``CosmosOutboxStore``), as an operator sees the documents: each conditional on the version the
change feed delivered, each failure retried, never skipped; what they write (``dispatchedAt``,
``parkedAt``, the reason, the ``ttl``); the parked reasons the runbook names; the dispatched ttl
held against the topic's duplicate detection; a publisher that loses results.

Through the world's change-feed emulation and Microsoft's worker, the app's Cosmos client on a
fault-injecting transport (``relay_cosmos_options``) and the topic model as the sender. A batch
read before a concurrent change and delivered after it is how the change feed and the watchdog
race (both read, both publish; shared/relay/watchdog.py) and how an operator's fix meets a replay.

What each test kills (``make mutation``): a park without the delivered etag (unconditional: it
overwrites the newer version), a failed park reported as nothing or as ``None`` (the batch would
be checkpointed past a pending document, or fail with a ``TypeError`` naming nothing), the
``parkedAt``/``dispatchedAt``/``ttl`` values, the parked reasons renamed, ``DISPATCHED_TTL_S``
shorter than a tier's duplicate-detection window, ``zip(strict=True)`` over the publisher's
results relaxed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessageSizeExceededError
from idempotent_consumer import document_timestamp

from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.standins.topic import OrderEventsTopic
from ops.durations import parse_iso8601_duration
from shared.adapters.cosmos_outbox import CosmosOutboxStore
from shared.adapters.servicebus_out import ServiceBusEventPublisher
from shared.relay.core import (
    PARKED_INVALID_EVENT,
    PARKED_REJECTED,
    PARKED_RETRIES_EXHAUSTED,
    OutboundEvent,
    OutboxRelay,
)
from shared.relay.outbox import DISPATCHED_TTL_S
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def faults() -> FaultInjectingTransport:
    return FaultInjectingTransport(connection_verify=False)


@pytest.fixture
def relay_cosmos_options(faults: FaultInjectingTransport) -> dict[str, Any]:
    return {"transport": faults}


def too_large() -> BaseException:
    # What the SDK raises for a message the entity refuses: the relay parks it at once.
    return MessageSizeExceededError(message="injected: the message exceeds the entity's limit")


async def mark_as_the_watchdog_did(container: ContainerProxy, document: dict[str, Any]) -> None:
    await container.patch_item(
        document["id"],
        partition_key=document["orderId"],
        patch_operations=[
            {"op": "set", "path": "/status", "value": "dispatched"},
            {"op": "set", "path": "/dispatchedAt", "value": "2026-11-29T12:00:01.000000Z"},
            {"op": "set", "path": "/ttl", "value": DISPATCHED_TTL_S},
        ],
    )


async def test_a_park_never_overwrites_a_mark_made_since_the_batch_was_read(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()
    await mark_as_the_watchdog_did(container, (await outbox_by_order(container))[order_id])
    topic.fail_next_sends(too_large)

    result = await change_feed.invoke(batch)  # the stale version is refused by the broker

    assert result.succeeded  # nothing left to do: the document changed since it was read
    stored = (await outbox_by_order(container))[order_id]
    assert stored["status"] == "dispatched"
    assert "parkedReason" not in stored
    assert captured_relay.total("orders.relay.parked") == 0


async def test_an_invalid_event_s_park_never_overwrites_an_operator_s_fix(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    await container.replace_item(
        event["id"], {**event, "payload": {**event["payload"], "currency": "euro"}}
    )
    stale = await change_feed.read_changes()  # the broken version
    await container.replace_item(event["id"], event)  # the operator's fix, meanwhile

    result = await change_feed.invoke(stale)

    assert result.succeeded
    fixed = (await outbox_by_order(container))[order_id]
    assert fixed["status"] == "pending"
    assert fixed["payload"]["currency"] == event["payload"]["currency"]
    # The fixed version's own change is then published.
    await change_feed.drain()
    assert (await outbox_by_order(container))[order_id]["status"] == "dispatched"
    assert [m.message_id for m in topic.delivered()] == [event["eventId"]]


async def test_a_failed_park_retries_the_batch_naming_it_and_the_others_are_marked(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    faults: FaultInjectingTransport,
) -> None:
    good, bad = new_order_ids(2)
    await accept_order(container, good, accepted_at=clock.now())
    _, event = await accept_order(container, bad, accepted_at=clock.now())
    await container.replace_item(event["id"], {**event, "eventType": "OrderAccepted", "payload": 1})
    faults.add(FaultRule(FaultKind.STATUS, method="PATCH", path_contains=bad, status=403))
    batch = await change_feed.read_changes()

    first = await change_feed.invoke(batch)

    assert not first.succeeded
    assert first.error is not None
    assert "RelayIncomplete" in first.error
    assert "1 outbox event(s) not published and 0 not marked" in first.error
    assert event["id"] in first.error
    stored = await outbox_by_order(container)
    assert stored[good]["status"] == "dispatched"
    assert stored[bad]["status"] == "pending"  # not parked, not skipped: it comes back

    clock.advance(timedelta(seconds=7))
    second = await change_feed.invoke(batch, retry_count=1)

    assert second.succeeded
    parked = (await outbox_by_order(container))[bad]
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_INVALID_EVENT
    assert parked["parkedAt"] == document_timestamp(clock.now())
    assert "payload" in parked["parkedDescription"]
    assert [m.message_id for m in topic.delivered()] == [stored[good]["eventId"]]


async def test_an_event_the_broker_refuses_is_parked_with_when_and_why(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(timedelta(seconds=3))
    topic.fail_next_sends(too_large)

    stats = await change_feed.drain()

    assert stats.failed_invocations == 0
    parked = (await outbox_by_order(container))[order_id]
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_REJECTED
    assert parked["parkedAt"] == document_timestamp(clock.now())
    assert parked["parkedDescription"] == (
        "EventRejected: injected: the message exceeds the entity's limit"
    )
    assert "ttl" not in parked and "dispatchedAt" not in parked
    assert topic.delivered() == []


def runbook_parked_reasons() -> dict[str, str]:
    """The reasons docs/operations.md's "Relay: parked event" names, by case."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("### Relay: parked event", 1)[1].split("\n### ", 1)[0]
    flat = " ".join(section.split())
    patterns = {
        "invalid": r"no valid v1 event \(`parkedReason` `(\w+)`\)",
        "rejected": r"too large: `(\w+)`\)",
        "exhausted": r"unclassified reason \(`(\w+)`\)",
    }
    found = {case: re.search(pattern, flat) for case, pattern in patterns.items()}
    assert all(found.values()), found
    return {case: match.group(1) for case, match in found.items() if match}


def test_the_parked_reasons_are_the_names_the_runbook_gives_the_operator() -> None:
    # The operator filters on them: `python -m ops parked republish --reason <parkedReason>`.
    assert runbook_parked_reasons() == {
        "invalid": PARKED_INVALID_EVENT,
        "rejected": PARKED_REJECTED,
        "exhausted": PARKED_RETRIES_EXHAUSTED,
    }


async def test_a_dispatched_event_outlives_every_tier_s_duplicate_detection_window(
    container: ContainerProxy, change_feed: ChangeFeedEmulator, clock: ManualClock
) -> None:
    # The topic drops a republished copy only within its window; beyond it, the dispatched
    # document is what tells an operator what was sent. The window per tier is
    # infra/messaging.json's; its override may reach Service Bus's maximum, 7 days
    # (infra/app/servicebus.bicep, "Service Bus allows 20 seconds to 7 days").
    messaging = json.loads((REPO / "infra" / "messaging.json").read_text())
    windows = [
        parse_iso8601_duration(messaging["duplicateDetectionHistoryTimeWindow"]),
        parse_iso8601_duration(messaging["premiumDuplicateDetectionHistoryTimeWindow"]),
        timedelta(days=7),
    ]
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(timedelta(seconds=4))

    await change_feed.drain()

    dispatched = (await outbox_by_order(container))[order_id]
    assert dispatched["status"] == "dispatched"
    assert dispatched["dispatchedAt"] == document_timestamp(clock.now())
    assert all(timedelta(seconds=dispatched["ttl"]) >= window for window in windows)


class LosesTheLastResult:
    """A publisher adapter that breaks the port's promise (one result per event, aligned)."""

    def __init__(self, publisher: ServiceBusEventPublisher) -> None:
        self._publisher = publisher

    async def publish(self, events: Sequence[OutboundEvent]) -> list[BaseException | None]:
        return (await self._publisher.publish(events))[:-1]


async def test_a_publisher_that_returns_fewer_results_than_events_loses_none_of_them(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    for order_id in new_order_ids(2):
        await accept_order(container, order_id, accepted_at=clock.now())
    relay = OutboxRelay(
        LosesTheLastResult(ServiceBusEventPublisher(topic)),
        CosmosOutboxStore(container),
        captured_relay.telemetry,
        clock=clock,
    )

    with pytest.raises(ValueError, match="zip"):
        await relay.relay(await change_feed.read_changes())  # fails: the batch comes back

    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}


async def test_an_invocation_s_report_names_what_it_published_and_what_it_parked(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    """The ``RelayReport`` of one invocation (the watchdog keeps one per relay call), by
    outbox document id, in batch order."""
    ids = new_order_ids(2)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    outbox = await outbox_by_order(container)
    topic.fail_sends_of(outbox[ids[1]]["eventId"], too_large)
    relay = OutboxRelay(
        ServiceBusEventPublisher(topic),
        CosmosOutboxStore(container),
        captured_relay.telemetry,
        clock=clock,
    )

    report = await relay.relay(await change_feed.read_changes())

    assert report.published == [outbox[ids[0]]["id"]]
    assert report.parked == [outbox[ids[1]]["id"]]
    assert report.retry == [] and report.mark_failed == []
