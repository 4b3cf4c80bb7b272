"""One intent, one effect, from the client to every consumer: a real HTTP client (aiohttp)
places, amends and cancels orders through the world's HTTP host and Microsoft's worker, retrying
each with its Idempotency-Key as a client whose answer was lost does; then ``consume_order``
(the orders queue), the outbox relay (the change feed, the ``order-events`` topic) and the two
downstream consumers, ``reserve_stock`` (the ``inventory`` subscription and container) and
``capture_payment`` (the ``payments`` subscription and container, the payment provider stand-in
over HTTP), all through the worker, azure-cosmos on the local Cosmos server and the real aio
``ServiceBusSender``.

What each test checks is what a user would: one order document at its version in the orders
container, the stock reserved once per SKU line in the inventory container, the money captured
once at the provider (its ledger), and each consumer's inbox markers, keyed by the MessageIds
derived from the request (docs/events.md, "One identity from the client to every consumer").
A fault is injected below the SDK (``local.standins.faults``: the sent mark's write refused),
so a retry resends the recorded message after the queue's duplicate detection forgot it: the
consumer's own duplicate check absorbs it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from azure.core.pipeline.transport import HttpRequest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from idempotent_consumer import call_key

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.faults import (
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
    batch_operations,
)
from shared.adapters.http_in import FUNCTION_KEY_CLIENT
from shared.config import PAYMENT_PROVIDER_API_KEY_SETTING, PAYMENT_PROVIDER_BASE_URL_SETTING
from shared.consumer.contract import lifecycle_message_id
from shared.edge.requests import order_id_for, request_id
from shared.payments.consumer import CONSUMER_NAME as PAYMENT_CONSUMER
from shared.payments.provider import Operation
from shared.relay.outbox import order_event_id, version_event_id
from shared.stock.consumer import CONSUMER_NAME as STOCK_CONSUMER
from tests.conftest import FAST_SDK_BACKOFF
from tests.edge.conftest import PAST_THE_WINDOW, amend_body, cancel_body, place_body
from tests.edge.test_end_to_end import Answer, call, order_documents
from tests.state import documents

# place_body(): SKU-1 2 x 1250 and SKU-2 1 x 999; amend_body(3): SKU-1 3 x 1250 only.
PLACED_TOTAL = 2 * 1250 + 999
AMENDED_TOTAL = 3 * 1250
ON_HAND = {"SKU-1": 10, "SKU-2": 10}
OWN_CONTAINERS = ("REQUESTS_CONTAINER", "PAYMENTS_CONTAINER", "INVENTORY_CONTAINER")


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with requests, payments and inventory containers of the test's own."""
    own = {name: f"{name.split('_')[0].lower()}-{uuid.uuid4().hex[:10]}" for name in OWN_CONTAINERS}
    own["PAYMENT_PROVIDER_TIMEOUT_SECONDS"] = "0.5"
    for name, value in own.items():
        monkeypatch.setenv(name, value)
    return {**app_env, **own}


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[World]:
    """The whole stand-in around the app on the manual clock: the HTTP host, the queue, the
    change feed and the topic, both subscriptions and their containers, the provider stand-in;
    stock seeded as ``python -m ops stock`` would."""
    own = (*OWN_CONTAINERS, "PAYMENT_PROVIDER_TIMEOUT_SECONDS")
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={name: app_env[name] for name in own},
    ) as started:
        for name in (PAYMENT_PROVIDER_BASE_URL_SETTING, PAYMENT_PROVIDER_API_KEY_SETTING):
            monkeypatch.setenv(name, started.env[name])
        await started.seed_stock(ON_HAND)
        yield started
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        for name in OWN_CONTAINERS:
            await database.delete_container(app_env[name])
    # A failed invocation settles nothing and would hide a bug: the functions never raise.
    assert started.host.stats.errors == [], "consume_order raised"
    assert started.stock_host.stats.errors == [], "reserve_stock raised"
    assert started.payment_host.stats.errors == [], "capture_payment raised"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@dataclass
class TheSentMarkRefused(FaultRule):
    """The edge's sent mark (a batch of one patch to the requests container) answered 503:
    the instance could not record that its message was sent."""

    def matches(self, request: HttpRequest) -> bool:
        if not super().matches(request):
            return False
        return [op.get("operationType") for op in batch_operations(request)] == ["Patch"]


def compose(world: World) -> FaultInjectingTransport:
    """The app composed on the world with a fault-injecting transport under azure-cosmos."""
    transport = FaultInjectingTransport(connection_verify=False)
    world.compose(transport=transport, jitter=lambda: 1.0, **FAST_SDK_BACKOFF)
    return transport


async def run_downstream(world: World) -> list[OutgoingMessage]:
    """consume_order, the relay, reserve_stock and capture_payment, each until idle; the events
    the topic took meanwhile (read from its ``retained`` subscription)."""
    await world.host.run_until_idle()
    await world.change_feed.drain()
    await world.stock_host.run_until_idle()
    await world.payment_host.run_until_idle()
    return world.topic.delivered()


