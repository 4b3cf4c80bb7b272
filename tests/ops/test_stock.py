"""``python -m ops stock``: stock items set, seeded, shown and audited through the tool's Cosmos
DB adapter (the real azure-cosmos sync client) against the local Cosmos DB server, around the
stock reservation consumer's own writes (the kit through the app's adapter, azure-cosmos aio,
against the atomic local batch). What an operator checks: what the tool printed and its exit
status, and the stock items as stored."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from azure.core.pipeline.transport import HttpRequest, RequestsTransport
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from idempotent_consumer import Outcome, decide
from idempotent_consumer.cosmos import CosmosDocumentStore

from local.standins.cosmos_server import ensure_container
from ops.cli import main
from ops.cosmos_inventory import CosmosInventory
from ops.stock import Inventory, Patched
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import STOCK_ITEM_ID
from tests.stock.events import event_message

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)


class RecordingTransport(RequestsTransport):  # type: ignore[misc]
    """The SDK's own transport, keeping each request it sends."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[HttpRequest] = []

    def send(self, request: HttpRequest, **kwargs: Any) -> Any:
        self.requests.append(request)
        return super().send(request, **kwargs)


@pytest.fixture
async def inventory_name(app_env: dict[str, str]) -> AsyncIterator[str]:
    """A fresh inventory container (``/sku``) in the test's account."""
    async with AsyncCosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        name = f"inventory-{uuid.uuid4().hex[:8]}"
        await ensure_container(client, app_env["COSMOS_DATABASE"], name, "/sku")
        yield name
        await client.get_database_client(app_env["COSMOS_DATABASE"]).delete_container(name)


@pytest.fixture
def transport() -> RecordingTransport:
    return RecordingTransport(connection_verify=False)


@pytest.fixture
def inventory(
    app_env: dict[str, str], inventory_name: str, transport: RecordingTransport
) -> Iterator[ContainerProxy]:
    """The inventory container as the tool reaches it (the sync SDK, recorded)."""
    with CosmosClient(
        app_env["COSMOS_ENDPOINT"],
        credential=app_env["COSMOS_KEY"],
        connection_verify=False,
        transport=transport,
    ) as client:
        container = client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(
            inventory_name
        )
        container.read()  # its properties (partition key path), cached by the SDK
        transport.requests.clear()
        yield container


def ops(tool: Any, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["stock", *argv], inventory=tool, out=out)
    return code, out.getvalue()


def stored(container: ContainerProxy, sku: str) -> dict[str, Any]:
    return dict(container.read_item(STOCK_ITEM_ID, partition_key=sku))


async def reserve(app_env: dict[str, str], container: str, *events: Any) -> list[Outcome]:
    """The consumer's own writes: each event decided by the kit through the app's adapter."""
    settings = Settings.from_env(app_env)
    async with create_client(settings) as client:
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(container)
        store = CosmosDocumentStore(proxy)
        return [
            (await decide(stock_reservation, event, store, marker_ttl_s=600, now=NOW)).outcome
            for event in events
        ]


async def test_seed_creates_the_stock_items_and_show_prints_them_from_one_query_each(
    app_env: dict[str, str],
    inventory_name: str,
    inventory: ContainerProxy,
    transport: RecordingTransport,
    tmp_path: Path,
) -> None:
    seed = tmp_path / "stock.json"
    seed.write_text(json.dumps({"SKU-1": 10, "SKU-2": 2}))
    tool = CosmosInventory(inventory)

    code, text = ops(tool, "seed", str(seed))

    assert code == 0, text
    assert "2 of 2 SKU(s) set" in text
    assert (stored(inventory, "SKU-1")["onHand"], stored(inventory, "SKU-1")["reserved"]) == (10, 0)
    outcomes = await reserve(
        app_env,
        inventory_name,
        event_message("o-1", 1, {"SKU-1": 3, "SKU-2": 5}),  # 3 of SKU-2 short
        event_message("o-2", 1, {"SKU-1": 1}),
    )
    assert outcomes == [Outcome.PROCESSED, Outcome.PROCESSED]
    transport.requests.clear()

    code, text = ops(tool, "show", "SKU-1", "SKU-2", "--json")

    assert code == 0, text
    shown = {row["sku"]: row for row in json.loads(text)["skus"]}
    assert {
        sku: (r["onHand"], r["reserved"], r["free"], r["backordered"]) for sku, r in shown.items()
    } == {
        "SKU-1": (10, 4, 6, 0),
        "SKU-2": (2, 2, 0, 3),
    }
    assert (shown["SKU-1"]["reservations"], shown["SKU-2"]["reservations"]) == (2, 1)
    # One query per SKU, each scoped to the SKU's partition: never a cross-partition scan.
    queries = [r for r in transport.requests if r.headers.get("x-ms-documentdb-isquery") == "true"]
    assert [q.headers["x-ms-documentdb-partitionkey"] for q in queries] == [
        '["SKU-1"]',
        '["SKU-2"]',
    ]
    assert all(
        q.headers.get("x-ms-documentdb-query-enablecrosspartition") != "true" for q in queries
    )

    code, text = ops(tool, "show")

    assert code == 0
    assert "2 SKU(s), one query of each SKU's partition" in text


