"""Public edge fixtures: the edge's core over the kit's in-memory store (``memory``) and over
``CosmosDocumentStore`` through the real azure-cosmos SDK on a ``requests`` container of the
test's own (``cosmos``), a recording sender, and the manual clock."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import CosmosClient
from idempotent_consumer import Create, DocumentStore, Write
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from local.standins.cosmos_server import ensure_container
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings
from shared.edge import OrdersEdge
from shared.edge.requests import IN_PROGRESS_WINDOW, PARTITION_KEY_PATH

CLIENT = "client-a"
PAST_THE_WINDOW = IN_PROGRESS_WINDOW + timedelta(seconds=1)


class Stopped(Exception):
    """The instance stopped here (a crash, a scale-in): nothing after this point ran."""


@dataclass(frozen=True, slots=True)
class Sent:
    message_id: str
    subject: str
    body: bytes


@dataclass
class RecordingSender:
    """The ``MessageSender`` port, recording what the queue took. ``fail_next``: the next
    sends' failures, in order (None lets one through; a failure is raised before the queue
    takes it); ``hold``: a send waits for it before it is taken, ``holding`` set meanwhile."""

    sent: list[Sent] = field(default_factory=list)
    fail_next: list[Exception | None] = field(default_factory=list)
    hold: asyncio.Event | None = None
    holding: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, message_id: str, subject: str, body: bytes) -> None:
        failure = self.fail_next.pop(0) if self.fail_next else None
        if failure is not None:
            raise failure
        if self.hold is not None:
            self.holding.set()
            await self.hold.wait()
        self.sent.append(Sent(message_id, subject, body))

    def message_ids(self) -> list[str]:
        return [message.message_id for message in self.sent]


class YieldingStore:
    """A store that lets other tasks run before each request, as a network round trip does:
    concurrent requests over the in-memory store interleave as over a real one."""

    def __init__(self, inner: DocumentStore) -> None:
        self.inner = inner

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        await asyncio.sleep(0)
        await self.inner.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        await asyncio.sleep(0)
        return await self.inner.read(partition_key, document_id)


class StoppingStore:
    """A store around another that stops the instance at one point of its next commits:
    ``stop`` is ``"before the batch"`` (the first commit that creates a document is never
    made), ``"after the batch"`` (it is made, its answer never heard: the ambiguous write) or
    ``"before the mark"`` (the first commit that creates nothing, the sent mark, is never
    made); it fires once, then clears."""

    def __init__(self, inner: DocumentStore) -> None:
        self.inner = inner
        self.stop: str | None = None

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        creates = any(isinstance(write, Create) for write in writes)
        point = self.stop
        if (point == "before the batch" and creates) or (
            point == "before the mark" and not creates
        ):
            self.stop = None
            raise Stopped(point)
        await self.inner.commit(partition_key, writes)
        if point == "after the batch" and creates:
            self.stop = None
            raise Stopped(point)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self.inner.read(partition_key, document_id)


@pytest.fixture
def memory_store(clock: ManualClock) -> InMemoryDocumentStore:
    return InMemoryDocumentStore(clock=lambda: clock.now().timestamp())


@pytest.fixture
async def cosmos_store(app_env: dict[str, str]) -> AsyncIterator[CosmosDocumentStore]:
    """``CosmosDocumentStore`` on a ``requests`` container (``/orderId``) of the test's own,
    through the app's Cosmos client settings."""
    name = f"requests-{uuid.uuid4().hex[:10]}"
    settings = Settings.from_env(app_env)
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as admin:
        await ensure_container(admin, settings.cosmos_database, name, PARTITION_KEY_PATH)
        client = create_client(settings)
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(name)
        try:
            yield CosmosDocumentStore(proxy)
        finally:
            await client.close()
            await admin.get_database_client(settings.cosmos_database).delete_container(name)


@pytest.fixture(params=["memory", "cosmos"])
def store(request: pytest.FixtureRequest) -> DocumentStore:
    """Each test that takes it runs over the in-memory store (made to yield between requests,
    so concurrent requests interleave) and over Cosmos DB through azure-cosmos."""
    if request.param == "memory":
        return YieldingStore(request.getfixturevalue("memory_store"))
    stored: DocumentStore = request.getfixturevalue("cosmos_store")
    return stored


@pytest.fixture
def sender() -> RecordingSender:
    return RecordingSender()


@pytest.fixture
def edge(store: DocumentStore, sender: RecordingSender, clock: ManualClock) -> OrdersEdge:
    return OrdersEdge(store, sender, clock)


@pytest.fixture
def memory_edge(
    memory_store: InMemoryDocumentStore, sender: RecordingSender, clock: ManualClock
) -> OrdersEdge:
    return OrdersEdge(memory_store, sender, clock)


def place_body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "customerId": "cust-42",
        "currency": "EUR",
        "lines": [
            {"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1250},
            {"sku": "SKU-2", "quantity": 1, "unitPriceMinor": 999},
        ],
    }
    body.update(fields)
    return body


def amend_body(quantity: int = 3, **fields: Any) -> dict[str, Any]:
    return place_body(
        lines=[{"sku": "SKU-1", "quantity": quantity, "unitPriceMinor": 1250}], **fields
    )


def cancel_body(reason: str = "customer request") -> dict[str, Any]:
    return {"reason": reason}
