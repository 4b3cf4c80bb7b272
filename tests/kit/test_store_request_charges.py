"""Every request's charge reaches the sink the kit's Cosmos DB store was given (the telemetry
adapter's ``orders.request_charge``): a commit and a read that succeed, through the real SDK
against the local Cosmos DB server, which answers ``x-ms-request-charge`` as the service does.

Mutation run 5, the tenth session: ``idempotent_consumer.cosmos._store``
``CosmosDocumentStore._charge_hook`` ``_1`` (no hook when a sink is given: the charges of the
requests that succeed, most of them, never counted).
"""

from __future__ import annotations

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Create
from idempotent_consumer.cosmos import CosmosDocumentStore


async def test_the_charges_of_a_commit_and_a_read_that_succeed_reach_the_sink(
    container: ContainerProxy,
) -> None:
    charges: list[tuple[str, float]] = []
    store = CosmosDocumentStore(
        container, lambda operation, charge: charges.append((operation, charge))
    )

    await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])
    assert await store.read("o-1", "x") is not None

    assert [operation for operation, _ in charges] == ["create", "read"]
    assert all(charge > 0 for _, charge in charges)
