"""Outbox documents the consumer never writes, but an operator's edit or another producer may:
an order id that differs from its payload's (and is long), optional fields that are empty or
not text; and the retry message of a batch with many unfinished events. What is checked is
what an operator or a downstream consumer sees: the parked description, the message's
properties at the subscription, the invocation's error as the worker reports it.

What each test kills (``make mutation``): ``build_event``'s bound on the echoed order id,
``_optional_text`` letting an empty or non-text value through (an empty ``causationId`` or
correlation id on the message), ``_raise_if_incomplete``'s separator and bound.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import OperationTimeoutError
from idempotent_consumer import bound

from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from shared.relay.core import PARKED_INVALID_EVENT
from tests.relay.conftest import accept_order, new_order_ids, outbox_by_order


async def test_an_order_id_that_differs_from_the_payload_s_is_parked_and_shown_bounded(
    container: ContainerProxy, change_feed: ChangeFeedEmulator, clock: ManualClock
) -> None:
    [order_id] = new_order_ids(1)
    _, event = await accept_order(container, order_id, accepted_at=clock.now())
    await container.delete_item(event["id"], partition_key=order_id)
    long_id = f"{order_id}-" + "x" * 150  # another partition: a copy an editor misplaced
    await container.create_item({**event, "id": f"{long_id}:OrderAccepted", "orderId": long_id})

    await change_feed.drain()

    parked = (await outbox_by_order(container))[long_id]
    assert parked["status"] == "parked"
    assert parked["parkedReason"] == PARKED_INVALID_EVENT
    assert parked["parkedDescription"] == (
        f"outbox document's orderId {bound(long_id, 80)!r} differs from its payload's {order_id!r}"
    )


async def test_empty_or_non_text_optional_fields_stay_off_the_message(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    empty, number = new_order_ids(2)
    edits: dict[str, dict[str, Any]] = {
        empty: {"causationId": "", "correlationId": "", "traceparent": ""},
        number: {"causationId": 42, "correlationId": 7, "traceparent": 1},
    }
    for order_id, edit in edits.items():
        _, event = await accept_order(container, order_id, accepted_at=clock.now())
        await container.replace_item(event["id"], {**event, **edit})

    await change_feed.drain()

    delivered = topic.delivered()
    assert len(delivered) == 2
    for message in delivered:
        assert message.correlation_id is None
        assert set(message.application_properties) == {"eventType", "schemaVersion", "traceparent"}
        # The relay's own publish span, not the document's value.
        assert str(message.application_properties["traceparent"]).startswith("00-")


async def test_a_batch_with_many_unsent_events_names_them_in_a_bounded_message(
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    ids = new_order_ids(12)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(timedelta(seconds=1))
    topic.fail_next_sends(lambda: OperationTimeoutError(message="timed out"))
    batch = await change_feed.read_changes()

    result = await change_feed.invoke(batch)

    assert not result.succeeded
    assert result.error is not None
    document_ids = [d["id"] for d in batch if d["type"] == "outbox"]
    assert len(", ".join(document_ids)) > 300
    assert result.error.endswith(
        "12 outbox event(s) not published and 0 not marked, retrying the batch: "
        + bound(", ".join(document_ids), 300)
    )
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"pending"}
