"""The ``OrderStore`` contract (``shared.consumer.core.OrderStore``), run by the Cosmos DB adapter
and by the in-memory double.

What the core relies on (``shared.consumer.core.decide``): a create writes all documents of one
order or none; ``OrderAlreadyExists`` means the order itself exists (the core then reads it and
compares fingerprints: a duplicate is completed); ``OrphanedDocument`` means another document of
the order (its outbox event) exists without it (dead-lettered at once, naming the document); a
point read returns the stored order, or None.

``test_an_event_left_without_its_order_is_an_orphaned_document`` fails for the double as it was
(``tests/memory_store.py`` before this suite: any existing key raised ``OrderAlreadyExists``, so
the core would have compared fingerprints and completed the message as a duplicate), and for the
Cosmos DB adapter if it read any batch conflict as the order's (``if conflict == 0`` in
``CosmosOrderStore.create`` made ``if conflict is not None``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import (
    IncomingMessage,
    Patch,
    set_field,
)
from idempotent_consumer.testing import DocumentStoreContract
from idempotent_consumer.testing import StoreUnderTest as KitStoreUnderTest

from local.standins.doubles import InMemoryOrderStore
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from shared.consumer.contract import parse_order
from shared.consumer.core import OrderStore, build_documents
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument
from shared.consumer.order import applies_over
from tests.orders import order_body

Document = dict[str, Any]


@dataclass
class StoreUnderTest:
    """The store, and a way around it to set up and inspect the stored state."""

    store: OrderStore
    put: Callable[[Document], Awaitable[None]]  # store a document as it is
    delete: Callable[[str, str], Awaitable[None]]  # partition key, id
    stored_ids: Callable[[str], Awaitable[set[str]]]  # the ids of one partition


def order(order_id: str = "ord-1001", *, outbox: bool = True) -> list[Document]:
    """The documents the consumer writes for one order: the order, then its outbox event."""
    raw = json.dumps(order_body(order_id)).encode()
    incoming = IncomingMessage(order_id, raw, correlation_id=f"corr-{order_id}")
    return build_documents(
        parse_order(raw, order_id),
        incoming,
        outbox_enabled=outbox,
        accepted_at=datetime(2026, 11, 29, 12, tzinfo=UTC),
    )


def without_system_fields(document: Mapping[str, Any]) -> Document:
    return {name: value for name, value in document.items() if not name.startswith("_")}


class OrderStoreContract(DocumentStoreContract):
    """What every ``OrderStore`` must do: the kit's ``DocumentStoreContract`` (it is one), and
    the OrderPlaced path's create. Subclasses provide ``subject``."""

    @pytest.fixture
    def subject(self) -> StoreUnderTest:
        raise NotImplementedError

    async def test_a_new_order_is_stored_and_read_back_as_written(
        self, subject: StoreUnderTest
    ) -> None:
        [written] = order(outbox=False)

        await subject.store.create([written])

        stored = await subject.store.read_order("ord-1001")
        assert stored is not None
        assert without_system_fields(stored) == written

    async def test_an_order_and_its_event_are_stored_together(
        self, subject: StoreUnderTest
    ) -> None:
        documents = order()

        await subject.store.create(documents)

        assert await subject.stored_ids("ord-1001") == {d["id"] for d in documents}
        stored = await subject.store.read_order("ord-1001")
        assert stored is not None and stored["type"] == "order"  # the order, not its event

    async def test_an_order_never_stored_reads_as_none(self, subject: StoreUnderTest) -> None:
        await subject.store.create(order("ord-other"))

        assert await subject.store.read_order("ord-1001") is None

    @pytest.mark.parametrize("outbox", [False, True], ids=["create", "batch"])
    async def test_a_second_create_of_the_order_is_order_already_exists(
        self, subject: StoreUnderTest, outbox: bool
    ) -> None:
        first = order(outbox=outbox)
        await subject.store.create(first)
        again = order(outbox=outbox)
        again[0]["customerId"] = "another"  # the core compares; the store must not

        with pytest.raises(OrderAlreadyExists):
            await subject.store.create(again)

        stored = await subject.store.read_order("ord-1001")
        assert stored is not None and stored["customerId"] == first[0]["customerId"]

    async def test_a_conflict_on_the_order_writes_none_of_its_documents(
        self, subject: StoreUnderTest
    ) -> None:
        [alone, _event] = order()
        await subject.put(alone)  # stored with the outbox off, say; then redelivered with it on

        with pytest.raises(OrderAlreadyExists):
            await subject.store.create(order())

        assert await subject.stored_ids("ord-1001") == {"ord-1001"}

    async def test_an_event_left_without_its_order_is_an_orphaned_document(
        self, subject: StoreUnderTest
    ) -> None:
        """Fails with the double as it was: ``OrderAlreadyExists`` (see the module docstring)."""
        documents = order()
        await subject.store.create(documents)
        await subject.delete("ord-1001", "ord-1001")  # deleted by hand; its event remains

        with pytest.raises(OrphanedDocument) as raised:
            await subject.store.create(order())

        assert (raised.value.order_id, raised.value.document_id) == ("ord-1001", documents[1]["id"])

    async def test_an_orphaned_document_leaves_the_order_unwritten(
        self, subject: StoreUnderTest
    ) -> None:
        [_order, event] = order()
        await subject.put(event)

        with pytest.raises(OrphanedDocument):
            await subject.store.create(order())

        assert await subject.store.read_order("ord-1001") is None
        assert await subject.stored_ids("ord-1001") == {event["id"]}

    async def test_the_stored_order_does_not_change_with_the_callers_documents(
        self, subject: StoreUnderTest
    ) -> None:
        documents = order()
        await subject.store.create(documents)
        documents[0]["status"] = "changed after the create"
        read = await subject.store.read_order("ord-1001")
        assert isinstance(read, dict)
        read["status"] = "changed after the read"

        stored = await subject.store.read_order("ord-1001")

        assert stored is not None and stored["status"] == "accepted"

    # ---- the atomic commit: the kit's own suite (DocumentStoreContract), and the order's -----

    @pytest.fixture
    def document_store(self, subject: StoreUnderTest) -> KitStoreUnderTest:
        return KitStoreUnderTest(subject.store, "orderId", subject.put, subject.stored_ids)

    async def test_an_order_without_a_version_is_version_1_to_the_condition(
        self, subject: StoreUnderTest
    ) -> None:
        legacy = stored_order(version=1)
        del legacy["orderVersion"]  # written before versions existed
        await subject.put(legacy)

        await subject.store.commit(
            "ord-1001", [Patch("ord-1001", [set_field("orderVersion", 2)], applies_over(2))]
        )

        stored = await subject.store.read("ord-1001", "ord-1001")
        assert stored is not None and stored["orderVersion"] == 2