async def test_onhand_below_what_is_reserved_is_refused_and_left_as_it_was(
    app_env: dict[str, str], inventory_name: str, inventory: ContainerProxy
) -> None:
    tool = CosmosInventory(inventory)
    assert ops(tool, "set", "SKU-1", "5")[0] == 0
    await reserve(app_env, inventory_name, event_message("o-1", 1, {"SKU-1": 4}))

    code, text = ops(tool, "set", "SKU-1", "3", "SKU-2", "7")

    assert code == 1
    assert "4 reserved, more than onHand 3 (onHand stays 5" in text
    assert "not set: SKU-1" in text
    assert (stored(inventory, "SKU-1")["onHand"], stored(inventory, "SKU-1")["reserved"]) == (5, 4)
    assert stored(inventory, "SKU-2")["onHand"] == 7  # the others are still set

    code, text = ops(tool, "set", "SKU-1", "4")

    assert code == 0, text
    assert "onHand 5 -> 4 (4 reserved)" in text


class ConsumerBetween(CosmosInventory):
    """The tool's adapter, with the consumer reserving ``amount`` more of the SKU (its
    increment, as its batch commits it) after the tool read the stock item and before its
    patch: the race the patch's condition must win."""

    def __init__(self, container: ContainerProxy, amount: int) -> None:
        super().__init__(container)
        self._container_for_race = container
        self._amount = amount

    def set_on_hand(self, sku: str, on_hand: int) -> Patched:
        if self._amount:
            self._container_for_race.patch_item(
                STOCK_ITEM_ID,
                partition_key=sku,
                patch_operations=[{"op": "incr", "path": "/reserved", "value": self._amount}],
            )
            self._amount = 0
        return super().set_on_hand(sku, on_hand)


async def test_a_reservation_committed_while_the_tool_decides_is_never_undercut_nor_lost(
    inventory: ContainerProxy,
) -> None:
    """Applied by hand without the patch's filter predicate, the first set leaves onHand 3
    below reserved 4 (the test fails)."""
    assert ops(CosmosInventory(inventory), "set", "SKU-1", "5")[0] == 0
    inventory.patch_item(
        STOCK_ITEM_ID,
        partition_key="SKU-1",
        patch_operations=[{"op": "set", "path": "/reserved", "value": 2}],
    )

    lowered = ops(ConsumerBetween(inventory, 2), "set", "SKU-1", "3")  # read 2 reserved; now 4
    raised = ops(ConsumerBetween(inventory, 3), "set", "SKU-1", "9")  # read 4 reserved; now 7

    assert lowered[0] == 1 and "4 reserved, more than onHand 3" in lowered[1]
    assert raised[0] == 0 and "onHand 5 -> 9" in raised[1]
    item = stored(inventory, "SKU-1")
    assert (item["onHand"], item["reserved"]) == (9, 7)  # no increment lost, none undercut


async def test_the_audit_passes_the_consumer_s_state_and_names_a_sku_edited_by_hand(
    app_env: dict[str, str], inventory_name: str, inventory: ContainerProxy
) -> None:
    tool = CosmosInventory(inventory)
    assert ops(tool, "set", "SKU-1", "5", "SKU-2", "5", "SKU-3", "1")[0] == 0
    outcomes = await reserve(
        app_env,
        inventory_name,
        event_message("o-1", 1, {"SKU-1": 2, "SKU-2": 1}),
        event_message("o-2", 1, {"SKU-1": 2, "SKU-3": 4}),
        event_message("o-1", 2, {"SKU-2": 3}),  # releases SKU-1, adjusts SKU-2
        event_message("o-2", 2, cancelled=True),
    )
    assert set(outcomes) == {Outcome.PROCESSED}

    code, text = ops(tool, "audit")

    assert code == 0, text
    assert text.count("PASS") == 3

    inventory.patch_item(
        STOCK_ITEM_ID,
        partition_key="SKU-2",
        patch_operations=[{"op": "set", "path": "/reserved", "value": 1}],
    )
    inventory.patch_item(
        STOCK_ITEM_ID,
        partition_key="SKU-3",
        patch_operations=[{"op": "set", "path": "/onHand", "value": -1}],
    )

    code, text = ops(tool, "audit", "--json")

    assert code == 1
    report = json.loads(text)
    assert report["broken"] == ["SKU-2", "SKU-3"]
    problems = {row["sku"]: row["problems"] for row in report["skus"]}
    assert problems["SKU-1"] == []
    assert problems["SKU-2"] == ["reserved 1 != 3, the sum of its reservations"]
    assert problems["SKU-3"] == ["reserved 0 is not within 0..onHand -1"]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "stock.json"
    bad.write_text(json.dumps({"SKU-1": -3}))
    unreachable = cast(Inventory, object())  # never reached: the arguments are refused first
    for argv in (("set", "SKU-1"), ("set", "SKU-1", "many"), ("seed", str(bad))):
        code, text = ops(unreachable, *argv)
        assert code == 2, (argv, text)
        assert text.startswith("error:")


async def test_a_sku_never_stocked_shows_its_backorders_and_passes_the_audit(
    app_env: dict[str, str], inventory_name: str, inventory: ContainerProxy
) -> None:
    tool = CosmosInventory(inventory)
    outcomes = await reserve(app_env, inventory_name, event_message("o-1", 1, {"SKU-Z": 4}))
    assert outcomes == [Outcome.PROCESSED]

    code, text = ops(tool, "show", "SKU-Z", "--json")

    row = json.loads(text)["skus"][0]
    assert code == 0
    assert (row["stocked"], row["onHand"], row["backordered"], row["reservations"]) == (
        False,
        None,
        4,
        1,
    )
    assert ops(tool, "audit", "SKU-Z")[0] == 0
    assert ops(tool, "show")[1].count("SKU-Z") == 0  # only stocked SKUs without names
