"""Convergence of the order lifecycle over generated histories (``tests/lifecycle/histories``):
over the in-memory store, many examples; through the real azure-cosmos SDK (the app's
``CosmosOrderStore`` on the app's client settings) against the local Cosmos DB server's atomic
transactional batch, fewer. Each fails with the version condition of ``applies_over`` removed."""

from __future__ import annotations

import asyncio

from azure.cosmos.aio import ContainerProxy
from hypothesis import HealthCheck, given, settings
from idempotent_consumer import IncomingMessage

from local.standins.doubles import InMemoryOrderStore
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from tests.lifecycle.histories import Step, check_converged, deliver_all, deliveries

Case = tuple[list[Step], list[list[IncomingMessage]]]


@settings(max_examples=300, deadline=None)
@given(deliveries())
def test_any_arrival_order_converges_over_the_in_memory_store(case: Case) -> None:
    steps, rounds = case
    store = InMemoryOrderStore()

    outcomes = asyncio.run(deliver_all(store, rounds))

    check_converged(list(store.documents.values()), steps, rounds, outcomes)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=deliveries())
async def test_any_arrival_order_converges_through_the_sdk_against_the_atomic_batch(
    app_env: dict[str, str], container: ContainerProxy, case: Case
) -> None:
    steps, rounds = case
    # Examples share the test's container, and shrunk examples share order ids: start empty.
    async for item in container.query_items("SELECT c.id, c.orderId FROM c"):
        await container.delete_item(item["id"], partition_key=item["orderId"])
    settings_ = Settings.from_env(app_env)
    async with create_client(settings_) as client:
        proxy = client.get_database_client(settings_.cosmos_database).get_container_client(
            settings_.cosmos_container
        )
        outcomes = await deliver_all(CosmosOrderStore(proxy), rounds)

    order_id = steps[0].order_id
    stored = [
        item
        async for item in container.query_items(
            "SELECT * FROM c WHERE c.orderId = @id",
            parameters=[{"name": "@id", "value": order_id}],
        )
    ]
    check_converged(stored, steps, rounds, outcomes, in_commit_order=False)