async def post(
    http: aiohttp.ClientSession,
    world: World,
    path: str,
    body: dict[str, Any],
    key: str,
    if_match: str | None = None,
) -> Answer:
    return await call(http, world, "POST", path, body, key=key, if_match=if_match)


def same_answer(first: Answer, again: Answer) -> bool:
    fields = ("Location", "ETag")
    return (first.status, first.body, [first.headers[f] for f in fields]) == (
        again.status,
        again.body,
        [again.headers[f] for f in fields],
    )


async def inventory_of(world: World, order_id: str) -> dict[str, Any]:
    """What the inventory container holds for the order: each SKU's ``reserved``, the order's
    reservation per SKU (version, reserved), its markers' MessageIds."""
    stored = await documents(world.inventory_documents)
    return {
        "reserved": {d["sku"]: d["reserved"] for d in stored if d["type"] == "stockItem"},
        "held": {
            d["sku"]: (d["orderVersion"], d["reserved"])
            for d in stored
            if d["type"] == "reservation" and d["orderId"] == order_id
        },
        "markers": sorted(
            (d["consumer"], d["messageId"])
            for d in stored
            if d["type"] == "inbox" and d["sku"] == f"order:{order_id}"
        ),
    }


async def payments_of(world: World, order_id: str) -> dict[str, Any]:
    stored = await documents(world.payments_documents)
    [state] = [d for d in stored if d["type"] == "payment" and d["orderId"] == order_id]
    return {
        "captured": state["capturedMinor"],
        "version": state["version"],
        "markers": sorted(
            (d["consumer"], d["messageId"])
            for d in stored
            if d["type"] == "inbox" and d["orderId"] == order_id
        ),
    }


def ledger(world: World, order_id: str) -> list[tuple[str, int, str | None]]:
    """The money that moved for the order: (operation, amount, Idempotency-Key)."""
    return [
        (str(entry.operation), entry.amount_minor, entry.idempotency_key)
        for entry in world.payment_provider.ledger
        if entry.order_id == order_id
    ]


async def test_a_place_and_an_amendment_each_retried_reserve_and_capture_once(
    world: World, http: aiohttp.ClientSession, container: ContainerProxy, clock: ManualClock
) -> None:
    faults = compose(world)
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "place-1")
    placed_event = order_event_id(order_id)
    amended_event = version_event_id(order_id, 2)

    # The place is answered, but the instance could not record its send: its answer lost, the
    # client retries at once (409: in progress) and once more a day later, past the queue's
    # duplicate detection window.
    # (Every attempt refused while the rule holds: the SDK retries a 503 itself.)
    refused = TheSentMarkRefused(FaultKind.STATUS, batches_only=True, times=None)
    faults.add(refused)
    placed = await post(http, world, "orders", place_body(), "place-1")
    faults.clear()
    assert refused.fired >= 1
    assert placed.status == 201 and placed.body["orderId"] == order_id
    assert (await post(http, world, "orders", place_body(), "place-1")).status == 409
    events = await run_downstream(world)

    clock.advance(timedelta(days=1) + PAST_THE_WINDOW)
    resent = await post(http, world, "orders", place_body(), "place-1")
    assert same_answer(placed, resent)
    events += await run_downstream(world)
    # The one resend reached consume_order (the queue's window had passed); it was a duplicate.
    assert world.queue.stats.accepted == 2 and world.queue.stats.completed == 2
    assert (await post(http, world, "orders", place_body(), "place-1")).body == placed.body

    # The amendment, its answer lost: the client sends it again.
    amended = await post(
        http, world, f"orders/{order_id}/amendments", amend_body(3), "amend-1", if_match='"1"'
    )
    again = await post(
        http, world, f"orders/{order_id}/amendments", amend_body(3), "amend-1", if_match='"1"'
    )
    assert amended.status == 200 and amended.headers["ETag"] == '"2"'
    assert same_answer(amended, again)  # not 412: the repeat of the request that moved it
    events += await run_downstream(world)

    # The queue: one message per intent (and the place's one resend), each MessageId the
    # request's; every delivery completed, nothing dead-lettered.
    sent = [record.message_id for record in world.queue.settlement_log]
    assert sent == [order_id, order_id, f"{order_id}:v2"]
    assert {r.operation for r in world.queue.settlement_log} == {"complete"}
    assert world.queue.stats.dead_lettered == 0
    # Cosmos DB: one order, at version 2, as the amendment left it.
    [order] = await order_documents(container, order_id)
    assert (order["orderVersion"], order["messageId"], order["lastMessageId"]) == (
        2,
        order_id,
        f"{order_id}:v2",
    )
    assert order["lines"] == amend_body(3)["lines"]
    # The topic: one event per version, its MessageId derived from the order and version.
    assert [(e.message_id, e.application_properties["causationId"]) for e in events] == [
        (placed_event, order_id),
        (amended_event, f"{order_id}:v2"),
    ]
    # The stock: reserved once per line, moved by the amendment; nothing reserved twice.
    stock = await inventory_of(world, order_id)
    assert stock["reserved"] == {"SKU-1": 3, "SKU-2": 0}
    assert stock["held"] == {"SKU-1": (2, 3), "SKU-2": (2, 0)}
    assert stock["markers"] == sorted(
        [(STOCK_CONSUMER, placed_event), (STOCK_CONSUMER, amended_event)]
    )
    # The money: captured once for the place, the difference once for the amendment, each
    # under the key derived from its event.
    assert ledger(world, order_id) == [
        ("capture", PLACED_TOTAL, call_key(PAYMENT_CONSUMER, placed_event, Operation.CAPTURE)),
        (
            "capture",
            AMENDED_TOTAL - PLACED_TOTAL,
            call_key(PAYMENT_CONSUMER, amended_event, Operation.CAPTURE),
        ),
    ]
    payment = await payments_of(world, order_id)
    assert (payment["captured"], payment["version"]) == (AMENDED_TOTAL, 2)
    assert payment["markers"] == sorted(
        [(PAYMENT_CONSUMER, placed_event), (PAYMENT_CONSUMER, amended_event)]
    )
    record = await world.requests.read_item(request_id(FUNCTION_KEY_CLIENT, "place-1"), order_id)
    assert record["sent"] is True  # the resend's mark was recorded


