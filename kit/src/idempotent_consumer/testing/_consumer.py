"""The consumer contract: what the kit guarantees of any ``ConsumerDefinition``, as one abstract
pytest suite a user's consumer subclasses, over the in-memory store (``InMemoryDocumentStore``,
held to the store suite).

Whatever the definition: each valid message is processed and completed; its redelivery is a
duplicate that changes nothing stored; concurrent deliveries of one message leave what one
delivery leaves; a delivery stopped between two partitions is abandoned and its redelivery
leaves what one clean delivery leaves; an invalid message is dead-lettered with its reason and
writes nothing.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from idempotent_consumer import (
    ConsumerDefinition,
    Decision,
    IncomingMessage,
    Outcome,
    Settlement,
    TransientStoreError,
    Write,
    decide,
)
from idempotent_consumer.testing._memory import InMemoryDocumentStore

NOW = datetime(2026, 11, 30, 9, tzinfo=UTC)
MARKER_TTL_S = 600
CONCURRENT_DELIVERIES = 5

Stored = dict[tuple[str, str], dict[str, Any]]


class _Interleaving:
    """The store, letting every other delivery run before each request: concurrent deliveries
    interleave at every read and commit, as they do against a real store's round trips."""

    def __init__(self, store: InMemoryDocumentStore) -> None:
        self._store = store

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        await asyncio.sleep(0)
        await self._store.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        await asyncio.sleep(0)
        return await self._store.read(partition_key, document_id)


class _StopsAtSecondPartition:
    """The store, stopping (a transient failure, as a worker that stopped) at the first commit
    in the second partition a delivery writes."""

    def __init__(self, store: InMemoryDocumentStore) -> None:
        self._store = store
        self._partitions: list[str] = []
        self.stopped = False

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        if partition_key not in self._partitions:
            self._partitions.append(partition_key)
        if len(self._partitions) >= 2 and not self.stopped:
            self.stopped = True
            raise TransientStoreError("the worker stopped between two partitions")
        await self._store.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)


class ConsumerContract:
    """What every consumer of the kit does. Subclasses provide the fixtures ``definition``,
    ``messages`` (valid messages of distinct MessageIds, at least one writing two partitions or
    more, for the stop test) and ``invalid_message`` (one its contract rejects). The tests are
    coroutines: run them with pytest-asyncio in ``asyncio_mode = "auto"``."""

    @pytest.fixture
    def definition(self) -> ConsumerDefinition[Any]:
        raise NotImplementedError

    @pytest.fixture
    def messages(self) -> list[IncomingMessage]:
        raise NotImplementedError

    @pytest.fixture
    def invalid_message(self) -> IncomingMessage:
        raise NotImplementedError

    async def test_each_message_is_processed_and_its_redelivery_changes_nothing(
        self, definition: ConsumerDefinition[Any], messages: list[IncomingMessage]
    ) -> None:
        store = InMemoryDocumentStore()
        first = [await _deliver(definition, message, store) for message in messages]
        stored = _snapshot(store)
        again = [await _deliver(definition, message, store) for message in messages]

        assert [(d.outcome, d.settlement) for d in first] == [
            (Outcome.PROCESSED, Settlement.COMPLETE)
        ] * len(messages)
        assert [(d.outcome, d.settlement) for d in again] == [
            (Outcome.DUPLICATE, Settlement.COMPLETE)
        ] * len(messages)
        assert _snapshot(store) == stored

    async def test_concurrent_deliveries_of_a_message_leave_what_one_delivery_leaves(
        self, definition: ConsumerDefinition[Any], messages: list[IncomingMessage]
    ) -> None:
        once = await _delivered_once(definition, messages)
        store = InMemoryDocumentStore()
        interleaving = _Interleaving(store)
        decisions: list[Decision] = []
        for message in messages:
            decisions += await asyncio.gather(
                *(_deliver(definition, message, interleaving) for _ in range(CONCURRENT_DELIVERIES))
            )

        assert {d.settlement for d in decisions} == {Settlement.COMPLETE}
        assert _snapshot(store) == once

    async def test_a_delivery_stopped_between_partitions_is_finished_by_its_redelivery(
        self, definition: ConsumerDefinition[Any], messages: list[IncomingMessage]
    ) -> None:
        store = InMemoryDocumentStore()
        stopped: list[Decision] = []
        for message in messages:
            stopping = _StopsAtSecondPartition(store)
            decision = await _deliver(definition, message, stopping)
            if stopping.stopped:
                stopped.append(decision)
                decision = await _deliver(definition, message, store)
            assert (decision.outcome, decision.settlement) == (
                Outcome.PROCESSED,
                Settlement.COMPLETE,
            )
        if not stopped:
            pytest.skip("no message writes two partitions: nothing to stop between")

        assert {(d.outcome, d.settlement) for d in stopped} == {
            (Outcome.TRANSIENT, Settlement.ABANDON)
        }
        assert _snapshot(store) == await _delivered_once(definition, messages)

    async def test_an_invalid_message_is_dead_lettered_and_writes_nothing(
        self, definition: ConsumerDefinition[Any], invalid_message: IncomingMessage
    ) -> None:
        store = InMemoryDocumentStore()

        decision = await _deliver(definition, invalid_message, store)

        assert (decision.outcome, decision.settlement) == (Outcome.INVALID, Settlement.DEADLETTER)
        assert decision.deadletter_reason
        assert store.documents == {}


async def _deliver(
    definition: ConsumerDefinition[Any], message: IncomingMessage, store: Any
) -> Decision:
    return await decide(definition, message, store, marker_ttl_s=MARKER_TTL_S, now=NOW)


async def _delivered_once(
    definition: ConsumerDefinition[Any], messages: list[IncomingMessage]
) -> Stored:
    store = InMemoryDocumentStore()
    for message in messages:
        await _deliver(definition, message, store)
    return _snapshot(store)


def _snapshot(store: InMemoryDocumentStore) -> Stored:
    return copy.deepcopy(store.documents)
