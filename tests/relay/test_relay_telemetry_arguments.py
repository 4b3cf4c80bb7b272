"""Every event the relay reports, it reports with its event id and order id: what the runbook's
queries (Q13: parked events and failed sends) join on, and what an operator types next
(``python -m ops parked show <orderId>``). A parked or failed event reported without them is an
alert nobody can act on.

The records are the ``orders.relay`` log records the exporter sends (their ``event_id``,
``order_id``, ``parked_reason``, ``error_type`` attributes become customDimensions), and the
publish spans. Each test fails with one argument of ``OutboxRelay``'s telemetry calls dropped or
replaced (``make mutation``: ``_publish``, ``_mark_dispatched``, ``_park``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessageSizeExceededError, OperationTimeoutError

from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.standins.topic import OrderEventsTopic
from shared.relay.core import PARKED_INVALID_EVENT, PARKED_REJECTED
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order


@pytest.fixture
def faults() -> FaultInjectingTransport:
    return FaultInjectingTransport(connection_verify=False)


@pytest.fixture
def relay_cosmos_options(faults: FaultInjectingTransport) -> dict[str, Any]:
    return {"transport": faults}


def relay_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "orders.relay" and r.levelno == level]


def ids(record: logging.LogRecord) -> tuple[Any, Any]:
    return getattr(record, "event_id", None), getattr(record, "order_id", None)


async def test_an_event_the_broker_refuses_is_reported_failed_and_parked_with_its_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: MessageSizeExceededError(message="too large"))

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    [failed] = relay_records(caplog, logging.ERROR)
    assert ids(failed) == (event["eventId"], order_id)
    assert getattr(failed, "error_type", None) == "MessageSizeExceededError"
    [parked] = relay_records(caplog, logging.CRITICAL)
    assert ids(parked) == (event["eventId"], order_id)
    assert getattr(parked, "parked_reason", None) == PARKED_REJECTED
    stored = (await outbox_by_order(container))[order_id]
    assert getattr(parked, "description", None) == stored["parkedDescription"]
    [span] = captured_relay.send_spans()
    assert span.attributes is not None
    assert span.attributes["orders.event_id"] == event["eventId"]
    assert span.attributes["orders.order_id"] == order_id
    assert span.attributes["orders.relay.outcome"] == "parked"


async def test_a_send_that_failed_for_the_moment_is_reported_with_its_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: OperationTimeoutError(message="timed out"))

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    [failed] = relay_records(caplog, logging.ERROR)
    assert ids(failed) == (event["eventId"], order_id)
    assert getattr(failed, "error_type", None) == "OperationTimeoutError"
    assert relay_records(caplog, logging.CRITICAL) == []


@pytest.mark.parametrize("has_event_id", [True, False])
async def test_an_invalid_document_is_parked_with_its_event_id_or_else_its_document_id(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    has_event_id: bool,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    broken = {**event, "payload": None}
    if not has_event_id:
        del broken["eventId"]
    await container.replace_item(event["id"], broken)

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    [parked] = relay_records(caplog, logging.CRITICAL)
    assert ids(parked) == (event["eventId"] if has_event_id else event["id"], order_id)
    assert getattr(parked, "parked_reason", None) == PARKED_INVALID_EVENT


async def test_a_failed_mark_is_reported_with_its_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    faults: FaultInjectingTransport,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    faults.add(FaultRule(FaultKind.STATUS, method="PATCH", status=403, times=1))

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    [warning] = relay_records(caplog, logging.WARNING)
    assert ids(warning) == (event["eventId"], order_id)
    assert getattr(warning, "error_type", None) == "CosmosHttpResponseError"
    assert (await outbox_by_order(container))[order_id]["status"] == "dispatched"  # the retry


async def test_a_failed_park_is_reported_with_its_ids(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    faults: FaultInjectingTransport,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    topic.fail_next_sends(lambda: MessageSizeExceededError(message="too large"), times=2)
    faults.add(FaultRule(FaultKind.STATUS, method="PATCH", status=403, times=1))

    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.drain()

    [warning] = relay_records(caplog, logging.WARNING)
    assert ids(warning) == (event["eventId"], order_id)
    assert getattr(warning, "error_type", None) == "CosmosHttpResponseError"
    [parked] = relay_records(caplog, logging.CRITICAL)  # by the retry, once
    assert ids(parked) == (event["eventId"], order_id)
    assert (await outbox_by_order(container))[order_id]["status"] == "parked"


async def test_a_replayed_batch_says_which_documents_were_already_marked_or_parked(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent, refused = new_order_ids(2)
    _, sent_event = await accept_order(container, sent, accepted_at=clock.now())
    batch = await change_feed.read_changes()
    await change_feed.invoke(batch)  # marked
    _, refused_event = await accept_order(container, refused, accepted_at=clock.now())
    second = await change_feed.read_changes()
    topic.fail_next_sends(lambda: MessageSizeExceededError(message="too large"))
    await change_feed.invoke(second)  # parked

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="orders.relay"):
        await change_feed.invoke(batch)  # the first version again: its mark is a no-op
        topic.fail_next_sends(lambda: MessageSizeExceededError(message="too large"))
        await change_feed.invoke(second)  # refused again: its park is a no-op

    infos = {r.getMessage(): ids(r) for r in relay_records(caplog, logging.INFO)}
    already_marked = f"outbox document {sent_event['id']} changed since it was read: already marked"
    not_parked = (
        f"outbox document {refused_event['id']} changed since it was read: not parked again"
    )
    assert infos[already_marked] == (sent_event["eventId"], sent)
    assert infos[not_parked] == (refused_event["eventId"], refused)
    assert relay_records(caplog, logging.CRITICAL) == []  # paged once, not twice
