"""The local Cosmos DB stand-in serves the change feed as the service does
(``local/standins/cosmos_change_feed.js``), read through the real azure-cosmos aio SDK's
``ContainerProxy.query_items_change_feed``, latest-version mode:

- from the beginning, every item's latest version in the order of modification; "from now",
  only what is written after the read; a continuation (the response's ``etag``, kept as Learn's
  pull-model page says: ``container.client_connection.last_response_headers['etag']``) resumes
  exactly after the last item it delivered;
- an item changed twice between two reads comes once, in its latest version, at the place of its
  latest change; deletes are never delivered, nor a batch that rolled back;
- ``max_item_count`` bounds a page, except that a transactional batch is never split (its items
  share one LSN); nothing new is a 304 Not Modified, with the same continuation.

Every test here failed on the package's own answer (cosmosdb-server 1.0.1's request handler
answered any ``A-IM`` request with every document and ``etag: 1``, then 304 for ever). They run
on the session's account, so against the real emulator too when ``COSMOS_EMULATOR_ENDPOINT`` is
set (``tests/conftest.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.core.pipeline import PipelineResponse
from azure.cosmos import exceptions
from azure.cosmos.aio import ContainerProxy

ORDER = "ord-9001"


def item(item_id: str, order: str = ORDER, **fields: Any) -> dict[str, Any]:
    return {"id": item_id, "orderId": order, **fields}


async def read(
    container: ContainerProxy, *, max_item_count: int | None = None, **start: Any
) -> tuple[list[dict[str, Any]], str, int]:
    """One page of the change feed: its items, the continuation after it, the HTTP status."""
    statuses: list[int] = []

    def status(response: PipelineResponse[Any, Any]) -> None:
        if "/docs" in response.http_request.url:
            statuses.append(response.http_response.status_code)

    pages = container.query_items_change_feed(
        max_item_count=max_item_count, raw_response_hook=status, **start
    ).by_page()
    try:
        page = await anext(pages)
        items = [document async for document in page]
    except StopAsyncIteration:  # the SDK ends the iteration on a page with no items
        items = []
    return items, container.client_connection.last_response_headers["etag"], statuses[-1]


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [document["id"] for document in items]


async def test_from_the_beginning_every_item_in_the_order_of_its_last_change(
    container: ContainerProxy,
) -> None:
    for name in ("a", "b", "c"):
        await container.create_item(item(name, version=1))
    await container.upsert_item(item("a", version=2))  # a's latest change is now the last

    items, _, status = await read(container, start_time="Beginning")

    assert (ids(items), status) == (["b", "c", "a"], 200)
    assert items[-1]["version"] == 2


async def test_from_now_only_what_is_written_after_the_read(container: ContainerProxy) -> None:
    await container.create_item(item("before"))

    items, now, status = await read(container, start_time="Now")
    await container.create_item(item("after"))
    after, _, _ = await read(container, continuation=now)

    assert (items, status) == ([], 304)
    assert ids(after) == ["after"]


async def test_a_continuation_resumes_exactly_after_its_page(container: ContainerProxy) -> None:
    for number in range(5):
        await container.create_item(item(f"doc-{number}"))

    first, token, _ = await read(container, max_item_count=2, start_time="Beginning")
    second, token, _ = await read(container, max_item_count=2, continuation=token)
    third, token, _ = await read(container, max_item_count=2, continuation=token)
    await container.create_item(item("doc-5"))
    fourth, _, _ = await read(container, max_item_count=2, continuation=token)

    assert [ids(first), ids(second), ids(third), ids(fourth)] == [
        ["doc-0", "doc-1"],
        ["doc-2", "doc-3"],
        ["doc-4"],
        ["doc-5"],
    ]


async def test_an_item_changed_twice_between_reads_comes_once_in_its_latest_version(
    container: ContainerProxy,
) -> None:
    for name in ("a", "b"):
        await container.create_item(item(name, version=1))
    _, token, _ = await read(container, start_time="Beginning")

    await container.upsert_item(item("a", version=2))
    await container.upsert_item(item("b", version=2))
    await container.upsert_item(item("a", version=3))
    items, _, _ = await read(container, continuation=token)

    assert [(d["id"], d["version"]) for d in items] == [("b", 2), ("a", 3)]


async def test_nothing_new_is_304_with_the_same_continuation(container: ContainerProxy) -> None:
    await container.create_item(item("a"))
    _, token, _ = await read(container, start_time="Beginning")

    items, again, status = await read(container, continuation=token)
    await container.create_item(item("b"))
    later, _, _ = await read(container, continuation=again)

    assert (items, status) == ([], 304)
    assert ids(later) == ["b"]


async def test_a_transactional_batch_is_one_page_beyond_max_item_count(
    container: ContainerProxy,
) -> None:
    await container.create_item(item("alone"))
    await container.execute_item_batch(
        [("create", (item(f"batched-{n}"),)) for n in range(3)], partition_key=ORDER
    )
    await container.create_item(item("after"))

    first, token, _ = await read(container, max_item_count=2, start_time="Beginning")
    second, token, _ = await read(container, max_item_count=2, continuation=token)
    third, _, _ = await read(container, max_item_count=2, continuation=token)

    # The service never splits a transaction: its items share one LSN (azure-cosmos-dotnet-v3
    # #2644), so the page holding the batch holds all of it.
    assert [ids(first), ids(second), ids(third)] == [
        ["alone", "batched-0", "batched-1", "batched-2"],
        ["after"],
        [],
    ]


async def test_deletes_and_rolled_back_batches_are_never_delivered(
    container: ContainerProxy,
) -> None:
    for name in ("a", "b", "gone"):
        await container.create_item(item(name))
    await container.delete_item("gone", partition_key=ORDER)
    _, token, _ = await read(container, start_time="Now")

    await container.delete_item("a", partition_key=ORDER)
    await container.upsert_item(item("b", version=2))
    with pytest.raises(exceptions.CosmosBatchOperationError):  # b exists: nothing written
        await container.execute_item_batch(
            [("create", (item("c"),)), ("create", (item("b"),))], partition_key=ORDER
        )
    since, _, _ = await read(container, continuation=token)
    everything, _, _ = await read(container, start_time="Beginning")

    assert ids(since) == ["b"]
    assert ids(everything) == ["b"]


async def test_every_partition_s_changes_in_one_feed(container: ContainerProxy) -> None:
    await container.create_item(item("x", order="ord-1"))
    await container.create_item(item("y", order="ord-2"))
    await container.upsert_item(item("x", order="ord-1", version=2))

    items, _, _ = await read(container, start_time="Beginning")

    assert [(d["orderId"], d["id"]) for d in items] == [("ord-2", "y"), ("ord-1", "x")]
