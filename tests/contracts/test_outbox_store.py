"""The ``OutboxStore`` contract (``shared.relay.core.OutboxStore``) and the watchdog's
``OutboxScanner`` (``shared.relay.watchdog``), which the Cosmos DB adapter implements together.

What the relay relies on (``OutboxRelay._mark_dispatched`` and ``_park``): each update applies on
the version read (``OutboxRef``'s etag) and then answers True; a document changed since (an
earlier run marked or parked it, an operator republished it) or gone answers False and is left
as it is, never overwritten: that is how a replayed batch stays a no-op. The fields written are
``shared.relay.outbox``'s. What the watchdog relies on (``OutboxWatchdog.run``): ``stuck`` gives
the pending OrderAccepted documents created at or before the cutoff, oldest first, in pages of the
size asked (the last one shorter), each read only when asked for.

The ``ttl`` is checked as a stored field only: that Cosmos DB then expires the document is the
service's behaviour, not the adapter's, and showing it would mean waiting for it (cosmosdb-server
has no TTL at all; on the emulator the shortest ``ttl`` is a second). No double implements this
port (``local.standins.doubles`` says why); a new one subclasses ``OutboxStoreContract``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import document_timestamp

from shared.adapters.cosmos_outbox import CosmosOutboxStore
from shared.relay.core import OutboxStore
from shared.relay.outbox import OutboxRef, reference, republish_patch
from shared.relay.watchdog import OutboxScanner
from tests.contracts.test_order_store import order

Document = dict[str, Any]
ACCEPTED = datetime(2026, 11, 29, 12, tzinfo=UTC)
LATER = ACCEPTED + timedelta(minutes=1)
TTL_S = 7 * 24 * 3600


class OutboxAdapter(OutboxStore, OutboxScanner, Protocol):
    """Both ports, as the Cosmos DB adapter offers them."""


@dataclass
class OutboxUnderTest:
    store: OutboxAdapter
    put: Callable[[Document], Awaitable[Document]]  # store as it is; the stored version back
    get: Callable[[OutboxRef], Awaitable[Document | None]]
    delete: Callable[[OutboxRef], Awaitable[None]]
    republish: Callable[[OutboxRef], Awaitable[None]]  # an operator's change, etag ignored


async def pages_of(found: AsyncIterator[Sequence[Mapping[str, Any]]]) -> list[list[str]]:
    """The ids of every page, in order."""
    return [[str(document["id"]) for document in page] async for page in found]


def pending(order_id: str = "ord-1001", accepted_at: datetime = ACCEPTED) -> Document:
    """A pending OrderAccepted outbox document, as the consumer writes it."""
    [_order, event] = order(order_id)
    event["createdAt"] = document_timestamp(accepted_at)
    return event


class OutboxStoreContract:
    """What every ``OutboxStore`` (and ``OutboxScanner``) must do. Subclasses provide
    ``subject``."""

    @pytest.fixture
    def subject(self) -> OutboxUnderTest:
        raise NotImplementedError

    async def test_mark_dispatched_on_the_version_read_sets_the_dispatched_fields(
        self, subject: OutboxUnderTest
    ) -> None:
        written = await subject.put(pending())

        assert await subject.store.mark_dispatched(
            reference(written), dispatched_at=LATER, ttl_s=TTL_S
        )

        stored = await subject.get(reference(written))
        assert stored is not None
        assert (stored["status"], stored["dispatchedAt"], stored["ttl"]) == (
            "dispatched",
            document_timestamp(LATER),
            TTL_S,
        )
        assert (stored["eventId"], stored["payload"]) == (written["eventId"], written["payload"])

    async def test_park_on_the_version_read_sets_the_parked_fields(
        self, subject: OutboxUnderTest
    ) -> None:
        written = await subject.put(pending())

        assert await subject.store.park(
            reference(written), parked_at=LATER, reason="RejectedByBroker", description="big"
        )

        stored = await subject.get(reference(written))
        assert stored is not None
        assert {name: stored.get(name) for name in ("status", "parkedAt", "parkedReason")} == {
            "status": "parked",
            "parkedAt": document_timestamp(LATER),
            "parkedReason": "RejectedByBroker",
        }
        assert stored["parkedDescription"] == "big"
        assert "ttl" not in stored  # a parked event never expires

    async def test_a_replayed_mark_is_refused_and_changes_nothing(
        self, subject: OutboxUnderTest
    ) -> None:
        read = reference(await subject.put(pending()))
        assert await subject.store.mark_dispatched(read, dispatched_at=LATER, ttl_s=TTL_S)

        replayed = await subject.store.mark_dispatched(
            read, dispatched_at=LATER + timedelta(hours=1), ttl_s=TTL_S
        )

        assert replayed is False
        stored = await subject.get(read)
        assert stored is not None and stored["dispatchedAt"] == document_timestamp(LATER)

    async def test_a_stale_park_never_overwrites_a_dispatched_event(
        self, subject: OutboxUnderTest
    ) -> None:
        read = reference(await subject.put(pending()))
        assert await subject.store.mark_dispatched(read, dispatched_at=LATER, ttl_s=TTL_S)

        parked = await subject.store.park(
            read, parked_at=LATER, reason="RetriesExhausted", description="late"
        )

        assert parked is False
        stored = await subject.get(read)
        assert stored is not None and stored["status"] == "dispatched"
        assert "parkedReason" not in stored

    async def test_a_stale_mark_never_overwrites_a_parked_event(
        self, subject: OutboxUnderTest
    ) -> None:
        read = reference(await subject.put(pending()))
        assert await subject.store.park(read, parked_at=LATER, reason="r", description="d")

        assert not await subject.store.mark_dispatched(read, dispatched_at=LATER, ttl_s=TTL_S)

        stored = await subject.get(read)
        assert stored is not None and stored["status"] == "parked"

    async def test_an_update_on_a_version_an_operator_changed_since_is_refused(
        self, subject: OutboxUnderTest
    ) -> None:
        read = reference(await subject.put(pending()))
        await subject.republish(read)  # a newer version: the change feed delivers it itself

        assert not await subject.store.mark_dispatched(read, dispatched_at=LATER, ttl_s=TTL_S)
        assert not await subject.store.park(read, parked_at=LATER, reason="r", description="d")

        stored = await subject.get(read)
        assert stored is not None and stored["status"] == "pending"

    async def test_an_update_of_a_document_that_is_gone_answers_false(
        self, subject: OutboxUnderTest
    ) -> None:
        read = reference(await subject.put(pending()))
        await subject.delete(read)  # expired (its ttl) or deleted

        assert not await subject.store.mark_dispatched(read, dispatched_at=LATER, ttl_s=TTL_S)
        assert not await subject.store.park(read, parked_at=LATER, reason="r", description="d")
        assert await subject.get(read) is None

    async def test_stuck_is_the_pending_events_created_at_or_before_the_cutoff(
        self, subject: OutboxUnderTest
    ) -> None:
        cutoff = ACCEPTED
        stuck = [
            await subject.put(
                pending(f"ord-stuck-{minutes}", ACCEPTED - timedelta(minutes=minutes))
            )
            for minutes in (0, 3, 7)  # at the cutoff itself too
        ]
        await subject.put(pending("ord-young", ACCEPTED + timedelta(seconds=1)))
        for order_id, update in (("ord-sent", "mark"), ("ord-parked", "park")):
            old = reference(await subject.put(pending(order_id, ACCEPTED - timedelta(hours=1))))
            if update == "mark":
                assert await subject.store.mark_dispatched(old, dispatched_at=LATER, ttl_s=TTL_S)
            else:
                assert await subject.store.park(old, parked_at=LATER, reason="r", description="d")
        [an_order, _event] = order("ord-order")
        await subject.put(an_order)  # an order is never an outbox event, however old

        pages = await pages_of(subject.store.stuck(cutoff, page_size=10))

        # One page, oldest first: the watchdog's oldest age is its first document's.
        assert pages == [[d["id"] for d in reversed(stuck)]]

    async def test_stuck_comes_in_pages_of_the_size_asked_oldest_first(
        self, subject: OutboxUnderTest
    ) -> None:
        stuck = [
            await subject.put(
                pending(f"ord-stuck-{minutes}", ACCEPTED - timedelta(minutes=minutes))
            )
            for minutes in (3, 1, 5, 2, 4)  # written in no particular order
        ]
        oldest_first = sorted((d["createdAt"], d["id"]) for d in stuck)

        pages = await pages_of(subject.store.stuck(ACCEPTED, page_size=2))

        assert pages == [
            [oldest_first[0][1], oldest_first[1][1]],
            [oldest_first[2][1], oldest_first[3][1]],
            [oldest_first[4][1]],
        ]

    async def test_nothing_stuck_is_no_page_at_all(self, subject: OutboxUnderTest) -> None:
        await subject.put(pending("ord-young", ACCEPTED + timedelta(minutes=1)))

        assert await pages_of(subject.store.stuck(ACCEPTED, page_size=10)) == []


class TestCosmosOutboxStore(OutboxStoreContract):
    """The adapter on the test's container (cosmosdb-server, or the emulator when set)."""

    @pytest.fixture
    def subject(self, container: ContainerProxy) -> OutboxUnderTest:
        async def put(document: Document) -> Document:
            stored: Document = await container.create_item(document)
            return stored

        async def get(ref: OutboxRef) -> Document | None:
            async for document in container.query_items(
                "SELECT * FROM c WHERE c.id = @id",
                parameters=[{"name": "@id", "value": ref.document_id}],
            ):
                return dict(document)
            return None

        async def delete(ref: OutboxRef) -> None:
            await container.delete_item(ref.document_id, partition_key=ref.partition_key)

        async def republish(ref: OutboxRef) -> None:
            await container.patch_item(
                ref.document_id, partition_key=ref.partition_key, patch_operations=republish_patch()
            )

        return OutboxUnderTest(CosmosOutboxStore(container), put, get, delete, republish)
