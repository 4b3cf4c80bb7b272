"""The local Cosmos DB stand-in answers a transactional batch and a conditional patch as the
service does (``local/standins/cosmos_batch.js``), through the real azure-cosmos aio SDK.

All or nothing: a failing operation leaves every earlier one unwritten and the SDK raises
``CosmosBatchOperationError`` naming it, the others 424; a patch inside the batch runs with its
filter predicate and ``ifMatch`` (412 when unmet, 404 for a missing item); the whole request is
refused (400) beyond 100 operations or across partition key values. A single-item patch reads
its filter predicate as written (case-sensitive property names), and a point read of a missing
item is 404.

Every test here failed on the package as published (``LocalCosmosServer(keep_alive=False)``:
its own handlers): the earlier operations stayed written, a batch with a patch answered 400,
the camelCase predicate was lower-cased into 412, the missing read answered 500. They run on
the session's account, so against the real emulator too when ``COSMOS_EMULATOR_ENDPOINT`` is
set (``tests/conftest.py``): the stand-in and the service answer the same tests.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest
from azure.cosmos import exceptions
from azure.cosmos.aio import ContainerProxy

from tests.state import documents

ORDER = "ord-7001"
Operation = tuple[Any, ...]


def item(item_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "orderId": ORDER, **fields}


def create(item_id: str, **fields: Any) -> Operation:
    return ("create", (item(item_id, **fields),))


def patch(item_id: str, operations: list[dict[str, Any]], **options: Any) -> Operation:
    return ("patch", (item_id, operations), options)


async def stored(container: ContainerProxy) -> dict[str, dict[str, Any]]:
    """Every stored item by id, with its system properties (``_etag``, ``_ts``, ``_rid``)."""
    return {document["id"]: document for document in await documents(container)}


async def failed_batch(
    container: ContainerProxy, operations: Sequence[Operation]
) -> exceptions.CosmosBatchOperationError:
    with pytest.raises(exceptions.CosmosBatchOperationError) as raised:
        await container.execute_item_batch(list(operations), partition_key=ORDER)
    return raised.value


def statuses(error: exceptions.CosmosBatchOperationError) -> list[int]:
    return [int(result["statusCode"]) for result in error.operation_responses]


async def test_a_conflict_at_the_second_operation_leaves_the_first_unwritten(
    container: ContainerProxy,
) -> None:
    await container.create_item(item("marker"))

    error = await failed_batch(container, [create("order"), create("marker"), create("event")])

    assert (error.error_index, error.status_code) == (1, 409)
    assert statuses(error) == [424, 409, 424]
    assert set(await stored(container)) == {"marker"}


async def test_a_batch_of_create_conditional_patch_and_create_commits_as_a_whole(
    container: ContainerProxy,
) -> None:
    order = await container.create_item(item("order", orderVersion=1, status="accepted"))
    change: list[dict[str, Any]] = [
        {"op": "set", "path": "/orderVersion", "value": 2},
        {"op": "set", "path": "/status", "value": "cancelled"},
    ]

    results = await container.execute_item_batch(
        [
            create("marker"),
            patch("order", change, filter_predicate="FROM c WHERE c.orderVersion < 2"),
            create("event"),
        ],
        partition_key=ORDER,
    )

    assert [result["statusCode"] for result in results] == [201, 200, 201]
    after = await stored(container)
    assert set(after) == {"order", "marker", "event"}
    assert (after["order"]["orderVersion"], after["order"]["status"]) == (2, "cancelled")
    assert after["order"]["_etag"] != order["_etag"]  # a patch is a new version of the item
    assert results[1]["eTag"] == after["order"]["_etag"]
    assert results[1]["resourceBody"]["orderVersion"] == 2


async def test_an_unmet_filter_predicate_fails_the_batch_with_412_and_writes_nothing(
    container: ContainerProxy,
) -> None:
    await container.create_item(item("order", orderVersion=3))
    before = await stored(container)
    stale = patch(
        "order",
        [{"op": "set", "path": "/orderVersion", "value": 2}],
        filter_predicate="FROM c WHERE c.orderVersion < 2",
    )

    error = await failed_batch(container, [create("marker"), stale, create("event")])

    assert (error.error_index, error.status_code) == (1, 412)
    assert statuses(error) == [424, 412, 424]
    assert await stored(container) == before  # not even the order's _etag moved


async def test_a_patch_of_a_missing_item_fails_the_batch_with_404(
    container: ContainerProxy,
) -> None:
    change = [{"op": "set", "path": "/orderVersion", "value": 2}]

    error = await failed_batch(container, [create("marker"), patch("order", change)])

    assert (error.error_index, error.status_code) == (1, 404)
    assert statuses(error) == [424, 404]
    assert await stored(container) == {}


async def test_incr_in_a_batch_adds_to_the_stored_value(container: ContainerProxy) -> None:
    await container.create_item(item("counter", applied=4))

    await container.execute_item_batch(
        [
            patch("counter", [{"op": "incr", "path": "/applied", "value": 3}]),
            patch("counter", [{"op": "incr", "path": "/skipped", "value": 1}]),
        ],
        partition_key=ORDER,
    )

    counter = (await stored(container))["counter"]
    assert (counter["applied"], counter["skipped"]) == (7, 1)  # incr of a missing field sets it


async def test_if_match_is_checked_per_operation(container: ContainerProxy) -> None:
    first = await container.create_item(item("order", orderVersion=1))
    current = await container.replace_item("order", item("order", orderVersion=2))
    change = [{"op": "set", "path": "/orderVersion", "value": 3}]

    error = await failed_batch(
        container, [create("marker"), patch("order", change, if_match_etag=first["_etag"])]
    )
    assert (error.error_index, error.status_code) == (1, 412)
    assert set(await stored(container)) == {"order"}

    results = await container.execute_item_batch(
        [create("marker"), patch("order", change, if_match_etag=current["_etag"])],
        partition_key=ORDER,
    )
    assert [result["statusCode"] for result in results] == [201, 200]
    assert (await stored(container))["order"]["orderVersion"] == 3


async def test_every_kind_of_write_is_undone_when_the_last_operation_fails(
    container: ContainerProxy,
) -> None:
    for name in ("replaced", "upserted", "deleted", "patched", "marker"):
        await container.create_item(item(name, value=name))
    before = await stored(container)

    error = await failed_batch(
        container,
        [
            ("replace", ("replaced", item("replaced", value="new"))),
            ("upsert", (item("upserted", value="new"),)),
            ("upsert", (item("created-by-upsert"),)),
            ("delete", ("deleted",)),
            patch("patched", [{"op": "remove", "path": "/value"}]),
            create("created"),
            create("marker"),
        ],
    )

    assert (error.error_index, error.status_code) == (6, 409)
    assert await stored(container) == before  # same items, same _etag, _ts and _rid


async def test_concurrent_conditional_batches_each_commit_or_write_nothing(
    container: ContainerProxy,
) -> None:
    """Twenty versions of one order, each a batch of its marker and a patch to its version if
    the stored one is lower, sent at once in a shuffled order: the order ends at the highest
    version, and a marker exists exactly for each batch that committed."""
    await container.create_item(item("order", orderVersion=1))
    versions = list(range(2, 22))
    random.Random(26).shuffle(versions)

    async def apply(version: int) -> tuple[int, int] | None:
        """None when committed, else the failing operation's index and status."""
        newer = [{"op": "set", "path": "/orderVersion", "value": version}]
        try:
            await container.execute_item_batch(
                [
                    create(f"marker-{version}"),
                    patch(
                        "order", newer, filter_predicate=f"FROM c WHERE c.orderVersion < {version}"
                    ),
                ],
                partition_key=ORDER,
            )
        except exceptions.CosmosBatchOperationError as error:
            return (int(error.error_index), int(error.status_code or 0))
        return None

    failures = await asyncio.gather(*(apply(version) for version in versions))

    assert {failure for failure in failures if failure is not None} <= {(1, 412)}

    after = await stored(container)
    assert after["order"]["orderVersion"] == 21
    markers = {name for name in after if name.startswith("marker-")}
    assert markers == {
        f"marker-{version}"
        for version, failure in zip(versions, failures, strict=True)
        if failure is None
    }


