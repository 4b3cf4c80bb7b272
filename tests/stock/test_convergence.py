"""Convergence of the stock reservation over generated histories (``tests/stock/histories``):
any arrival order, duplicates, stops between SKU batches and concurrent deliveries end with each
SKU's ``reserved`` equal to what the orders' highest versions reserve, never negative, never
above ``onHand``: over the in-memory store, many examples; through azure-cosmos (the app's
``CosmosDocumentStore``) against the local server's atomic transactional batch, fewer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from hypothesis import HealthCheck, given, settings

from local.standins.cosmos_server import ensure_container
from local.standins.doubles import InMemoryDocumentStore
from shared.adapters.cosmos_orders import CosmosDocumentStore, create_client
from shared.config import Settings
from shared.stock.inventory import STOCK_ITEM_ID, stock_item
from tests.stock.histories import Case, cases, check_converged, deliver_all


@settings(max_examples=300, deadline=None)
@given(cases())
def test_any_history_converges_over_the_in_memory_store(case: Case) -> None:
    store = InMemoryDocumentStore()
    for sku, count in case.on_hand.items():
        store.documents[(sku, STOCK_ITEM_ID)] = stock_item(sku, count)

    asyncio.run(deliver_all(store, case))

    check_converged(list(store.documents.values()), case)


@pytest.fixture
async def inventory(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """An inventory container (``/sku``) on the local Cosmos DB server's atomic batch."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        name = f"inventory-{uuid.uuid4().hex[:8]}"
        proxy = await ensure_container(client, app_env["COSMOS_DATABASE"], name, "/sku")
        yield proxy
        await client.get_database_client(app_env["COSMOS_DATABASE"]).delete_container(name)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
async def test_any_history_converges_through_the_sdk_against_the_atomic_batch(
    app_env: dict[str, str], inventory: ContainerProxy, case: Case
) -> None:
    # Examples share the container: start empty, with the case's stock.
    async for item in inventory.query_items("SELECT c.id, c.sku FROM c"):
        await inventory.delete_item(item["id"], partition_key=item["sku"])
    for sku, count in case.on_hand.items():
        await inventory.create_item(stock_item(sku, count))
    settings_ = Settings.from_env(app_env)
    async with create_client(settings_) as client:
        proxy = client.get_database_client(settings_.cosmos_database).get_container_client(
            inventory.id
        )
        await deliver_all(CosmosDocumentStore(proxy), case)

    check_converged([item async for item in inventory.query_items("SELECT * FROM c")], case)
