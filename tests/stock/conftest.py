"""Stock reservation fixtures: the local world with the test's own inventory container (``/sku``),
created by the world (``local.assembly.world``) and deleted after the test, and the events as the
relay publishes them, sent to the inventory subscription or through the topic."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock, OutgoingMessage
from tests.stock.events import event_body


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with an inventory container of the test's own."""
    name = f"inventory-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("INVENTORY_CONTAINER", name)
    return {**app_env, "INVENTORY_CONTAINER": name}


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
) -> AsyncIterator[World]:
    """The stand-in around the app, on the test's containers and manual clock."""
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={"INVENTORY_CONTAINER": app_env["INVENTORY_CONTAINER"]},
    ) as started:
        yield started
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        await database.delete_container(app_env["INVENTORY_CONTAINER"])
    # A failed invocation settles nothing and would hide a bug: the functions never raise.
    assert started.host.stats.errors == [], "consume_order raised"
    assert started.stock_host.stats.errors == [], "reserve_stock raised"


def order_event(
    order_id: str,
    version: int,
    lines: Mapping[str, int] | None = None,
    *,
    cancelled: bool = False,
    message_id: str | None = None,
) -> OutgoingMessage:
    """An order event as the relay sends it (docs/events.md): MessageId the eventId, Subject and
    ``eventType`` the event's type."""
    subject, body = event_body(order_id, version, lines, cancelled=cancelled)
    return raw_event(body, subject, message_id=message_id or body["eventId"])


def raw_event(body: Any, subject: str | None, *, message_id: str) -> OutgoingMessage:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    properties: dict[str, str | int | float | bool] = {}
    if subject is not None:
        properties["eventType"] = subject
    return OutgoingMessage(message_id, data, subject=subject, application_properties=properties)
