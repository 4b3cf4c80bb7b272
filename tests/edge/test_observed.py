"""What each answer of the public edge's core reports (``shared.edge.observer``): its outcome,
in the bounded vocabulary, beside the status the client sees, and for a replay the age of the
key's record (now - its ``startedAt``), on every path of ``OrdersEdge``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from idempotent_consumer import TransientStoreError
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from shared.edge import OrdersEdge, SendFailed
from shared.edge.observer import RequestOutcome
from shared.edge.requests import KEY_EXPIRY, order_id_for
from shared.edge.responses import EdgeResponse
from tests.edge.conftest import (
    CLIENT,
    PAST_THE_WINDOW,
    RecordingSender,
    amend_body,
    cancel_body,
    place_body,
)
from tests.edge.test_core import _AlwaysOvertaken

ORDER = order_id_for(CLIENT, "key-1")


def reported(answer: EdgeResponse) -> tuple[int, RequestOutcome, float | None]:
    return answer.status, answer.outcome, answer.record_age_s


async def test_a_place_is_created_and_its_repeat_replayed_with_its_record_s_age(
    memory_edge: OrdersEdge, clock: ManualClock
) -> None:
    first = await memory_edge.place(CLIENT, "key-1", place_body())
    clock.advance(timedelta(minutes=7))
    repeat = await memory_edge.place(CLIENT, "key-1", place_body())
    clock.advance(timedelta(hours=2))
    later = await memory_edge.place(CLIENT, "key-1", place_body())

    assert reported(first) == (201, RequestOutcome.CREATED, None)
    assert reported(repeat) == (201, RequestOutcome.REPLAYED, 7 * 60.0)
    assert reported(later) == (201, RequestOutcome.REPLAYED, 7 * 60.0 + 2 * 3600.0)


async def test_a_change_is_created_and_its_repeat_replayed(
    memory_edge: OrdersEdge, clock: ManualClock
) -> None:
    await memory_edge.place(CLIENT, "key-1", place_body())
    amended = await memory_edge.amend(CLIENT, "key-2", ORDER, amend_body(), '"1"')
    clock.advance(timedelta(seconds=30))
    amended_again = await memory_edge.amend(CLIENT, "key-2", ORDER, amend_body(), '"1"')
    cancelled = await memory_edge.cancel(CLIENT, "key-3", ORDER, cancel_body())

    assert reported(amended) == (200, RequestOutcome.CREATED, None)
    assert reported(amended_again) == (200, RequestOutcome.REPLAYED, 30.0)
    assert reported(cancelled) == (200, RequestOutcome.CREATED, None)


async def test_the_key_s_conflicts_are_in_progress_key_reused_and_order_exists(
    memory_edge: OrdersEdge, sender: RecordingSender, clock: ManualClock
) -> None:
    sender.hold = asyncio.Event()
    first = asyncio.create_task(memory_edge.place(CLIENT, "key-1", place_body()))
    await sender.holding.wait()
    concurrent = await memory_edge.place(CLIENT, "key-1", place_body())
    sender.hold.set()
    await first
    reused = await memory_edge.place(CLIENT, "key-1", place_body(currency="USD"))
    clock.advance(KEY_EXPIRY)
    expired = await memory_edge.place(CLIENT, "key-1", place_body())

    assert reported(concurrent) == (409, RequestOutcome.IN_PROGRESS, None)
    assert reported(reused) == (422, RequestOutcome.KEY_REUSED, None)
    assert reported(expired) == (409, RequestOutcome.ORDER_EXISTS, None)


async def test_a_change_refused_is_not_found_version_mismatch_or_cancelled(
    memory_edge: OrdersEdge,
) -> None:
    unknown = await memory_edge.amend(CLIENT, "key-9", "ord-unknown", amend_body())
    await memory_edge.place(CLIENT, "key-1", place_body())
    stale = await memory_edge.amend(CLIENT, "key-2", ORDER, amend_body(), '"7"')
    await memory_edge.cancel(CLIENT, "key-3", ORDER, cancel_body())
    after_cancel = await memory_edge.amend(CLIENT, "key-4", ORDER, amend_body())

    assert reported(unknown) == (404, RequestOutcome.NOT_FOUND, None)
    assert reported(stale) == (412, RequestOutcome.VERSION_MISMATCH, None)
    assert reported(after_cancel) == (409, RequestOutcome.CANCELLED, None)


async def test_a_bad_request_is_invalid(memory_edge: OrdersEdge) -> None:
    answers = [
        await memory_edge.place(CLIENT, None, place_body()),
        await memory_edge.place(CLIENT, "", place_body()),
        await memory_edge.place(CLIENT, "key-1", ["not", "an", "object"]),
        await memory_edge.place(CLIENT, "key-1", place_body(orderId="mine")),
        await memory_edge.place(CLIENT, "key-1", place_body(currency="euro")),
        await memory_edge.amend(CLIENT, "key-2", ORDER, amend_body(), "v1"),
    ]

    assert [reported(answer) for answer in answers] == [(400, RequestOutcome.INVALID, None)] * 6


async def test_the_api_failing_is_not_sent_unavailable_or_contention(
    memory_store: InMemoryDocumentStore, sender: RecordingSender, clock: ManualClock
) -> None:
    edge = OrdersEdge(memory_store, sender, clock)
    sender.fail_next = [SendFailed()]
    not_sent = await edge.place(CLIENT, "key-1", place_body())
    memory_store.fail_next = [TransientStoreError("injected")]
    unavailable = await edge.place(CLIENT, "key-2", place_body())
    overtaken = await OrdersEdge(_AlwaysOvertaken(memory_store), sender, clock).amend(
        CLIENT, "key-3", ORDER, amend_body()
    )

    assert reported(not_sent) == (503, RequestOutcome.NOT_SENT, None)
    assert reported(unavailable) == (503, RequestOutcome.UNAVAILABLE, None)
    assert reported(overtaken) == (503, RequestOutcome.CONTENTION, None)


async def test_a_recorded_intent_finished_by_its_retry_is_replayed_with_its_age(
    memory_edge: OrdersEdge, sender: RecordingSender, clock: ManualClock
) -> None:
    """The first handling recorded the intent and the queue refused its message: the retry
    past the in-progress window sends it and replays the recorded answer."""
    sender.fail_next = [SendFailed()]
    await memory_edge.place(CLIENT, "key-1", place_body())
    clock.advance(PAST_THE_WINDOW)

    retried = await memory_edge.place(CLIENT, "key-1", place_body())

    assert reported(retried) == (201, RequestOutcome.REPLAYED, PAST_THE_WINDOW.total_seconds())
    assert sender.message_ids() == [ORDER]
