"""The kit's contract suite: what every consumer built on it does, whatever its effect. One
abstract suite, run by each consumer (the order consumer, the README's units-sold consumer),
over the in-memory document store (held to the Cosmos DB adapter by tests/contracts/)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from examples.units_sold import units_sold
from local.standins.doubles import InMemoryDocumentStore, InMemoryOrderStore
from ops.sample_orders import amended_body, lifecycle_message_id, order_body
from shared.consumer.core import decide as decide_order
from shared.kit.consumer import decide as decide_with_kit
from shared.kit.decision import SETTLEMENT_BY_OUTCOME, Decision, IncomingMessage, Outcome
from shared.kit.errors import SystemicStoreError, TransientStoreError
from shared.kit.inbox import is_marker

NOW = datetime(2026, 11, 30, 9, tzinfo=UTC)
Decide = Callable[[InMemoryDocumentStore, IncomingMessage], Awaitable[Decision]]


def snapshot(store: InMemoryDocumentStore) -> str:
    return json.dumps(sorted(store.documents.items()), sort_keys=True)


class ConsumerContract:
    """Subclasses say how their consumer decides and give it its messages."""

    decide: Decide
    new_store: Callable[[], InMemoryDocumentStore]

    def message(self) -> IncomingMessage:
        raise NotImplementedError

    def other_content(self) -> IncomingMessage:
        """The same MessageId as ``message``, other content."""
        raise NotImplementedError

    def invalid(self) -> IncomingMessage:
        raise NotImplementedError

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage] | None:
        """Two versions of one thing, the newer first; None for a consumer without versions."""
        return None

    async def test_a_redelivery_is_completed_and_changes_no_document(self) -> None:
        store = self.new_store()
        first = await self.decide(store, self.message())
        before = snapshot(store)

        again = await self.decide(store, self.message())

        assert first.outcome is Outcome.PROCESSED
        assert again.outcome is Outcome.DUPLICATE
        assert SETTLEMENT_BY_OUTCOME[again.outcome].value == "complete"
        assert snapshot(store) == before

    async def test_the_same_message_id_with_other_content_is_a_mismatch_and_writes_nothing(
        self,
    ) -> None:
        store = self.new_store()
        await self.decide(store, self.message())
        before = snapshot(store)

        decision = await self.decide(store, self.other_content())

        assert (decision.outcome, decision.deadletter_reason) == (Outcome.MISMATCH, "HashMismatch")
        assert decision.settlement.value == "deadletter"
        assert snapshot(store) == before

    async def test_a_stale_version_changes_nothing_but_its_marker(self) -> None:
        pair = self.newer_then_older()
        if pair is None:
            pytest.skip("this consumer keeps no versions: its effect is a pure increment")
        newer, older = pair
        store = self.new_store()
        await self.decide(store, newer)
        before = {key: doc for key, doc in store.documents.items() if not is_marker(doc)}

        decision = await self.decide(store, older)

        assert decision.outcome is Outcome.STALE
        assert decision.settlement.value == "complete"
        after = {key: doc for key, doc in store.documents.items() if not is_marker(doc)}
        assert after == before
        assert (await self.decide(store, older)).outcome is Outcome.DUPLICATE

    async def test_a_failed_commit_writes_nothing_and_the_redelivery_processes(self) -> None:
        store = self.new_store()
        store.fail_next = [TransientStoreError("throttled")]

        failed = await self.decide(store, self.message())

        assert failed.outcome is Outcome.TRANSIENT
        assert store.documents == {}
        assert (await self.decide(store, self.message())).outcome is Outcome.PROCESSED

    async def test_an_invalid_message_writes_nothing_and_is_dead_lettered(self) -> None:
        store = self.new_store()

        decision = await self.decide(store, self.invalid())

        assert decision.outcome is Outcome.INVALID
        assert decision.settlement.value == "deadletter"
        assert decision.deadletter_reason
        assert store.documents == {} and store.requests == []

    @pytest.mark.parametrize(
        ("failure", "outcome", "settlement"),
        [
            (TransientStoreError("503"), Outcome.TRANSIENT, "abandon"),
            (SystemicStoreError("403"), Outcome.SYSTEMIC, "abandon"),
            (RuntimeError("a bug"), Outcome.UNEXPECTED, "abandon"),
        ],
    )
    async def test_each_failure_class_settles_as_the_table_says(
        self, failure: Exception, outcome: Outcome, settlement: str
    ) -> None:
        store = self.new_store()
        store.fail_next = [failure]

        decision = await self.decide(store, self.message())

        assert (decision.outcome, decision.settlement.value) == (outcome, settlement)
        assert decision.error is failure
        assert store.documents == {}


# ---- the order consumer ----------------------------------------------------------------------


def order_message(body: dict[str, Any], message_id: str, subject: str | None) -> IncomingMessage:
    return IncomingMessage(message_id, json.dumps(body).encode(), "c", 1, subject=subject)


async def decide_orders(store: InMemoryDocumentStore, incoming: IncomingMessage) -> Decision:
    assert isinstance(store, InMemoryOrderStore)
    return await decide_order(incoming, store)


class TestOrderPlaced(ConsumerContract):
    decide = staticmethod(decide_orders)
    new_store = InMemoryOrderStore

    def message(self) -> IncomingMessage:
        return order_message(order_body("ord-1"), "ord-1", None)

    def other_content(self) -> IncomingMessage:
        return order_message(order_body("ord-1", currency="USD"), "ord-1", None)

    def invalid(self) -> IncomingMessage:
        return order_message(order_body("ord-1"), "ord-2", None)  # MessageId != orderId


class TestOrderAmended(ConsumerContract):
    decide = staticmethod(decide_orders)
    new_store = InMemoryOrderStore

    def message(self) -> IncomingMessage:
        return order_message(
            amended_body("ord-1", 2), lifecycle_message_id("ord-1", 2), "OrderAmended"
        )

    def other_content(self) -> IncomingMessage:
        body = amended_body("ord-1", 2, currency="USD")
        return order_message(body, lifecycle_message_id("ord-1", 2), "OrderAmended")

    def invalid(self) -> IncomingMessage:
        return order_message(amended_body("ord-1", 1), "m-1", "OrderAmended")  # version 1

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage]:
        newer = order_message(amended_body("ord-1", 3), "m-3", "OrderAmended")
        return newer, self.message()


# ---- the README's own consumer: units sold per SKU per day ---------------------------------


def accepted_event(order_id: str, message_id: str, **payload: Any) -> IncomingMessage:
    body = {"payload": {"orderId": order_id, **order_body(order_id), **payload}}
    return IncomingMessage(message_id, json.dumps(body).encode(), subject="OrderAccepted")


async def decide_units_sold(store: InMemoryDocumentStore, incoming: IncomingMessage) -> Decision:
    return await decide_with_kit(units_sold, incoming, store, marker_ttl_s=600, now=NOW)


class TestUnitsSold(ConsumerContract):
    decide = staticmethod(decide_units_sold)
    new_store = InMemoryDocumentStore

    def message(self) -> IncomingMessage:
        return accepted_event("ord-1", "event-1")

    def other_content(self) -> IncomingMessage:
        lines = [{"sku": line["sku"], "quantity": 9} for line in order_body("ord-1")["lines"]]
        return accepted_event("ord-1", "event-1", lines=lines)

    def invalid(self) -> IncomingMessage:
        return accepted_event("ord-1", "event-1", lines="none")
