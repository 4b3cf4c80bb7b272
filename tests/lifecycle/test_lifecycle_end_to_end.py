"""The order lifecycle end to end: OrderPlaced, OrderAmended and OrderCancelled on the orders
queue through the local Functions host and Microsoft's worker, the real azure-cosmos client
against the local Cosmos DB server's atomic batch, settlement over the extension's gRPC, and the
relay publishing each applied version to the order-events topic through the change feed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.host import LocalFunctionsHost
from local.standins.topic import OrderEventsTopic
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from tests.state import documents

ORDER = "ord-5001"


def placed(**fields: Any) -> OutgoingMessage:
    return OutgoingMessage(ORDER, json.dumps(order_body(ORDER, **fields)).encode(), "corr-p")


def amended(version: int, message_id: str | None = None, **fields: Any) -> OutgoingMessage:
    return OutgoingMessage(
        message_id or lifecycle_message_id(ORDER, version),
        json.dumps(amended_body(ORDER, version, **fields)).encode(),
        f"corr-a{version}",
        subject="OrderAmended",
    )


def cancelled(version: int, message_id: str | None = None) -> OutgoingMessage:
    return OutgoingMessage(
        message_id or lifecycle_message_id(ORDER, version),
        json.dumps(cancelled_body(ORDER, version, reason="changed my mind")).encode(),
        f"corr-c{version}",
        subject="OrderCancelled",
    )


def settled(queue: PeekLockQueue) -> list[tuple[str, str | None]]:
    return [(r.operation, r.reason) for r in queue.settlement_log]


async def by_type(container: ContainerProxy) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for document in await documents(container):
        grouped.setdefault(document["type"], []).append(document)
    return grouped


async def test_out_of_order_and_duplicated_lifecycle_converges_and_publishes_increasing_versions(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
) -> None:
    # v3 first (creates the order from its whole state), then the placed order and v2 (stale),
    # v3 again (duplicate), the cancellation v4, and a producer retry of v4 (stale).
    queue.send(amended(3))
    await host.run_until_idle()
    await change_feed.drain()
    for outgoing in (placed(), amended(2), cancelled(4)):
        queue.send(outgoing)
    await host.run_until_idle()
    clock.advance(queue.settings.duplicate_detection_window)
    queue.send(amended(3))
    queue.send(cancelled(4, message_id="producer-retry-of-v4"))
    await host.run_until_idle()
    await change_feed.drain()

    assert [operation for operation, _ in settled(queue)] == ["complete"] * 6
    stored = await by_type(container)
    (order,) = stored["order"]
    assert (order["status"], order["orderVersion"]) == ("cancelled", 4)
    assert order["cancellationReason"] == "changed my mind"
    assert order["lines"] == amended_body(ORDER, 3)["lines"]
    outcomes = {marker["messageId"]: marker["outcome"] for marker in stored["inbox"]}
    assert outcomes == {
        lifecycle_message_id(ORDER, 3): "processed",
        ORDER: "stale",
        lifecycle_message_id(ORDER, 2): "stale",
        lifecycle_message_id(ORDER, 4): "processed",
        "producer-retry-of-v4": "stale",
    }
    assert all(marker["ttl"] > 14 * 24 * 3600 for marker in stored["inbox"])
    published = [
        (m.subject, json.loads(m.body)["payload"]["orderVersion"]) for m in topic.delivered()
    ]
    assert published == [("OrderAmended", 3), ("OrderCancelled", 4)]
    assert {d["status"] for d in stored["outbox"]} == {"dispatched"}


async def test_the_order_placed_then_its_amendment_and_cancellation_publish_three_events(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
) -> None:
    for outgoing in (placed(), amended(2), cancelled(3)):
        queue.send(outgoing)
        await host.run_until_idle()
        await change_feed.drain()

    delivered = topic.delivered()
    assert [m.subject for m in delivered] == ["OrderAccepted", "OrderAmended", "OrderCancelled"]
    bodies = [json.loads(m.body) for m in delivered]
    assert [b["payload"]["orderVersion"] for b in bodies] == [1, 2, 3]
    assert bodies[1]["payload"]["lines"] == amended_body(ORDER, 2)["lines"]
    assert bodies[2]["payload"]["reason"] == "changed my mind"
    assert [m.message_id for m in delivered] == [b["eventId"] for b in bodies]
    assert delivered[2].application_properties["eventType"] == "OrderCancelled"


async def test_a_change_after_the_cancellation_and_an_unknown_subject_are_dead_lettered(
    host: LocalFunctionsHost, queue: PeekLockQueue, clock: ManualClock, container: ContainerProxy
) -> None:
    for outgoing in (placed(), cancelled(2)):
        queue.send(outgoing)
    await host.run_until_idle()
    before = await documents(container)
    queue.send(amended(3))
    queue.send(OutgoingMessage("m-9", b"{}", subject="OrderShipped"))
    # A change reusing its OrderPlaced's MessageId: inside the duplicate-detection window the
    # queue drops it silently (why the contract refuses it); after the window it is refused.
    assert not queue.send(amended(4, message_id=ORDER))
    clock.advance(queue.settings.duplicate_detection_window)
    assert queue.send(amended(4, message_id=ORDER))

    await host.run_until_idle()

    reasons = sorted(d.reason or "" for d in queue.dead_letters)
    assert reasons == ["InvalidTransition", "MessageIdMismatch", "UnsupportedMessageType"]
    transition = next(d for d in queue.dead_letters if d.reason == "InvalidTransition")
    assert "version 3" in (transition.description or "")
    assert "version 2" in (transition.description or "")
    assert await documents(container) == before


async def test_markers_expire_after_the_configured_window(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    window = 3_000_000  # above the redelivery and replay horizons' sum (Settings)
    monkeypatch.setenv("INBOX_MARKER_TTL_SECONDS", str(window))
    for outgoing in (placed(), amended(3), amended(2)):  # one at a time: v2 arrives stale
        queue.send(outgoing)
        await host.run_until_idle()

    stored = await by_type(container)
    assert sorted(marker["outcome"] for marker in stored["inbox"]) == ["processed", "stale"]
    assert {marker["ttl"] for marker in stored["inbox"]} == {window}
    assert "ttl" not in stored["order"][0]  # the order itself never expires