async def test_a_batch_over_100_operations_is_refused_as_a_whole(
    container: ContainerProxy,
) -> None:
    with pytest.raises(exceptions.CosmosHttpResponseError) as raised:
        await container.execute_item_batch(
            [create(f"item-{index}") for index in range(101)], partition_key=ORDER
        )

    assert raised.value.status_code == 400
    assert await stored(container) == {}


async def test_an_operation_on_another_partition_key_value_refuses_the_batch(
    container: ContainerProxy,
) -> None:
    elsewhere = ("create", ({"id": "other", "orderId": "ord-7002"},))

    with pytest.raises(exceptions.CosmosHttpResponseError) as raised:
        await container.execute_item_batch([create("marker"), elsewhere], partition_key=ORDER)

    assert raised.value.status_code == 400
    assert await stored(container) == {}


async def test_a_single_patch_reads_a_camel_case_filter_predicate_as_written(
    container: ContainerProxy,
) -> None:
    await container.create_item(item("order", orderVersion=2))
    newer = [{"op": "set", "path": "/orderVersion", "value": 3}]

    patched = await container.patch_item(
        "order", ORDER, newer, filter_predicate="FROM c WHERE c.orderVersion < 3"
    )
    assert patched["orderVersion"] == 3

    with pytest.raises(exceptions.CosmosHttpResponseError) as raised:
        await container.patch_item(
            "order", ORDER, newer, filter_predicate="FROM c WHERE c.orderVersion < 3"
        )
    assert raised.value.status_code == 412


async def test_a_point_read_of_a_missing_item_is_404(container: ContainerProxy) -> None:
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        await container.read_item("never-written", partition_key=ORDER)
