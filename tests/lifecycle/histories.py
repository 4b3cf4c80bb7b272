"""Convergence of one order's lifecycle, the property (hypothesis): any valid history (placed,
amended zero or more times, optionally cancelled last), delivered in any order, with
redeliveries, producer retries under new MessageIds and concurrent deliveries, ends in the state
of the highest version delivered; no version is applied twice; an older one never overwrites a
newer one; the outbox holds one event per applied version, created in increasing versions, the
highest among them. ``tests/lifecycle/test_convergence.py`` runs it over the in-memory store
(many examples) and through the real azure-cosmos SDK against the local Cosmos DB server's
atomic batch."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from idempotent_consumer import IncomingMessage, Outcome

from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared.consumer.core import OrderStore, decide


@dataclass(frozen=True)
class Step:
    order_id: str
    version: int
    subject: str | None
    body: dict[str, Any]


def history(order_id: str, amendments: int, cancelled: bool) -> list[Step]:
    steps = [Step(order_id, 1, None, order_body(order_id))]
    steps += [
        Step(order_id, version, "OrderAmended", amended_body(order_id, version))
        for version in range(2, 2 + amendments)
    ]
    if cancelled:
        version = 2 + amendments
        steps.append(Step(order_id, version, "OrderCancelled", cancelled_body(order_id, version)))
    return steps


def delivery(step: Step, message_id: str | None = None) -> IncomingMessage:
    if message_id is None:
        message_id = (
            step.order_id
            if step.version == 1
            else lifecycle_message_id(step.order_id, step.version)
        )
    return IncomingMessage(message_id, json.dumps(step.body).encode(), "c", 1, subject=step.subject)


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[list[Step], list[list[IncomingMessage]]]:
    """A history, and its deliveries in rounds: the messages of one round run concurrently."""
    order_id = f"ord-{draw(st.uuids()).hex[:12]}"
    steps = history(order_id, draw(st.integers(0, 4)), draw(st.booleans()))
    delivered = draw(st.lists(st.sampled_from(steps), min_size=1, max_size=3 * len(steps)))
    messages = []
    for step in delivered:
        retry = step.version > 1 and draw(st.booleans())
        # A producer retry is the same change under a MessageId of its own.
        messages.append(delivery(step, f"retry-{step.version}" if retry else None))
    order = draw(st.permutations(messages))
    rounds, start = [], 0
    while start < len(order):
        size = draw(st.integers(1, 3))
        rounds.append(list(order[start : start + size]))
        start += size
    return steps, rounds


def expected_state(steps: list[Step], delivered_versions: set[int]) -> Step:
    return max(
        (step for step in steps if step.version in delivered_versions), key=lambda s: s.version
    )


async def deliver_all(store: OrderStore, rounds: list[list[IncomingMessage]]) -> list[Outcome]:
    outcomes = []
    for round_ in rounds:
        decisions = await asyncio.gather(*(decide(message, store) for message in round_))
        outcomes += [decision.outcome for decision in decisions]
    return outcomes


def check_converged(
    documents: list[dict[str, Any]],
    steps: list[Step],
    rounds: list[list[IncomingMessage]],
    outcomes: list[Outcome],
    *,
    in_commit_order: bool = True,
) -> None:
    """The property, over the documents of the order's partition. ``in_commit_order``: the
    documents come in the order they were committed (the in-memory store's insertion order),
    so the events' versions must increase; the local Cosmos DB server orders only by ``_ts``
    (seconds, no LSN), so there only their set is checked. The order holds by construction: an
    event of version v commits only with the order's move to v, on the condition that the
    stored version is below v."""
    assert set(outcomes) <= {Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.STALE}, outcomes
    versions = {json.loads(message.body).get("orderVersion", 1) for r in rounds for message in r}
    highest = expected_state(steps, versions)
    (order,) = [doc for doc in documents if doc.get("type") == "order"]
    assert order["orderVersion"] == highest.version
    if highest.subject == "OrderCancelled":
        assert order["status"] == "cancelled"
        assert order["cancelledAt"] == highest.body["cancelledAt"]
        assert order["cancellationReason"] == highest.body["reason"]
    else:
        assert order["status"] == "accepted"
        for name in ("customerId", "currency", "lines"):
            assert order[name] == highest.body[name]
    event_versions = [
        doc["payload"]["orderVersion"] for doc in documents if doc.get("type") == "outbox"
    ]
    if not in_commit_order:
        event_versions.sort()
    assert event_versions == sorted(set(event_versions)), event_versions  # increasing, once each
    assert event_versions[-1] == highest.version
    assert outcomes.count(Outcome.PROCESSED) == len(event_versions)
    marked = {doc["messageId"] for doc in documents if doc.get("type") == "inbox"}
    delivered_ids = {message.message_id for r in rounds for message in r}
    assert marked <= delivered_ids
    # Every delivered change has its marker; an OrderPlaced has one only when it was stale.
    assert {i for i in delivered_ids if i != steps[0].order_id} <= marked
