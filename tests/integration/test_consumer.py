"""The consumer end to end on production paths: host-format bytes decoded by the extension's
converter, the function found through ``app.get_functions()``, the real azure-cosmos aio client
against a Cosmos DB API server, and settlement through the real ``ServiceBusMessageActions``
over gRPC into the peek-lock queue model."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import ManualClock, PeekLockQueue, QueueSettings
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from tests.conftest import FAST_SDK_BACKOFF, manual_time
from tests.orders import message, order_body
from tests.state import documents


def settled(queue: PeekLockQueue) -> list[tuple[str, bool, str | None]]:
    return [(r.operation, r.ok, r.reason) for r in queue.settlement_log]


async def test_new_order_writes_order_and_outbox_then_completes(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    queue.send(message(order_body(), traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"))

    await host.run_until_idle()

    assert settled(queue) == [("complete", True, None)]
    docs = {doc["type"]: doc for doc in await documents(container)}
    assert set(docs) == {"order", "outbox"}
    order, outbox = docs["order"], docs["outbox"]
    assert order["id"] == order["orderId"] == order["messageId"] == "ord-1001"
    assert order["status"] == "accepted"
    assert order["placedAt"] == "2026-11-29T09:15:00Z"  # +01:00 normalised to UTC
    assert order["totalMinor"] == 2 * 1250 + 999
    assert order["hashAlgorithm"] == "sha256/canonical-v1"
    assert len(order["requestHash"]) == 64
    assert order["correlationId"] == "corr-1"
    assert order["firstDeliveryCount"] == 1
    assert outbox["orderId"] == "ord-1001"
    assert outbox["eventType"] == "OrderAccepted"
    assert outbox["causationId"] == "ord-1001"
    assert outbox["payload"]["totalMinor"] == order["totalMinor"]
    assert queue.is_idle()


async def test_outbox_disabled_writes_only_the_order(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OUTBOX_ENABLED", "false")
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert [doc["type"] for doc in await documents(container)] == ["order"]
    assert settled(queue) == [("complete", True, None)]


async def test_redelivered_message_is_a_duplicate_and_leaves_documents_unchanged(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    queue.send(message(order_body()))
    await host.run_until_idle()
    before = await documents(container)

    # Outside the duplicate-detection window the broker accepts the producer's retry.
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]
    assert queue.send(message(order_body(), correlation_id="corr-retry"))
    await host.run_until_idle()

    assert settled(queue) == [("complete", True, None), ("complete", True, None)]
    assert await documents(container) == before
    assert queue.dead_letters == []


EQUIVALENT_BODIES: dict[str, Callable[[], dict[str, Any]]] = {
    "key order": lambda: dict(reversed(list(order_body().items()))),
    "equivalent offset": lambda: order_body(placedAt="2026-11-29T05:15:00-04:00"),
    "Z instead of offset": lambda: order_body(placedAt="2026-11-29T09:15:00.000Z"),
    "unknown field": lambda: order_body(note="gift wrap", channel={"web": True}),
}


@pytest.mark.parametrize("variant", [*EQUIVALENT_BODIES, "whitespace", "correlation id"])
async def test_semantically_equal_bodies_are_duplicates(
    variant: str, host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    queue.send(message(order_body()))
    await host.run_until_idle()
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]

    if variant == "whitespace":
        retry = message(json.dumps(order_body(), indent=4).encode())
    elif variant == "correlation id":
        retry = message(order_body(), correlation_id="another-conversation")
    else:
        retry = message(EQUIVALENT_BODIES[variant]())
    assert queue.send(retry)
    await host.run_until_idle()

    assert settled(queue)[-1] == ("complete", True, None)
    assert queue.dead_letters == []
    assert len(await documents(container)) == 2  # order + outbox, written once


async def test_changed_body_under_same_id_is_dead_lettered_as_hash_mismatch(
    host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    queue.send(message(order_body()))
    await host.run_until_idle()
    stored = await documents(container)
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]

    changed = order_body()
    changed["lines"][0]["quantity"] = 3
    queue.send(message(changed))
    await host.run_until_idle()

    assert settled(queue)[-1] == ("dead_letter", True, "HashMismatch")
    [dead] = queue.dead_letters
    assert dead.reason == "HashMismatch"
    assert dead.description is not None
    assert len(dead.description) <= 1024
    stored_hash = next(d["requestHash"] for d in stored if d["type"] == "order")
    assert stored_hash in dead.description
    assert "lines" in dead.description
    assert "customerId" not in dead.description
    assert await documents(container) == stored


async def test_twenty_concurrent_deliveries_of_one_message_write_one_order(
    queue: PeekLockQueue, host: LocalFunctionsHost, container: ContainerProxy
) -> None:
    # Twenty copies in flight at once: what a producer's retries outside the detection window
    # and lock-expiry redeliveries look like to competing consumers.
    queue.settings = QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(0))
    for attempt in range(20):
        queue.send(message(order_body(), correlation_id=f"attempt-{attempt}"))
    host.max_concurrent_calls = 20

    await host.run_until_idle()

    docs = await documents(container)
    assert sorted(doc["type"] for doc in docs) == ["order", "outbox"]
    assert settled(queue) == [("complete", True, None)] * 20
    assert queue.dead_letters == []
    assert host.stats.invocations == 20


INVALID_CASES: dict[str, tuple[bytes, str | None, str]] = {
    "no message id": (json.dumps(order_body()).encode(), None, "MissingMessageId"),
    "message id differs": (json.dumps(order_body()).encode(), "ord-9", "MessageIdMismatch"),
    "not utf-8": (b"\xff\xfe{}", "ord-1001", "InvalidPayload"),
    "not json": (b"{orderId: ord-1001", "ord-1001", "InvalidPayload"),
    "not an object": (b"[1, 2, 3]", "ord-1001", "InvalidPayload"),
    "schema violation": (
        json.dumps(order_body(currency="eur")).encode(),
        "ord-1001",
        "InvalidPayload",
    ),
    "unsupported version": (
        json.dumps(order_body(schemaVersion=2)).encode(),
        "ord-1001",
        "UnsupportedSchemaVersion",
    ),
    "too large": (
        json.dumps(order_body(padding="x" * 256 * 1024)).encode(),
        "ord-1001",
        "PayloadTooLarge",
    ),
}


@pytest.mark.parametrize("case", list(INVALID_CASES))
async def test_invalid_messages_are_dead_lettered_with_their_reason_and_write_nothing(
    case: str, host: LocalFunctionsHost, queue: PeekLockQueue, container: ContainerProxy
) -> None:
    body, message_id, reason = INVALID_CASES[case]
    queue.send(message(body, message_id=message_id))

    await host.run_until_idle()

    [dead] = queue.dead_letters
    assert dead.reason == reason
    assert dead.description
    assert len(dead.description) <= 1024
    assert settled(queue) == [("dead_letter", True, reason)]
    assert await documents(container) == []


async def test_unreachable_cosmos_abandons_and_never_completes(
    host: LocalFunctionsHost, queue: PeekLockQueue, app_env: dict[str, str], clock: ManualClock
) -> None:
    refused = {**app_env, "COSMOS_ENDPOINT": "https://127.0.0.1:9/"}  # nothing listens there
    bootstrap.configure(
        bootstrap.Composition(refused, cosmos_options=FAST_SDK_BACKOFF, **manual_time(clock))
    )
    queue.send(message(order_body()))

    delivery = queue.receive(1)[0]
    await host.invoke(delivery)

    assert settled(queue) == [("abandon", True, None)]
    assert queue.dead_letters == []
    assert queue.active_count() == 1  # still there, for the redelivery