def stored_order(version: int) -> Document:
    return {
        "id": "ord-1001",
        "orderId": "ord-1001",
        "type": "order",
        "status": "accepted",
        "orderVersion": version,
    }


class TestInMemoryOrderStore(OrderStoreContract):
    @pytest.fixture
    def subject(self) -> StoreUnderTest:
        return memory_subject(InMemoryOrderStore())


class TestInMemoryOrderStoreInBenchmarkMode(OrderStoreContract):
    """The benchmark's mode (``keep``): the same port, forgetting old orders, copying nothing."""

    @pytest.fixture
    def subject(self) -> StoreUnderTest:
        return memory_subject(InMemoryOrderStore(keep=1_000))

    @pytest.mark.skip(reason="the benchmark mode copies nothing, by design (InMemoryOrderStore)")
    async def test_the_stored_order_does_not_change_with_the_callers_documents(
        self, subject: StoreUnderTest
    ) -> None:
        raise AssertionError("not run")


def memory_subject(store: InMemoryOrderStore) -> StoreUnderTest:
    async def put(document: Document) -> None:
        store.documents[(document["orderId"], document["id"])] = dict(document)

    async def delete(partition_key: str, document_id: str) -> None:
        del store.documents[(partition_key, document_id)]

    async def stored_ids(partition_key: str) -> set[str]:
        return {key[1] for key in store.documents if key[0] == partition_key}

    return StoreUnderTest(store, put, delete, stored_ids)


class TestCosmosOrderStore(OrderStoreContract):
    """The adapter on the app's client settings (``create_client``), against the session's
    Cosmos account; set up and read back through the test's own client (``container``)."""

    @pytest.fixture
    async def subject(
        self, app_env: dict[str, str], container: ContainerProxy
    ) -> AsyncIterator[StoreUnderTest]:
        settings = Settings.from_env(app_env)
        async with create_client(settings) as client:
            proxy = client.get_database_client(settings.cosmos_database).get_container_client(
                settings.cosmos_container
            )

            async def put(document: Document) -> None:
                await container.create_item(document)

            async def delete(partition_key: str, document_id: str) -> None:
                await container.delete_item(document_id, partition_key=partition_key)

            async def stored_ids(partition_key: str) -> set[str]:
                ids: set[str] = set()
                async for document in container.query_items("SELECT c.id, c.orderId FROM c"):
                    if document["orderId"] == partition_key:
                        ids.add(document["id"])
                return ids

            yield StoreUnderTest(CosmosOrderStore(proxy), put, delete, stored_ids)
