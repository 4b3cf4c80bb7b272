"""Every crash window of a request, then the client's retry: the intent's one MessageId sent
at most once more, and the first answer returned. ``Stopped`` is the instance stopping there:
raised by ``StoppingStore`` around either store, by the in-memory store's scripted failures
(``fail_next``) or by a sender that fails; the queue's refusal is ``SendFailed``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest
from idempotent_consumer import Create, DocumentStore, TransientStoreError, Write
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from shared.edge import OrdersEdge, SendFailed
from shared.edge.requests import HEAD_ID, KEY_EXPIRY, order_id_for, request_id
from shared.edge.responses import EdgeResponse, ProblemType
from tests.edge.conftest import (
    CLIENT,
    PAST_THE_WINDOW,
    RecordingSender,
    Stopped,
    StoppingStore,
    amend_body,
    place_body,
)

ORDER = order_id_for(CLIENT, "key-1")
Call = Callable[[OrdersEdge], Awaitable[EdgeResponse]]


def place(edge: OrdersEdge) -> Awaitable[EdgeResponse]:
    return edge.place(CLIENT, "key-1", place_body())


def amend(edge: OrdersEdge) -> Awaitable[EdgeResponse]:
    return edge.amend(CLIENT, "key-2", ORDER, amend_body(7))


# The call, its MessageId, its answer's status and ETag.
OPERATIONS = {
    "place": (place, ORDER, 201, '"1"'),
    "amend": (amend, f"{ORDER}:v2", 200, '"2"'),
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    "window",
    ["before the batch", "batch committed, answer lost", "before the send", "before the mark"],
)
async def test_a_stop_in_any_window_then_a_retry_sends_the_message_at_most_once_more(
    store: DocumentStore,
    sender: RecordingSender,
    clock: ManualClock,
    operation: str,
    window: str,
) -> None:
    """Over both stores: the stops are ``StoppingStore``'s, around the in-memory store or
    around azure-cosmos (the ambiguous write commits on the server, its answer dropped)."""
    call, message_id, status, tag = OPERATIONS[operation]
    stopping = StoppingStore(store)
    edge = OrdersEdge(stopping, sender, clock)
    if operation == "amend":
        assert (await place(edge)).status == 201
    sent_before = len(sender.sent)
    if window == "before the send":
        sender.fail_next = [Stopped()]
    else:
        stopping.stop = "after the batch" if window.startswith("batch") else window

    with pytest.raises(Stopped):
        await call(edge)
    committed = await store.read(ORDER, request_id(CLIENT, _key(operation)))
    assert (committed is not None) == (window != "before the batch")

    soon = await call(edge)
    if committed is not None:
        # Not marked sent, and too young to be told from a request in progress.
        assert soon.status == 409
        assert soon.body is not None and soon.body["type"] == ProblemType.IDEMPOTENCY_KEY
        clock.advance(PAST_THE_WINDOW)
        soon = await call(edge)

    assert soon.status == status and soon.headers["ETag"] == tag
    clock.advance(PAST_THE_WINDOW)
    assert await call(edge) == soon  # the first answer, replayed
    copies = [m for m in sender.sent[sent_before:] if m.message_id == message_id]
    assert len(sender.sent) - sent_before == len(copies)  # nothing else was sent
    assert 1 <= len(copies) <= (2 if window == "before the mark" else 1)
    assert len({copy.body for copy in copies}) == 1  # every copy the same bytes
    head = await store.read(ORDER, HEAD_ID)
    assert head is not None and head["orderVersion"] == int(tag.strip('"'))
    record = await store.read(ORDER, request_id(CLIENT, _key(operation)))
    assert record is not None and record["sent"] is True


async def test_a_stop_scripted_in_the_stores_requests_then_a_retry_places_once(
    memory_edge: OrdersEdge,
    memory_store: InMemoryDocumentStore,
    sender: RecordingSender,
    clock: ManualClock,
) -> None:
    """The same windows scripted as the in-memory store's failures: its second request (the
    batch) and its third (the sent mark)."""
    memory_store.fail_next = [None, Stopped()]
    with pytest.raises(Stopped):
        await place(memory_edge)
    assert memory_store.documents == {}

    memory_store.fail_next = [None, None, Stopped()]
    with pytest.raises(Stopped):
        await place(memory_edge)
    clock.advance(PAST_THE_WINDOW)
    answer = await place(memory_edge)

    assert answer.status == 201 and sender.message_ids() == [ORDER, ORDER]


def _key(operation: str) -> str:
    return "key-1" if operation == "place" else "key-2"


async def test_a_send_the_queue_refused_is_503_and_the_retry_sends_the_recorded_message(
    memory_edge: OrdersEdge, sender: RecordingSender, clock: ManualClock
) -> None:
    sender.fail_next = [SendFailed("throttled")]

    refused = await place(memory_edge)

    assert refused.status == 503 and int(refused.headers["Retry-After"]) >= 10
    assert sender.sent == []
    clock.advance(PAST_THE_WINDOW)
    answer = await place(memory_edge)
    assert answer.status == 201 and sender.message_ids() == [ORDER]


async def test_a_store_outage_is_503_with_retry_after_and_nothing_is_written(
    memory_edge: OrdersEdge, memory_store: InMemoryDocumentStore, sender: RecordingSender
) -> None:
    memory_store.fail_next = [None, TransientStoreError("throttled", retry_after_s=2.5)]

    answer = await place(memory_edge)

    assert answer.status == 503 and answer.headers["Retry-After"] == "3"
    assert await memory_store.read(ORDER, HEAD_ID) is None and sender.sent == []
    assert (await place(memory_edge)).status == 201


async def test_a_failed_sent_mark_still_answers_and_the_repeat_sends_once_more(
    memory_edge: OrdersEdge,
    memory_store: InMemoryDocumentStore,
    sender: RecordingSender,
    clock: ManualClock,
) -> None:
    memory_store.fail_next = [None, None, TransientStoreError("timeout")]

    first = await place(memory_edge)
    clock.advance(PAST_THE_WINDOW)
    repeat = await place(memory_edge)
    clock.advance(PAST_THE_WINDOW)
    third = await place(memory_edge)

    assert first.status == 201 and repeat == first and third == first
    assert sender.message_ids() == [ORDER, ORDER]


async def test_a_place_after_its_key_expired_is_409_order_exists_and_sends_nothing(
    memory_edge: OrdersEdge, sender: RecordingSender, clock: ManualClock
) -> None:
    await place(memory_edge)
    clock.advance(KEY_EXPIRY)

    late = await place(memory_edge)

    assert late.status == 409 and late.headers["Location"] == f"/api/orders/{ORDER}"
    assert late.body is not None and late.body["type"] == ProblemType.ORDER_EXISTS
    assert sender.message_ids() == [ORDER]


async def test_an_intent_never_sent_keeps_its_key_past_the_expiry_and_its_retry_sends_it(
    memory_store: InMemoryDocumentStore, sender: RecordingSender, clock: ManualClock
) -> None:
    """The record's ttl starts with the sent mark: an unsent intent is never lost to it."""
    stopping = StoppingStore(memory_store)
    edge = OrdersEdge(stopping, sender, clock)
    sender.fail_next = [Stopped()]
    with pytest.raises(Stopped):
        await place(edge)
    clock.advance(KEY_EXPIRY * 2)

    late = await place(edge)

    assert late.status == 201 and sender.message_ids() == [ORDER]
    clock.advance(KEY_EXPIRY)  # answered: now its key expires
    assert (await place(edge)).status == 409


