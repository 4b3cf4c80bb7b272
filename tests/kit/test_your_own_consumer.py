"""docs/your-own-consumer.md runs as written: its code is examples/units_sold.py, and
that code counts units sold per SKU per day exactly once through the kit, with the real
azure-cosmos SDK (the app's document store adapter) against the local Cosmos DB server's atomic
batch: redeliveries, concurrent deliveries, and a stop between two SKUs' batches."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient
from idempotent_consumer import (
    Decision,
    IncomingMessage,
    Outcome,
    TransientStoreError,
    Write,
    decide,
)
from idempotent_consumer.cosmos import CosmosDocumentStore

from examples.units_sold import units_sold
from ops.sample_orders import order_body
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings
from tests.kit.test_fresh_app import function_app_text

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 30, 9, tzinfo=UTC)


def test_the_page_shows_the_whole_one_file_app_the_fresh_app_test_runs() -> None:
    """docs/your-own-consumer.md's file is the example's code and its binding, byte for byte:
    what ``tests/kit/test_fresh_app.py`` installs and runs from the wheel."""
    page = (REPO / "docs" / "your-own-consumer.md").read_text(encoding="utf-8")
    section = page.split("## One install, one file", 1)[1]
    shown = re.search(r"```python\n(.*?)```", section, re.S)
    assert shown is not None
    assert shown.group(1) == function_app_text()


@pytest.fixture
async def sku_container(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """A container partitioned on /sku, as such a consumer's would be, in the test's account."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = await client.create_database_if_not_exists(app_env["COSMOS_DATABASE"])
        name = f"units-{uuid.uuid4().hex[:8]}"
        yield await database.create_container(name, partition_key=PartitionKey(path="/sku"))
        await database.delete_container(name)


@pytest.fixture
async def store(app_env: dict[str, str], sku_container: ContainerProxy) -> AsyncIterator[Any]:
    settings = Settings.from_env(app_env)
    async with create_client(settings) as client:
        database = client.get_database_client(settings.cosmos_database)
        yield CosmosDocumentStore(database.get_container_client(sku_container.id))


def accepted(order_id: str, event_id: str, lines: list[dict[str, Any]]) -> IncomingMessage:
    payload = {**order_body(order_id, placedAt="2026-11-30T08:00:00Z"), "lines": lines}
    body = json.dumps({"eventType": "OrderAccepted", "payload": payload}).encode()
    return IncomingMessage(event_id, body, subject="OrderAccepted")


def line(sku: str, quantity: int) -> dict[str, Any]:
    return {"sku": sku, "quantity": quantity, "unitPriceMinor": 100}


async def deliver(store: Any, message: IncomingMessage) -> Decision:
    return await decide(units_sold, message, store, marker_ttl_s=600, now=NOW)


async def units(container: ContainerProxy) -> dict[str, int]:
    query = "SELECT * FROM c WHERE c.day = '2026-11-30'"
    return {item["sku"]: item["units"] async for item in container.query_items(query)}


async def test_units_are_counted_once_whatever_the_redeliveries(
    store: Any, sku_container: ContainerProxy
) -> None:
    first = accepted("ord-1", "event-1", [line("SKU-1", 2), line("SKU-2", 1)])
    second = accepted("ord-2", "event-2", [line("SKU-1", 3)])

    outcomes = [(await deliver(store, message)).outcome for message in (first, second, first)]
    concurrent = await asyncio.gather(*(deliver(store, second) for _ in range(5)))

    assert outcomes == [Outcome.PROCESSED, Outcome.PROCESSED, Outcome.DUPLICATE]
    assert {decision.outcome for decision in concurrent} == {Outcome.DUPLICATE}
    assert await units(sku_container) == {"SKU-1": 5, "SKU-2": 1}


async def test_concurrent_first_deliveries_of_new_sales_all_count(
    store: Any, sku_container: ContainerProxy
) -> None:
    """The day's counter does not exist yet: every sale races to create it; the losers meet it
    and increment it instead (``Again``)."""
    sales = [accepted(f"ord-{n}", f"event-{n}", [line("SKU-7", 1)]) for n in range(6)]

    decisions = await asyncio.gather(*(deliver(store, sale) for sale in sales))

    assert {decision.outcome for decision in decisions} == {Outcome.PROCESSED}
    assert await units(sku_container) == {"SKU-7": 6}


class StopsAfter:
    """The adapter, stopping (a transient failure) before the commit in a given partition."""

    def __init__(self, store: Any, partition: str) -> None:
        self._store, self._partition = store, partition

    async def commit(self, partition_key: str, writes: list[Write]) -> None:
        if partition_key == self._partition:
            raise TransientStoreError("the worker stopped here")
        await self._store.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Any:
        return await self._store.read(partition_key, document_id)


async def test_a_stop_between_two_skus_leaves_the_first_complete_and_the_redelivery_the_rest(
    store: Any, sku_container: ContainerProxy
) -> None:
    sale = accepted("ord-1", "event-1", [line("SKU-1", 2), line("SKU-2", 4), line("SKU-3", 1)])

    stopped = await deliver(StopsAfter(store, "SKU-2"), sale)
    halfway = await units(sku_container)
    redelivered = await deliver(store, sale)

    assert stopped.outcome is Outcome.TRANSIENT
    assert halfway == {"SKU-1": 2}
    assert redelivered.outcome is Outcome.PROCESSED
    assert await units(sku_container) == {"SKU-1": 2, "SKU-2": 4, "SKU-3": 1}