async def test_a_cancellation_retried_releases_the_stock_and_refunds_once(
    world: World, http: aiohttp.ClientSession, container: ContainerProxy, clock: ManualClock
) -> None:
    compose(world)
    placed = await post(http, world, "orders", place_body(), "place-2")
    order_id = placed.body["orderId"]
    again = await post(http, world, "orders", place_body(), "place-2")
    assert placed.status == 201 and same_answer(placed, again)
    events = await run_downstream(world)

    cancelled = await post(
        http, world, f"orders/{order_id}/cancellations", cancel_body(), "cancel-1", '"1"'
    )
    again = await post(
        http, world, f"orders/{order_id}/cancellations", cancel_body(), "cancel-1", '"1"'
    )
    assert cancelled.status == 200 and cancelled.headers["ETag"] == '"2"'
    assert same_answer(cancelled, again)  # not 409 "cancelled": the repeat of the cancellation
    events += await run_downstream(world)

    cancelled_event = version_event_id(order_id, 2)
    assert [r.message_id for r in world.queue.settlement_log] == [order_id, f"{order_id}:v2"]
    assert world.queue.stats.dropped_duplicates == 0  # the retries sent nothing
    [order] = await order_documents(container, order_id)
    assert (order["status"], order["orderVersion"]) == ("cancelled", 2)
    assert [e.message_id for e in events] == [order_event_id(order_id), cancelled_event]
    stock = await inventory_of(world, order_id)
    assert stock["reserved"] == {"SKU-1": 0, "SKU-2": 0}
    assert stock["held"] == {"SKU-1": (2, 0), "SKU-2": (2, 0)}  # tombstones of version 2
    assert stock["markers"] == sorted(
        [(STOCK_CONSUMER, order_event_id(order_id)), (STOCK_CONSUMER, cancelled_event)]
    )
    assert ledger(world, order_id) == [
        (
            "capture",
            PLACED_TOTAL,
            call_key(PAYMENT_CONSUMER, order_event_id(order_id), Operation.CAPTURE),
        ),
        ("refund", PLACED_TOTAL, call_key(PAYMENT_CONSUMER, cancelled_event, Operation.REFUND)),
    ]
    payment = await payments_of(world, order_id)
    assert (payment["captured"], payment["version"]) == (0, 2)


EVENTS_MD = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def test_the_worked_example_of_one_identity_is_what_the_service_derives() -> None:
    """docs/events.md, "One identity from the client to every consumer": each id of its worked
    example recomputed with the service's own functions, and found on the page."""
    client, key = FUNCTION_KEY_CLIENT, "8e03978e-40d5-43e8-bc93-6894a57f9324"
    order_id = order_id_for(client, key)
    accepted, amended = order_event_id(order_id), version_event_id(order_id, 2)
    derived = {
        "order id": order_id,
        "request record": request_id(client, key),
        "OrderAccepted eventId": accepted,
        "its capture's key": call_key(PAYMENT_CONSUMER, accepted, Operation.CAPTURE),
        "the amendment's MessageId": lifecycle_message_id(order_id, 2),
        "its eventId": amended,
    }
    assert derived == {
        "order id": "ord-6424cdba-a4c8-5ca1-a5d8-570c2bd70473",
        "request record": "request:function-key:8e03978e-40d5-43e8-bc93-6894a57f9324",
        "OrderAccepted eventId": "e47b8b71-afb6-50a1-9c76-bf0504d0c811",
        "its capture's key": "f61ba1e8-2e95-5b2c-adb2-918cf9137b61",
        "the amendment's MessageId": "ord-6424cdba-a4c8-5ca1-a5d8-570c2bd70473:v2",
        "its eventId": "86c88e18-a155-55a6-8eb9-e05cd15672ea",
    }
    section = EVENTS_MD.read_text(encoding="utf-8").split(
        "## One identity from the client to every consumer", 1
    )[1]
    page = " ".join(section.split("\n## ", 1)[0].split())  # the section, lines joined
    assert all(f"`{value}`" in page for value in derived.values()), derived
