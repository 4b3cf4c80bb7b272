"""A query with a partition key reads that logical partition only, as in Cosmos DB
(``local/standins/cosmos_partition_index.js``: an index of the local server's documents by
partition key value, so that such a query costs the partition, not the container), through
the real azure-cosmos aio SDK.

``test_a_query_scoped_to_a_partition_returns_none_of_another`` failed on the package's own
handler (it ran the query over every document, so a filter naming two partitions answered
both). ``test_the_index_follows_every_write`` guards the index against drifting from the store
(it fails with the index's delete hook removed: the deleted item still answered).
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos import exceptions
from azure.cosmos.aio import ContainerProxy

QUERY = "SELECT * FROM c WHERE c.orderId IN (@one, @two)"
PARAMETERS: list[dict[str, Any]] = [
    {"name": "@one", "value": "ord-1"},
    {"name": "@two", "value": "ord-2"},
]


def item(item_id: str, order: str, **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "orderId": order, **fields}


async def in_partition(container: ContainerProxy, order: str) -> list[tuple[str, Any]]:
    found = container.query_items(QUERY, parameters=PARAMETERS, partition_key=order)
    return sorted([(d["id"], d.get("version")) async for d in found])


async def test_a_query_scoped_to_a_partition_returns_none_of_another(
    container: ContainerProxy,
) -> None:
    await container.create_item(item("a", "ord-1"))
    await container.create_item(item("b", "ord-2"))

    assert await in_partition(container, "ord-1") == [("a", None)]
    assert await in_partition(container, "ord-2") == [("b", None)]
    across = container.query_items(QUERY, parameters=PARAMETERS)  # cross-partition: both
    assert sorted([d["id"] async for d in across]) == ["a", "b"]


async def test_the_index_follows_every_write(container: ContainerProxy) -> None:
    for name in ("a", "b", "c"):
        await container.create_item(item(name, "ord-1", version=1))
    await container.replace_item("a", item("a", "ord-1", version=2))
    await container.delete_item("b", partition_key="ord-1")
    await container.patch_item(
        "c", partition_key="ord-1", patch_operations=[{"op": "set", "path": "/version", "value": 3}]
    )
    with pytest.raises(exceptions.CosmosBatchOperationError):  # rolled back: nothing changes
        await container.execute_item_batch(
            [
                ("create", (item("d", "ord-1"),)),
                ("replace", ("a", item("a", "ord-1", version=9))),
                ("create", (item("a", "ord-1"),)),  # a exists: 409, the batch rolls back
            ],
            partition_key="ord-1",
        )
    await container.upsert_item(item("e", "ord-1", version=1))

    assert await in_partition(container, "ord-1") == [("a", 2), ("c", 3), ("e", 1)]
