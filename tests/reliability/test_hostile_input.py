"""Hostile input: whatever the body and properties, the consumer never raises, never writes on
invalid input, and always settles with a known reason."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from azure.cosmos.aio import ContainerProxy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from idempotent_consumer import (
    MAX_BODY_BYTES,
    MAX_DESCRIPTION_CHARS,
    IncomingMessage,
    Outcome,
    Settlement,
)
from idempotent_consumer.servicebus import Settler, to_incoming

from local.standins.broker import OutgoingMessage, PeekLockQueue
from local.standins.doubles import InMemoryOrderStore, RecordingActions
from local.standins.host import LocalFunctionsHost
from local.standins.host_binding import decode_host_binding, encode_amqp, host_binding_bytes
from shared.consumer.contract import DeadletterReason
from shared.consumer.core import decide
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry
from tests.orders import order_body
from tests.state import documents

KNOWN_REASONS = {
    value for name, value in vars(DeadletterReason).items() if not name.startswith("_")
}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=80)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)
edge_numbers = st.sampled_from(
    [0, 1, -1, 10_000, 10_001, 1_000_000_000, 1_000_000_001, 2**63, -(2**63), 1.0, 1.5, True]
)
edge_strings = st.sampled_from(
    ["", " ", "a" * 64, "a" * 65, "\u0000", "\u2028", "é", "e\u0301", "🧾", "ord 1", "x" * 10_000]
) | st.text(max_size=100)


@st.composite
def mutated_orders(draw: st.DrawFn) -> bytes:
    """A valid order with a few fields replaced, removed or added."""
    body: dict[str, Any] = order_body()
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["replace", "remove", "add", "line"]))
        field = draw(st.sampled_from(sorted(body) or ["orderId"]))
        if action == "replace":
            body[field] = draw(json_values | edge_numbers | edge_strings)
        elif action == "remove":
            body.pop(field, None)
        elif action == "add":
            body[draw(st.text(max_size=10))] = draw(json_values)
        elif (
            isinstance(body.get("lines"), list)
            and body["lines"]
            and isinstance(body["lines"][0], dict)
        ):
            line = dict(body["lines"][0])
            line[draw(st.sampled_from(["sku", "quantity", "unitPriceMinor", "extra"]))] = draw(
                edge_numbers | edge_strings | json_values
            )
            body["lines"] = [line, *body["lines"][1:]]
    return json.dumps(body, allow_nan=True).encode()


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "mutated", "nesting", "duplicate-keys", "huge"]))
    if kind == "bytes":
        return draw(st.binary(max_size=600))
    if kind == "json":
        return json.dumps(draw(json_values), allow_nan=True).encode()
    if kind == "nesting":
        depth = draw(st.integers(100, 20_000))
        return b"[" * depth + b"]" * draw(st.sampled_from([0, depth]))
    if kind == "duplicate-keys":
        first, second = draw(st.text(max_size=10)), draw(st.text(max_size=10))
        base = json.dumps(order_body())[1:-1]
        return (
            f'{{"orderId": {json.dumps(first)}, {base}, "orderId": {json.dumps(second)}}}'.encode()
        )
    if kind == "huge":
        size = draw(st.sampled_from([MAX_BODY_BYTES - 200, MAX_BODY_BYTES + 1, 2 * MAX_BODY_BYTES]))
        return json.dumps(order_body(note="x" * size)).encode()
    return draw(mutated_orders())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=hostile_bodies(),
    message_id=st.none() | st.just("ord-1001") | st.text(max_size=200),
    correlation_id=st.none() | st.text(max_size=50),
    properties=st.dictionaries(st.text(max_size=20), json_scalars, max_size=4),
)
async def test_the_core_never_raises_and_never_writes_invalid_input(
    body: bytes, message_id: str | None, correlation_id: str | None, properties: dict[str, Any]
) -> None:
    store = InMemoryOrderStore()
    message = IncomingMessage(message_id, body, correlation_id, 1, properties)

    decision = await decide(message, store)

    assert decision.outcome in {Outcome.PROCESSED, Outcome.INVALID}
    if decision.outcome is Outcome.INVALID:
        assert decision.settlement is Settlement.DEADLETTER
        assert decision.deadletter_reason in KNOWN_REASONS
        assert decision.description
        assert len(decision.description) <= MAX_DESCRIPTION_CHARS
        assert store.requests == []
        assert store.documents == {}
    else:  # only a body that honours the contract gets this far
        assert decision.settlement is Settlement.COMPLETE
        assert store.requests == ["batch"]


INVALID_KINDS: list[tuple[str, str]] = [
    ("bytes", "InvalidPayload"),
    ("truncated", "InvalidPayload"),
    ("array", "InvalidPayload"),
    ("nan", "InvalidPayload"),
    ("quantity", "InvalidPayload"),
    ("price", "InvalidPayload"),
    ("currency", "InvalidPayload"),
    ("placed-at", "InvalidPayload"),
    ("no-lines", "InvalidPayload"),
    ("string-version", "InvalidPayload"),
    ("version", "UnsupportedSchemaVersion"),
    ("id-mismatch", "MessageIdMismatch"),
    ("no-id", "MissingMessageId"),
    ("too-large", "PayloadTooLarge"),
]


def invalid_message(index: int, rng: random.Random) -> tuple[OutgoingMessage, str]:
    """The index-th of a family of distinct invalid messages, and its expected reason."""
    kind, reason = INVALID_KINDS[index % len(INVALID_KINDS)]
    order_id = f"bad-{index:04d}"
    body: Any = order_body(order_id, customerId=f"cust-{rng.randrange(10**6)}")
    message_id: str | None = order_id
    if kind == "bytes":
        body = bytes([0xFF, rng.randrange(256)]) + order_id.encode()
    elif kind == "truncated":
        body = json.dumps(body).encode()[: -rng.randrange(1, 60)]  # the end cut off
    elif kind == "array":
        body = json.dumps([order_id, index]).encode()
    elif kind == "nan":
        body = json.dumps(order_body(order_id, schemaVersion=float("nan"))).encode()
    elif kind == "quantity":
        body["lines"][0]["quantity"] = rng.choice([0, 10_001, -index, 2.5, "3"])
    elif kind == "price":
        body["lines"][0]["unitPriceMinor"] = rng.choice([-1, 1_000_000_001, None])
    elif kind == "currency":
        body["currency"] = rng.choice(["eur", "EURO", "", "€€€"])
    elif kind == "placed-at":
        body["placedAt"] = rng.choice(["2026-11-29", "2026-11-29T10:00:00", "yesterday", index])
    elif kind == "no-lines":
        body["lines"] = []
    elif kind == "string-version":
        body["schemaVersion"] = "1"
    elif kind == "version":
        body["schemaVersion"] = rng.choice([0, 2, 3, 99]) + index * 100
    elif kind == "id-mismatch":
        message_id = f"{order_id}-other"
    elif kind == "no-id":
        message_id = None
    elif kind == "too-large":
        body["notes"] = "x" * (MAX_BODY_BYTES + index)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return OutgoingMessage(message_id=message_id, body=raw, correlation_id=f"c-{index}"), reason


async def test_a_thousand_distinct_invalid_messages_leave_the_container_empty(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    rng = random.Random(1000)
    expected: dict[str, str] = {}
    bodies: set[bytes] = set()
    for index in range(1000):
        outgoing, reason = invalid_message(index, rng)
        assert queue.send(outgoing)
        expected[outgoing.correlation_id or ""] = reason
        bodies.add(outgoing.body)
    assert len(bodies) == 1000  # distinct inputs

    await host.run_until_idle()

    dead = {d.message.correlation_id or "": d.reason for d in queue.dead_letters}
    assert dead == expected
    assert {record.operation for record in queue.settlement_log} == {"dead_letter"}
    assert await documents(container) == []


amqp_properties = st.dictionaries(
    st.text(min_size=1, max_size=20),
    st.none() | st.booleans() | st.integers(-(2**31), 2**31 - 1) | st.text(max_size=60),
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=hostile_bodies(),
    message_id=st.none() | st.just("ord-1001") | st.text(min_size=1, max_size=120),
    correlation_id=st.none() | st.text(min_size=1, max_size=50),
    properties=amqp_properties,
    delivery_count=st.integers(1, 100),
)
async def test_the_function_path_settles_exactly_once_whatever_arrives(
    body: bytes,
    message_id: str | None,
    correlation_id: str | None,
    properties: dict[str, Any],
    delivery_count: int,
) -> None:
    content = host_binding_bytes(
        uuid.uuid4(),
        encode_amqp(
            body=body,
            message_id=message_id,
            correlation_id=correlation_id,
            application_properties=properties,
            delivery_count=delivery_count,
        ),
    )
    store = InMemoryOrderStore()
    consumer = OrderConsumer(store, ConsumerTelemetry("orders"))
    actions = RecordingActions()

    received = decode_host_binding(content)
    settler = Settler()
    try:
        decision = await consumer.handle(to_incoming(received), settler.bound(actions, received))
    finally:
        settler.close()

    assert len(actions.calls) == 1
    [call] = actions.calls
    if decision.outcome is Outcome.INVALID:
        assert call.operation == "deadletter"
        assert call.deadletter_reason in KNOWN_REASONS
        assert call.deadletter_error_description is not None
        assert len(call.deadletter_error_description) <= MAX_DESCRIPTION_CHARS
        assert store.documents == {}
    else:
        assert (decision.outcome, call.operation) == (Outcome.PROCESSED, "complete")
