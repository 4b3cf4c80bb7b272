"""``python -m ops history ORDER_ID``: an order's history, read through the tool's Cosmos DB
adapter (the real azure-cosmos sync client against the local Cosmos DB server) after the real
function (Microsoft's worker) handled a lifecycle out of order and the real relay published it.
What an on-call person checks: the order, its markers and events in version order, and that the
read was one query scoped to the order's partition."""

from __future__ import annotations

import io
import json
from typing import Any

from azure.core.pipeline.transport import HttpRequest, RequestsTransport
from azure.cosmos import CosmosClient
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import OutgoingMessage, PeekLockQueue
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.host import LocalFunctionsHost
from ops.cli import main
from ops.cosmos import CosmosOrderHistory
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared.relay.outbox import order_event_id, version_event_id
from tests.lifecycle.conftest import (
    captured_relay,
    change_feed,
    relay,
    relay_cosmos_options,
    topic,
)

__all__ = ["captured_relay", "change_feed", "relay", "relay_cosmos_options", "topic"]  # fixtures


class RecordingTransport(RequestsTransport):  # type: ignore[misc]
    """The SDK's own transport, keeping each request it sends."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[HttpRequest] = []

    def send(self, request: HttpRequest, **kwargs: Any) -> Any:
        self.requests.append(request)
        return super().send(request, **kwargs)


def tool(app_env: dict[str, str]) -> tuple[CosmosOrderHistory, RecordingTransport]:
    transport = RecordingTransport(connection_verify=False)
    client = CosmosClient(
        app_env["COSMOS_ENDPOINT"],
        credential=app_env["COSMOS_KEY"],
        connection_verify=False,
        transport=transport,
    )
    container = client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(
        app_env["COSMOS_CONTAINER"]
    )
    container.read()  # the container's properties (partition key path), cached by the SDK
    transport.requests.clear()
    return CosmosOrderHistory(container), transport


def history(partition: CosmosOrderHistory, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["history", *argv], partition=partition, out=out)
    return code, out.getvalue()


def placed(order_id: str) -> OutgoingMessage:
    return OutgoingMessage(order_id, json.dumps(order_body(order_id)).encode(), "c")


def change(order_id: str, subject: str, version: int) -> OutgoingMessage:
    body = (amended_body if subject == "OrderAmended" else cancelled_body)(order_id, version)
    return OutgoingMessage(
        lifecycle_message_id(order_id, version), json.dumps(body).encode(), "c", subject=subject
    )


async def test_history_shows_the_order_its_markers_and_events_in_version_order_from_one_partition(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    change_feed: ChangeFeedEmulator,
    app_env: dict[str, str],
) -> None:
    order = "ord-8001"
    queue.send(placed("ord-8002"))  # another order: not read
    queue.send(placed(order))
    await host.run_until_idle()
    for outgoing in (
        change(order, "OrderAmended", 3),
        change(order, "OrderAmended", 2),  # arrives after v3: stale
        change(order, "OrderCancelled", 4),
    ):
        queue.send(outgoing)
        await host.run_until_idle()
    await change_feed.drain()
    partition, transport = tool(app_env)

    code, text = history(partition, order, "--json")

    assert code == 0, text
    shown = json.loads(text)
    assert {k: shown["order"][k] for k in ("status", "orderVersion", "createdBy")} == {
        "status": "cancelled",
        "orderVersion": 4,
        "createdBy": "OrderPlaced",
    }
    assert shown["order"]["messageId"] == order
    assert [(m["messageId"], m["orderVersion"], m["outcome"]) for m in shown["markers"]] == [
        (f"{order}:v2", 2, "stale"),
        (f"{order}:v3", 3, "processed"),
        (f"{order}:v4", 4, "processed"),
    ]
    assert all(m["ttl"] > 0 and m["handledAt"] for m in shown["markers"])
    assert [
        (e["eventType"], e["orderVersion"], e["eventId"], e["status"]) for e in shown["events"]
    ] == [
        ("OrderAccepted", 1, order_event_id(order), "dispatched"),
        ("OrderAmended", 3, version_event_id(order, 3), "dispatched"),
        ("OrderCancelled", 4, version_event_id(order, 4), "dispatched"),
    ]
    assert all(e["createdAt"] and e["dispatchedAt"] for e in shown["events"])
    assert shown["documentsRead"] == 7  # the order, 3 markers, 3 events: ord-8002 not read
    assert shown["requestCharge"] > 0
    # One query, scoped to the order's partition key: never a cross-partition scan. (The SDK's
    # read of the account, ``GET /``, the endpoint discovery a client makes when it starts or
    # refreshes its regions, reads no document.)
    data = [r for r in transport.requests if not (r.method == "GET" and r.url.count("/") == 3)]
    [query] = data
    assert (query.method, query.url.rstrip("/").rsplit("/", 1)[-1]) == ("POST", "docs")
    assert query.headers["x-ms-documentdb-isquery"] == "true"
    assert query.headers["x-ms-documentdb-partitionkey"] == f'["{order}"]'
    assert query.headers.get("x-ms-documentdb-query-enablecrosspartition") != "true"

    code, text = history(partition, order)

    assert code == 0
    assert f"order {order}: cancelled at" in text
    assert "version 4, created by OrderPlaced" in text
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert [row.split("│")[1:3] for row in rows] == [
        [" 1       ", " order  "],
        [" 1       ", " event  "],
        [" 2       ", " marker "],
        [" 3       ", " marker "],
        [" 3       ", " event  "],
        [" 4       ", " marker "],
        [" 4       ", " event  "],
    ]
    assert "3 marker(s), 3 event(s); 7 document(s) read from one partition" in text


async def test_an_order_created_by_its_amendment_shows_the_late_order_placed_as_stale(
    host: LocalFunctionsHost, queue: PeekLockQueue, app_env: dict[str, str]
) -> None:
    order = "ord-8003"
    queue.send(change(order, "OrderAmended", 2))
    await host.run_until_idle()
    queue.send(placed(order))
    await host.run_until_idle()
    partition, _ = tool(app_env)

    code, text = history(partition, order, "--json")

    shown = json.loads(text)
    assert (code, shown["order"]["createdBy"], shown["order"]["orderVersion"]) == (
        0,
        "OrderAmended",
        2,
    )
    assert [(m["messageType"], m["orderVersion"], m["outcome"]) for m in shown["markers"]] == [
        ("OrderPlaced", 1, "stale"),
        ("OrderAmended", 2, "processed"),
    ]
    assert [(e["eventType"], e["status"]) for e in shown["events"]] == [("OrderAmended", "pending")]


async def test_an_order_with_nothing_stored_exits_1(
    app_env: dict[str, str], container: ContainerProxy
) -> None:
    partition, _ = tool(app_env)

    code, text = history(partition, "ord-none")

    assert code == 1
    assert "order ord-none: no order document" in text
    assert "0 document(s) read" in text
