"""A commit to a container that does not exist is the system's fault, not the message's: the
kit's Cosmos DB store raises ``SystemicStoreError`` (retried within the delivery, abandoned,
alerted, never dead-lettered), through the real SDK against the local Cosmos DB server. A 404
on a write means the database or container is missing (``classify_status``: "404 on a write");
on a point read it means no such document (``None``).

Mutation run 5, the tenth session: ``idempotent_consumer.cosmos._store._raise_classified``
``_3`` (every error classified as a read's, so a write's 404 went unclassified: re-raised as
it is, an unexpected outcome held 30 s then abandoned, with no systemic alert).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Create, Patch, SystemicStoreError, Write, increment
from idempotent_consumer.cosmos import CosmosDocumentStore

from shared.adapters.cosmos_orders import create_client
from shared.config import Settings


@pytest.fixture
async def missing(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """A client of the test's account for a container nobody created."""
    async with create_client(Settings.from_env(app_env)) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        yield database.get_container_client("no-such-container")


async def test_a_create_in_a_container_that_does_not_exist_is_systemic(
    missing: ContainerProxy,
) -> None:
    store = CosmosDocumentStore(missing)

    with pytest.raises(SystemicStoreError, match=r"^Cosmos DB answered 404"):
        await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])


async def test_a_batch_in_a_container_that_does_not_exist_is_systemic(
    missing: ContainerProxy,
) -> None:
    store = CosmosDocumentStore(missing)
    writes: list[Write] = [
        Create({"id": "marker", "orderId": "o-1"}),
        Patch("counter", [increment("units", 2)]),
    ]

    with pytest.raises(SystemicStoreError, match=r"^Cosmos DB answered 404"):
        await store.commit("o-1", writes)


async def test_a_read_in_a_container_that_does_not_exist_finds_nothing(
    missing: ContainerProxy,
) -> None:
    # The SDK raises a point read's 404 as CosmosResourceNotFoundError whatever is missing
    # (azure/cosmos/aio/_asynchronous_request.py); the store answers "no such document".
    assert await CosmosDocumentStore(missing).read("o-1", "x") is None
