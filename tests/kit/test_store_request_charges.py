"""Every request's charge reaches the sink the kit's Cosmos DB store was given (the telemetry
adapter's ``orders.request_charge``): a commit and a read that succeed, through the real SDK
against the local Cosmos DB server, which answers ``x-ms-request-charge`` as the service does.

Mutation run 5, the tenth session: ``idempotent_consumer.cosmos._store``
``CosmosDocumentStore._charge_hook`` ``_1`` (no hook when a sink is given: the charges of the
requests that succeed, most of them, never counted). The twelfth: ``CosmosDocumentStore.read``
``_17``, ``_18``, ``_21``-``_29``, ``_32``, ``_33`` (a read that finds nothing or is refused:
its charge dropped or named otherwise, its error not classified), ``_charge_of_error`` ``_1``,
``_2``, ``_7``, ``_8``, ``_10`` (an error's headers never read, its charge named ``None``) and
``commit`` ``_7``, ``_10`` (a batch's charge named ``create`` or otherwise), ``_57``, ``_58`` (a
conflict's charge named ``None`` or never read), ``_67``, ``_68`` (a refused write's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Create, DocumentExists, SystemicStoreError
from idempotent_consumer.cosmos import CosmosDocumentStore

from local.standins.faults import (
    POINT_READS,
    WRITES,
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
)
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings


def charged(container: ContainerProxy) -> tuple[CosmosDocumentStore, list[tuple[str, float]]]:
    """The kit's store on ``container``, and the (operation, charge) pairs its sink receives."""
    charges: list[tuple[str, float]] = []
    store = CosmosDocumentStore(
        container, lambda operation, charge: charges.append((operation, charge))
    )
    return store, charges


async def test_the_charges_of_commits_and_a_read_that_succeed_reach_the_sink(
    container: ContainerProxy,
) -> None:
    store, charges = charged(container)

    await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])
    await store.commit(
        "o-1", [Create({"id": "y", "orderId": "o-1"}), Create({"id": "z", "orderId": "o-1"})]
    )
    assert await store.read("o-1", "x") is not None

    assert [operation for operation, _ in charges] == ["create", "batch", "read"]
    assert all(charge > 0 for _, charge in charges)


async def test_the_charge_of_a_read_that_finds_nothing_reaches_the_sink_as_a_read(
    container: ContainerProxy,
) -> None:
    # A 404 costs request units too (the service charges every request: "x-ms-request-charge",
    # learn.microsoft.com/rest/api/cosmos-db/common-cosmosdb-rest-response-headers), and the
    # SDK calls a response hook on success only: the store takes it from the error.
    store, charges = charged(container)

    assert await store.read("o-1", "nothing-here") is None

    assert [operation for operation, _ in charges] == ["read"]
    assert charges[0][1] > 0


async def test_the_charge_of_a_create_refused_as_existing_reaches_the_sink_as_a_create(
    container: ContainerProxy,
) -> None:
    # A conflict costs request units too ("a conflict costs RU too": the store's own comment):
    # the create a redelivery repeats is refused 409, and its charge is counted.
    store, charges = charged(container)
    await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])

    with pytest.raises(DocumentExists):
        await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])

    assert [operation for operation, _ in charges] == ["create", "create"]
    assert charges[1][1] > 0


@pytest.fixture
async def refusing_requests(
    app_env: dict[str, str], container: ContainerProxy
) -> AsyncIterator[ContainerProxy]:
    """The test's container through the real SDK, every point read and every write answered
    401 (a key the account no longer accepts; the SDK retries no 401), with a charge header as
    every answer of the service carries one."""
    transport = FaultInjectingTransport()
    for requests in (POINT_READS, WRITES):
        transport.add(
            FaultRule(
                FaultKind.STATUS,
                status=401,
                headers={"x-ms-request-charge": "1.5"},
                times=None,
                **requests,
            )
        )
    async with create_client(Settings.from_env(app_env), transport=transport) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        yield database.get_container_client(container.id)


async def test_a_read_refused_is_classified_and_its_charge_reaches_the_sink_as_a_read(
    refusing_requests: ContainerProxy,
) -> None:
    store, charges = charged(refusing_requests)

    with pytest.raises(SystemicStoreError, match=r"^Cosmos DB answered 401: "):
        await store.read("o-1", "x")

    assert charges == [("read", 1.5)]


async def test_a_create_refused_is_classified_and_its_charge_reaches_the_sink_as_a_create(
    refusing_requests: ContainerProxy,
) -> None:
    store, charges = charged(refusing_requests)

    with pytest.raises(SystemicStoreError, match=r"^Cosmos DB answered 401: "):
        await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])

    assert charges == [("create", 1.5)]
