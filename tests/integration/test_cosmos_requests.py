"""What the Cosmos DB adapter (``CosmosOrderStore``) asks of the service, request by request,
as the real azure-cosmos SDK hands each to the azure-core transport (a recording transport below
it, against the local Cosmos server): one document create without the outbox, one transactional
batch with it, the point read of a conflict, each in the order's partition and each bounded by
the operation's absolute timeout.

Why this is checked at the wire and not by outcomes: the local server accepts a single create
sent as a batch, which Cosmos DB would not treat alike (a create is not a batch); a batch without
its partition key (``x-ms-documentdb-partitionkey``) it refuses with 400 as Cosmos DB does
(``local/standins/cosmos_batch.js``), which the wire check names more precisely.
Killed mutants: the create's or the read's ``timeout=`` removed, the create sent as a batch, the
batch's partition key dropped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure.cosmos.aio import CosmosClient
from idempotent_consumer.cosmos import OPERATION_TIMEOUT_S

from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from shared.consumer.errors import OrderAlreadyExists
from tests.integration.test_client_settings import RecordingTransport, SeenRequest

BATCH_HEADER = "x-ms-cosmos-is-batch-request"  # azure/cosmos/http_constants.py:90
PARTITION_KEY_HEADER = "x-ms-documentdb-partitionkey"  # azure/cosmos/http_constants.py:197
# A per-request connect timeout longer than the operation's: what reaches the transport is then
# what is left of the operation's absolute timeout (azure/cosmos/_retry_utility.py:386-398).
SLOW_CONNECT_S = OPERATION_TIMEOUT_S + 10


@pytest.fixture
async def recorded(
    app_env: dict[str, str], container: Any
) -> AsyncIterator[tuple[CosmosOrderStore, RecordingTransport]]:
    transport = RecordingTransport(connection_verify=False)
    client: CosmosClient = create_client(
        Settings.from_env(app_env), transport=transport, connection_timeout=SLOW_CONNECT_S
    )
    async with client:
        proxy = client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(
            app_env["COSMOS_CONTAINER"]
        )
        yield CosmosOrderStore(proxy), transport


def document(kind: str) -> dict[str, Any]:
    suffix = "" if kind == "order" else ":OrderAccepted"
    return {"id": f"ord-1{suffix}", "orderId": "ord-1", "type": kind}


def operations(transport: RecordingTransport) -> list[SeenRequest]:
    return [seen for seen in transport.seen if seen.is_write or seen.is_point_read]


def assert_bounded_and_partitioned(seen: SeenRequest) -> None:
    assert seen.connection_timeout is not None
    assert 0 < seen.connection_timeout <= OPERATION_TIMEOUT_S
    assert json.loads(seen.headers[PARTITION_KEY_HEADER]) == ["ord-1"]


async def test_without_the_outbox_an_order_is_one_document_create(
    recorded: tuple[CosmosOrderStore, RecordingTransport],
) -> None:
    store, transport = recorded

    await store.create([document("order")])

    [create] = operations(transport)
    assert create.method == "POST"
    assert BATCH_HEADER not in create.headers
    assert_bounded_and_partitioned(create)


async def test_with_the_outbox_an_order_is_one_batch_in_its_partition(
    recorded: tuple[CosmosOrderStore, RecordingTransport],
) -> None:
    store, transport = recorded

    await store.create([document("order"), document("outbox")])

    [batch] = operations(transport)
    assert batch.headers.get(BATCH_HEADER) == "True"
    assert_bounded_and_partitioned(batch)


async def test_the_conflict_read_is_a_bounded_point_read_in_the_partition(
    recorded: tuple[CosmosOrderStore, RecordingTransport],
) -> None:
    store, transport = recorded
    await store.create([document("order")])
    with pytest.raises(OrderAlreadyExists):
        await store.create([document("order")])
    transport.seen.clear()

    stored = await store.read_order("ord-1")

    assert stored is not None and stored["id"] == "ord-1"
    [read] = operations(transport)
    assert read.is_point_read
    assert_bounded_and_partitioned(read)