class StoppingAfterTheMark:
    """A store around another whose next sent mark (the first commit that creates nothing) is
    made, then the instance stops before it answers the client: the mark made, the answer lost."""

    def __init__(self, inner: DocumentStore) -> None:
        self.inner = inner
        self.armed = False

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        await self.inner.commit(partition_key, writes)
        if self.armed and not any(isinstance(write, Create) for write in writes):
            self.armed = False
            raise Stopped("after the mark")

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self.inner.read(partition_key, document_id)


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_a_stop_after_the_sent_mark_then_an_immediate_retry_replays_and_sends_nothing(
    store: DocumentStore, sender: RecordingSender, clock: ManualClock, operation: str
) -> None:
    """The last window: everything done, the answer never reached the client. Its retry, at
    once (inside the in-progress window), is the first answer: the sent mark says so."""
    call, message_id, status, tag = OPERATIONS[operation]
    stopping = StoppingAfterTheMark(store)
    edge = OrdersEdge(stopping, sender, clock)
    if operation == "amend":
        assert (await place(edge)).status == 201
    stopping.armed = True

    with pytest.raises(Stopped):
        await call(edge)
    retried = await call(edge)

    assert retried.status == status and retried.headers["ETag"] == tag
    assert [m.message_id for m in sender.sent].count(message_id) == 1  # nothing sent again
    record = await store.read(ORDER, request_id(CLIENT, _key(operation)))
    assert record is not None and record["sent"] is True


@pytest.mark.parametrize(
    "window", ["batch committed, answer lost", "before the send", "before the mark"]
)
@pytest.mark.parametrize("operation", OPERATIONS)
async def test_a_retry_taken_by_another_instance_sends_the_first_instances_message(
    store: DocumentStore, clock: ManualClock, operation: str, window: str
) -> None:
    """Instance A stops in a window; the client's retry lands on instance B (its own edge and
    sender, the same requests container): B finds A's record and sends A's message (its
    MessageId and exact bytes), never one of its own, and answers what A would have."""
    call, message_id, status, tag = OPERATIONS[operation]
    sender_a, sender_b = RecordingSender(), RecordingSender()
    stopping = StoppingStore(store)
    instance_a = OrdersEdge(stopping, sender_a, clock)
    instance_b = OrdersEdge(store, sender_b, clock)
    if operation == "amend":
        assert (await place(instance_a)).status == 201
        sender_a.sent.clear()
    if window == "before the send":
        sender_a.fail_next = [Stopped()]
    else:
        stopping.stop = "after the batch" if window.startswith("batch") else window
    with pytest.raises(Stopped):
        await call(instance_a)
    recorded = await store.read(ORDER, request_id(CLIENT, _key(operation)))
    assert recorded is not None

    soon = await call(instance_b)
    clock.advance(PAST_THE_WINDOW)
    answer = await call(instance_b)

    assert soon.status == 409  # A may still be sending: B does not race it
    assert answer.status == status and answer.headers["ETag"] == tag
    assert [m.message_id for m in sender_b.sent] == [message_id]
    assert sender_b.sent[0].body == str(recorded["messageBody"]).encode()  # A's bytes
    assert all(copy == sender_b.sent[0] for copy in sender_a.sent)  # A's copy, if it sent one
    clock.advance(PAST_THE_WINDOW)
    assert await call(instance_a) == answer and len(sender_b.sent) == 1  # A replays it too
