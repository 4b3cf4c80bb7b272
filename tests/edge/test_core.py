"""The public edge's core, over the in-memory store and over Cosmos DB through azure-cosmos:
what a client gets back, what the queue took, what is stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from idempotent_consumer import DocumentStore, Patch, Write, increment
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from shared.consumer.contract import (
    ORDER_AMENDED,
    ORDER_CANCELLED,
    ORDER_PLACED,
    ValidChange,
    ValidOrder,
    parse_message,
)
from shared.edge import OrdersEdge
from shared.edge.core import MAX_COMMIT_ATTEMPTS
from shared.edge.requests import HEAD_ID, order_id_for, request_id
from shared.edge.responses import PROBLEM_JSON, ProblemType
from tests.edge.conftest import (
    CLIENT,
    PAST_THE_WINDOW,
    RecordingSender,
    amend_body,
    cancel_body,
    place_body,
)

pytestmark = pytest.mark.asyncio


async def test_a_place_is_one_order_one_message_and_its_repeat_replays_the_first_answer(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore, clock: ManualClock
) -> None:
    first = await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")

    assert first.status == 201
    assert first.headers["Location"] == f"/api/orders/{order_id}"
    assert first.headers["ETag"] == '"1"'
    assert first.body == {"orderId": order_id, "orderVersion": 1, "status": "placed"}
    assert sender.message_ids() == [order_id]  # the OrderPlaced contract: MessageId = orderId
    message = sender.sent[0]
    valid = parse_message(message.body, message.message_id, message.subject)
    assert message.subject == ORDER_PLACED and isinstance(valid, ValidOrder)
    assert valid.fields["customerId"] == "cust-42"
    record = await store.read(order_id, request_id(CLIENT, "key-1"))
    assert record is not None and record["sent"] is True

    clock.advance(PAST_THE_WINDOW)
    # Key order differs: the same payload (the fingerprint is over canonical JSON).
    repeat = await edge.place(CLIENT, "key-1", dict(reversed(place_body().items())))

    assert repeat == first
    assert sender.message_ids() == [order_id]  # nothing new sent


async def test_the_same_key_with_another_payload_is_422_and_changes_nothing(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore
) -> None:
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")
    before = await store.read(order_id, request_id(CLIENT, "key-1"))

    answer = await edge.place(CLIENT, "key-1", place_body(currency="USD"))

    assert answer.status == 422
    assert answer.body is not None and answer.body["type"] == ProblemType.IDEMPOTENCY_KEY
    assert answer.headers["Content-Type"] == PROBLEM_JSON
    assert len(sender.sent) == 1
    assert await store.read(order_id, request_id(CLIENT, "key-1")) == before


@pytest.mark.parametrize(
    ("key", "title"),
    [
        (None, "Idempotency-Key is missing"),
        ("", "Idempotency-Key is invalid"),
        ("has space", "Idempotency-Key is invalid"),
        ("line\nfeed", "Idempotency-Key is invalid"),
        ("clé", "Idempotency-Key is invalid"),
        ("k" * 256, "Idempotency-Key is invalid"),
    ],
)
async def test_a_missing_or_malformed_key_is_400_and_nothing_is_read_or_written(
    memory_edge: OrdersEdge,
    memory_store: InMemoryDocumentStore,
    sender: RecordingSender,
    key: str | None,
    title: str,
) -> None:
    answer = await memory_edge.place(CLIENT, key, place_body())

    assert answer.status == 400
    assert answer.body is not None
    assert answer.body["title"] == title and answer.body["type"] == ProblemType.IDEMPOTENCY_KEY
    assert memory_store.requests == [] and memory_store.documents == {}
    assert sender.sent == []


async def test_the_longest_key_is_taken(memory_edge: OrdersEdge, sender: RecordingSender) -> None:
    answer = await memory_edge.place(CLIENT, "~" * 255, place_body())

    assert answer.status == 201 and len(sender.sent) == 1


@pytest.mark.parametrize(
    "body",
    [
        place_body(currency="eur", customerId="SECRET-CUSTOMER"),
        place_body(lines=[]),
        place_body(lines=[{"sku": "SKU-1", "quantity": 1.0, "unitPriceMinor": 5}]),
        place_body(orderId="ord-mine"),
        ["not", "an", "object"],
        place_body(note=float("nan")),
    ],
    ids=["currency", "no-lines", "float-quantity", "client-order-id", "array", "nan"],
)
async def test_a_body_that_is_not_the_contract_is_a_bounded_problem_and_writes_nothing(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore, body: object
) -> None:
    answer = await edge.place(CLIENT, "key-1", body)

    assert answer.status == 400
    assert answer.body is not None
    assert set(answer.body) == {"type", "title", "status", "detail"}
    assert answer.body["type"] == ProblemType.INVALID_ORDER
    assert len(str(answer.body["detail"])) <= 512
    assert "SECRET" not in json.dumps(answer.body) and '"eur"' not in json.dumps(answer.body)
    assert sender.sent == []
    order_id = order_id_for(CLIENT, "key-1")
    assert await store.read(order_id, request_id(CLIENT, "key-1")) is None
    assert await store.read(order_id, HEAD_ID) is None


async def test_a_repeat_while_the_first_is_being_processed_is_409_then_the_first_answer(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore, clock: ManualClock
) -> None:
    sender.hold = asyncio.Event()
    first = asyncio.create_task(edge.place(CLIENT, "key-1", place_body()))
    order_id = order_id_for(CLIENT, "key-1")
    await sender.holding.wait()  # the first is committed, held in its send
    assert await store.read(order_id, request_id(CLIENT, "key-1")) is not None
    repeat = await edge.place(CLIENT, "key-1", place_body())

    assert repeat.status == 409
    assert repeat.body is not None and repeat.body["type"] == ProblemType.IDEMPOTENCY_KEY
    assert int(repeat.headers["Retry-After"]) >= 1

    sender.hold.set()
    answer = await first
    clock.advance(PAST_THE_WINDOW)
    again = await edge.place(CLIENT, "key-1", place_body())

    assert answer.status == 201 and again == answer
    assert sender.message_ids() == [order_id]


async def test_amendments_and_a_cancellation_take_the_next_versions_and_their_message_ids(
    edge: OrdersEdge, sender: RecordingSender
) -> None:
    placed = await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")

    amended = await edge.amend(CLIENT, "key-2", order_id, amend_body(5))
    cancelled = await edge.cancel(CLIENT, "key-3", order_id, cancel_body())

    assert (placed.status, amended.status, cancelled.status) == (201, 200, 200)
    assert amended.headers["ETag"] == '"2"' and cancelled.headers["ETag"] == '"3"'
    assert sender.message_ids() == [order_id, f"{order_id}:v2", f"{order_id}:v3"]
    assert [message.subject for message in sender.sent] == [
        ORDER_PLACED,
        ORDER_AMENDED,
        ORDER_CANCELLED,
    ]
    parsed = [parse_message(m.body, m.message_id, m.subject) for m in sender.sent]
    placement, amendment, cancellation = parsed
    assert isinstance(amendment, ValidChange) and isinstance(cancellation, ValidChange)
    assert amendment.version == 2 and cancellation.version == 3
    # An amendment is the order's whole new state: its placedAt is the order's.
    assert amendment.fields["placedAt"] == placement.fields["placedAt"]
    assert amendment.fields["lines"][0]["quantity"] == 5
    assert cancellation.fields["reason"] == "customer request"


async def test_two_concurrent_amendments_get_consecutive_versions(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore
) -> None:
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")

    first, second = await asyncio.gather(
        edge.amend(CLIENT, "key-a", order_id, amend_body(3)),
        edge.amend(CLIENT, "key-b", order_id, amend_body(4)),
    )

    assert (first.status, second.status) == (200, 200)
    assert {first.headers["ETag"], second.headers["ETag"]} == {'"2"', '"3"'}
    assert sorted(sender.message_ids()[1:]) == [f"{order_id}:v2", f"{order_id}:v3"]
    head = await store.read(order_id, HEAD_ID)
    assert head is not None and head["orderVersion"] == 3


async def test_if_match_not_the_head_is_412_and_writes_nothing_but_its_repeat_replays(
    edge: OrdersEdge, sender: RecordingSender, store: DocumentStore, clock: ManualClock
) -> None:
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")
    amended = await edge.amend(CLIENT, "key-2", order_id, amend_body(3), if_match='"1"')

    stale = await edge.amend(CLIENT, "key-3", order_id, amend_body(4), if_match='"1"')
    weak = await edge.amend(CLIENT, "key-3", order_id, amend_body(4), if_match='W/"2"')

    assert amended.status == 200 and amended.headers["ETag"] == '"2"'
    assert stale.status == 412 and weak.status == 412
    assert stale.headers["ETag"] == '"2"'
    assert stale.body is not None and stale.body["type"] == ProblemType.VERSION_MISMATCH
    assert await store.read(order_id, request_id(CLIENT, "key-3")) is None
    assert len(sender.sent) == 2
    clock.advance(PAST_THE_WINDOW)
    # The first amendment's repeat, its If-Match now stale: its first answer, not a 412.
    assert await edge.amend(CLIENT, "key-2", order_id, amend_body(3), if_match='"1"') == amended
    current = await edge.amend(CLIENT, "key-3", order_id, amend_body(4), if_match='"2"')
    assert current.status == 200 and current.headers["ETag"] == '"3"'
    malformed = await edge.amend(CLIENT, "key-4", order_id, amend_body(4), if_match="2")
    assert malformed.status == 400


async def test_a_change_of_an_order_the_edge_never_placed_or_another_clients_is_404(
    edge: OrdersEdge, sender: RecordingSender
) -> None:
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")

    unknown = await edge.amend(CLIENT, "key-2", "ord-unknown", amend_body())
    others = await edge.cancel("client-b", "key-2", order_id, cancel_body())
    hostile = await edge.cancel(CLIENT, "key-2", "../../x", cancel_body())

    assert (unknown.status, others.status, hostile.status) == (404, 404, 404)
    assert len(sender.sent) == 1


async def test_after_a_cancellation_a_change_is_409_and_the_cancellation_replays(
    edge: OrdersEdge, sender: RecordingSender, clock: ManualClock
) -> None:
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")
    cancelled = await edge.cancel(CLIENT, "key-2", order_id, cancel_body())

    amend = await edge.amend(CLIENT, "key-3", order_id, amend_body())
    cancel_again = await edge.cancel(CLIENT, "key-4", order_id, cancel_body())

    assert amend.status == 409 and cancel_again.status == 409
    assert amend.body is not None and amend.body["type"] == ProblemType.ORDER_CANCELLED
    clock.advance(PAST_THE_WINDOW)
    assert await edge.cancel(CLIENT, "key-2", order_id, cancel_body()) == cancelled
    assert len(sender.sent) == 2


async def test_one_key_is_scoped_to_its_client(edge: OrdersEdge, sender: RecordingSender) -> None:
    mine = await edge.place(CLIENT, "key-1", place_body())
    theirs = await edge.place("client-b", "key-1", place_body(currency="USD"))

    assert mine.status == theirs.status == 201
    assert mine.headers["Location"] != theirs.headers["Location"]
    assert len(set(sender.message_ids())) == 2


class _AlwaysOvertaken:
    """A store on which another change commits just before each of this one's batches."""

    def __init__(self, inner: DocumentStore) -> None:
        self.inner = inner
        self.overtaken = 0

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        if any(isinstance(write, Patch) and write.document_id == HEAD_ID for write in writes):
            await self.inner.commit(partition_key, [Patch(HEAD_ID, [increment("orderVersion", 1)])])
            self.overtaken += 1
        await self.inner.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self.inner.read(partition_key, document_id)


async def test_a_change_overtaken_at_every_attempt_is_503_after_bounded_retries_unwritten(
    store: DocumentStore, sender: RecordingSender, clock: ManualClock
) -> None:
    overtaking = _AlwaysOvertaken(store)
    edge = OrdersEdge(overtaking, sender, clock)
    await edge.place(CLIENT, "key-1", place_body())
    order_id = order_id_for(CLIENT, "key-1")

    answer = await edge.amend(CLIENT, "key-2", order_id, amend_body())

    assert answer.status == 503 and answer.headers["Retry-After"] == "1"
    assert overtaking.overtaken == MAX_COMMIT_ATTEMPTS
    assert await store.read(order_id, request_id(CLIENT, "key-2")) is None
    assert sender.message_ids() == [order_id]
