"""The stock reservation end to end: order events on the inventory subscription of the
order-events topic, delivered to ``reserve_stock`` by the local Functions host through
Microsoft's worker, the real azure-cosmos client against the local Cosmos DB server's atomic
transactional batch, settlement over the extension's gRPC; and the whole chain from the orders
queue (``consume_order``, the relay, the topic). Each test asserts what an operator would check:
the inventory container's documents, the subscription's settlements and counts.

Faults are injected below the SDK (``local.standins.faults``: an azure-core transport), on the
batch requests to the inventory container."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from azure.core.pipeline.transport import HttpRequest
from azure.servicebus import ServiceBusMessage

from local.assembly.world import World
from local.standins.broker import PeekLockQueue
from local.standins.faults import FaultKind, FaultRule
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared import bootstrap
from shared.stock.consumer import CONSUMER_NAME
from shared.stock.inventory import RELEASED_TTL_S
from shared.telemetry.names import LOGGER_NAME
from tests.conftest import ComposeApp, InstallFaulty
from tests.payments.conftest import exported
from tests.state import documents
from tests.stock.conftest import order_event, raw_event
from tests.stock.events import event_body, event_id
from tests.telemetry.kept_out import (
    FORGING_ID,
    MARK,
    consumer_records,
    exported_logs,
    marked_event,
    showing,
    unquoted,
)

ORDER = "ord-7001"


@dataclass(frozen=True)
class Inventory:
    """The inventory container's documents, by kind."""

    stock: dict[str, dict[str, Any]]  # by SKU
    reservations: dict[tuple[str, str], dict[str, Any]]  # by (SKU, order)
    indexes: dict[str, dict[str, Any]]  # by order
    markers: list[dict[str, Any]]

    def reserved(self) -> dict[str, int]:
        return {sku: item["reserved"] for sku, item in sorted(self.stock.items())}

    def held(self, order_id: str) -> dict[str, tuple[int, int, int]]:
        """(orderVersion, reserved, backordered) of the order's reservation, per SKU."""
        return {
            sku: (r["orderVersion"], r["reserved"], r["backordered"])
            for (sku, order), r in sorted(self.reservations.items())
            if order == order_id
        }

    def etags(self, sku: str) -> dict[str, str]:
        """Every document of a SKU's partition, by id: its ``_etag``."""
        found = {"stock": self.stock[sku]["_etag"]}
        found |= {r["id"]: r["_etag"] for (s, _), r in self.reservations.items() if s == sku}
        found |= {m["id"]: m["_etag"] for m in self.markers if m["sku"] == sku}
        return found

    def outcomes(self, partition: str) -> dict[str, str]:
        return {m["messageId"]: m["outcome"] for m in self.markers if m["sku"] == partition}


async def inventory(world: World) -> Inventory:
    found = Inventory({}, {}, {}, [])
    for document in await documents(world.inventory_documents):
        kind = document["type"]
        if kind == "stockItem":
            found.stock[document["sku"]] = document
        elif kind == "reservation":
            found.reservations[document["sku"], document["orderId"]] = document
        elif kind == "orderIndex":
            found.indexes[document["orderId"]] = document
        else:
            assert kind == "inbox", document
            found.markers.append(document)
    return found


def settled(queue: PeekLockQueue) -> list[tuple[str, str | None]]:
    return [(r.operation, r.reason) for r in queue.settlement_log if r.ok]


@pytest.fixture
async def app(compose_app: ComposeApp) -> bootstrap.Runtime:
    """The app on the world's manual clock (backoff and holds take no real time)."""
    return compose_app()


@dataclass
class FromNthBatch(FaultRule):
    """Fires on the ``nth`` matching request and on every one after it: the stop lands after
    ``nth - 1`` batches were committed, and lasts until the rule is removed."""

    nth: int = 1
    seen: int = 0

    def matches(self, request: HttpRequest) -> bool:
        if not super().matches(request):
            return False
        self.seen += 1
        return self.seen >= self.nth


def inventory_batches(world: World, *, status: int = 503, nth: int = 1) -> FromNthBatch:
    """Batch requests to the inventory container answered ``status`` from the ``nth`` on."""
    return FromNthBatch(
        FaultKind.STATUS,
        method="POST",
        path_contains=f"/colls/{world.inventory_documents.id}/",
        batches_only=True,
        status=status,
        times=None,
        nth=nth,
    )


async def test_an_accepted_order_reserves_each_sku_in_its_own_partition(world: World) -> None:
    # Uncomposed: the app builds the stock consumer from the app settings on its first event.
    await world.seed_stock({"A": 10, "B": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2, "B": 3}))

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)]
    assert world.inventory.stats.deliveries == 1
    stored = await inventory(world)
    assert stored.reserved() == {"A": 2, "B": 3}
    assert stored.held(ORDER) == {"A": (1, 2, 0), "B": (1, 3, 0)}
    assert stored.indexes[ORDER]["skus"] == ["A", "B"]
    accepted = event_id(ORDER, 1)
    # One marker, at the gate (the order's index), the consumer's own key; none in a SKU's
    # partition, which every order shares: the reservation's version is the record there.
    [marker] = stored.markers
    assert (marker["sku"], marker["messageId"]) == (f"order:{ORDER}", accepted)
    assert marker["id"] == f"inbox:{CONSUMER_NAME}:{accepted}"
    assert marker["ttl"] > 14 * 86_400
    # Reservations that hold stock never expire.
    assert {stored.reservations[sku, ORDER]["ttl"] for sku in "AB"} == {-1}


async def test_an_amendment_adjusts_and_releases_what_it_no_longer_wants(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 10, "B": 10, "C": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2, "B": 3}))
    await world.stock_host.run_until_idle()
    world.inventory.send(order_event(ORDER, 2, {"A": 5, "C": 1}))

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)] * 2
    stored = await inventory(world)
    assert stored.reserved() == {"A": 5, "B": 0, "C": 1}
    assert stored.held(ORDER) == {"A": (2, 5, 0), "B": (2, 0, 0), "C": (2, 1, 0)}


async def test_a_cancellation_releases_exactly_what_the_order_reserved(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 3})
    world.inventory.send(order_event("ord-1", 1, {"A": 2}))
    world.inventory.send(order_event("ord-2", 1, {"A": 5}))  # 1 reserved, 4 backordered
    await world.stock_host.run_until_idle()
    world.inventory.send(order_event("ord-1", 2, cancelled=True))

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)] * 3
    stored = await inventory(world)
    assert stored.held("ord-1") == {"A": (2, 0, 0)}
    assert stored.held("ord-2") == {"A": (1, 1, 4)}
    assert stored.reserved() == {"A": 1}
    # The cancelled order's reservation holds nothing: it expires; ord-2's holds 1: it stays.
    ttls = {order: r["ttl"] for (_, order), r in stored.reservations.items()}
    assert ttls == {"ord-1": RELEASED_TTL_S, "ord-2": -1}


async def test_a_stop_between_sku_batches_leaves_the_first_complete_and_the_redelivery_finishes(
    world: World, install_faulty: InstallFaulty
) -> None:
    transport = install_faulty()
    skus = {"A": 1, "B": 2, "C": 3, "D": 4, "E": 5}
    await world.seed_stock(dict.fromkeys(skus, 10))
    world.inventory.send(order_event(ORDER, 1, skus))
    # Batches: the order's index first, then the SKUs in order; the third (B's) and every one
    # after it fail for this delivery (its in-delivery retries too): the delivery stops there.
    transport.add(inventory_batches(world, nth=3))
    [first] = world.inventory.receive(1)

    await world.stock_host.invoke(first)

    assert settled(world.inventory) == [("abandon", None)]
    stopped = await inventory(world)
    assert stopped.reserved() == {"A": 1, "B": 0, "C": 0, "D": 0, "E": 0}
    assert stopped.held(ORDER) == {"A": (1, 1, 0)}  # A complete: reservation and stock
    before = stopped.etags("A")

    transport.clear()
    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("abandon", None), ("complete", None)]
    assert world.inventory.stats.deliveries == 2
    finished = await inventory(world)
    assert finished.reserved() == skus
    assert finished.held(ORDER) == {sku: (1, count, 0) for sku, count in skus.items()}
    assert finished.etags("A") == before  # the redelivery read A's version, wrote nothing
    assert [m["sku"] for m in finished.markers] == [f"order:{ORDER}"]  # none per SKU


async def test_a_duplicate_event_is_completed_and_changes_nothing(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 10, "B": 10})
    subject, body = event_body(ORDER, 1, {"A": 2, "B": 1})
    message_id = body["eventId"]

    def published() -> ServiceBusMessage:
        return ServiceBusMessage(
            json.dumps(body), message_id=message_id, subject=subject,
            application_properties={"eventType": subject},
        )  # fmt: skip

    await world.topic.send_messages(published())
    await world.stock_host.run_until_idle()
    first = await inventory(world)
    # Within the topic's duplicate detection window the copy never reaches the subscription;
    # after it, and resubmitted by an operator, it does, and is completed unchanged.
    await world.topic.send_messages(published())
    assert world.topic.stats.dropped_duplicates == 1
    world.clock.advance(timedelta(seconds=world.topic.duplicate_detection_window_s))
    await world.topic.send_messages(published())
    world.inventory.send(raw_event(body, subject, message_id=message_id))

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)] * 3
    again = await inventory(world)
    assert again.reserved() == {"A": 2, "B": 1}
    for sku in ("A", "B"):
        assert again.etags(sku) == first.etags(sku)
    assert again.indexes[ORDER]["_etag"] == first.indexes[ORDER]["_etag"]


async def test_concurrent_deliveries_of_one_orders_events_converge_on_its_highest_version(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 10, "B": 10, "C": 10})
    events = [
        order_event(ORDER, 1, {"A": 1, "B": 1}),
        order_event(ORDER, 2, {"A": 3, "C": 2}),
        order_event(ORDER, 3, {"B": 4, "C": 1}),
    ]
    for event in events:
        world.inventory.send(event)

    await world.stock_host.run_until_idle()  # all three at once (maxConcurrentCalls 16)

    assert sorted(settled(world.inventory)) == [("complete", None)] * 3
    stored = await inventory(world)
    assert stored.reserved() == {"A": 0, "B": 4, "C": 1}
    held = stored.held(ORDER)
    # A is only v1's and v2's: if v3 passed the order's index first, both were stale there and
    # A never got a reservation; otherwise v3 released it, at its version.
    assert held.pop("A", (3, 0, 0)) == (3, 0, 0)
    assert held == {"B": (3, 4, 0), "C": (3, 1, 0)}
    assert stored.indexes[ORDER]["orderVersion"] == 3


async def test_a_cancellation_before_the_acceptance_makes_the_acceptance_stale(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 10})
    world.inventory.send(order_event(ORDER, 2, cancelled=True))
    await world.stock_host.run_until_idle()
    world.inventory.send(order_event(ORDER, 1, {"A": 2}))

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)] * 2
    stored = await inventory(world)
    assert stored.reserved() == {"A": 0}
    assert stored.held(ORDER) == {}
    assert stored.indexes[ORDER]["orderVersion"] == 2
    assert stored.outcomes(f"order:{ORDER}") == {
        event_id(ORDER, 2): "processed",
        event_id(ORDER, 1): "stale",
    }
    assert stored.outcomes("A") == {}  # the stale acceptance wrote nothing in A


async def test_two_orders_racing_for_the_last_unit_one_gets_it_the_other_is_backordered(
    world: World, app: bootstrap.Runtime
) -> None:
    await world.seed_stock({"A": 1})
    world.inventory.send(order_event("ord-1", 1, {"A": 1}))
    world.inventory.send(order_event("ord-2", 1, {"A": 1}))

    # Both in one receive, invoked together; whichever commits first, the stock item's patch
    # condition (reserved + 1 <= onHand, in the batch) refuses the other's increment.
    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("complete", None)] * 2
    stored = await inventory(world)
    outcomes = sorted([*stored.held("ord-1").values(), *stored.held("ord-2").values()])
    assert outcomes == [(1, 0, 1), (1, 1, 0)]  # exactly one got it, the other backordered
    assert stored.reserved() == {"A": 1} == {"A": stored.stock["A"]["onHand"]}


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            raw_event({"schemaVersion": 1}, "OrderShipped", message_id="m-1"),
            "UnsupportedMessageType",
        ),
        (raw_event(b"{not json", "OrderAccepted", message_id="m-2"), "InvalidPayload"),
        (
            raw_event(
                {"schemaVersion": 1, "eventType": "OrderAccepted", "payload": {"orderId": ORDER}},
                "OrderAccepted",
                message_id="m-3",
            ),
            "MissingLines",
        ),
    ],
    ids=["unsupported-type", "invalid-payload", "missing-lines"],
)
async def test_an_invalid_event_is_dead_lettered_with_a_bounded_reason_and_writes_nothing(
    world: World, app: bootstrap.Runtime, message: Any, reason: str
) -> None:
    await world.seed_stock({"A": 10})
    before = await documents(world.inventory_documents)
    world.inventory.send(message)

    await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("dead_letter", reason)]
    [dead] = world.inventory.dead_letters
    assert dead.reason == reason and dead.delivery_count == 1
    assert len(dead.description or "") <= 1024
    assert await documents(world.inventory_documents) == before


async def test_an_invalid_event_s_values_reach_no_description_span_or_log(
    world: World, compose_app: ComposeApp, caplog: pytest.LogCaptureFixture
) -> None:
    """A SKU and an address in an event that fails the contract, and an eventType that is not
    its Subject: dead-lettered with a description of what is wrong and none of the values, in it,
    in the span or in the log record, as logged or exported (issue 36, finding 6)."""
    topic = world.env["ORDER_EVENTS_TOPIC_NAME"]
    telemetry = exported(topic, "inventory", CONSUMER_NAME)
    compose_app(stock_telemetry=telemetry.telemetry)
    world.inventory.send(raw_event(marked_event(), "OrderAccepted", message_id="m-6"))
    _, body = event_body(ORDER, 1, {"A": 1})
    world.inventory.send(raw_event({**body, "eventType": MARK}, "OrderAccepted", message_id="m-7"))

    with exported_logs() as logs:
        await world.stock_host.run_until_idle()

    assert settled(world.inventory) == [("dead_letter", "InvalidPayload")] * 2
    spans = telemetry.spans.get_finished_spans()
    assert [s.attributes["orders.outcome"] for s in spans if s.attributes] == ["invalid"] * 2
    descriptions = [dead.description for dead in world.inventory.dead_letters]
    places = showing(
        MARK, descriptions=descriptions, spans=spans, records=caplog.records, exported=logs
    )
    assert places == []
    # The host runs deliveries concurrently: the dead letters' order is not the sends'.
    assert sorted(str(description) for description in descriptions) == [
        "eventType is not the Subject 'OrderAccepted'",
        "payload.orderId: Field required; "
        "payload.lines.0.sku: String should have at most 64 characters",
    ]


@pytest.mark.parametrize(
    "status", [503, 403], ids=["transient-503", "systemic-403-never-dead-lettered"]
)
async def test_a_store_failure_is_abandoned_after_the_in_delivery_retries(
    world: World, install_faulty: InstallFaulty, status: int
) -> None:
    """The moment (503) and the system (403: a revoked role assignment) are retried within the
    delivery while its lock lasts, then given back: never dead-lettered, nothing written."""
    transport = install_faulty()
    await world.seed_stock({"A": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2}))
    refused = transport.add(inventory_batches(world, status=status))
    [first] = world.inventory.receive(1)

    await world.stock_host.invoke(first)

    assert settled(world.inventory) == [("abandon", None)]
    assert refused.fired > 1  # retried within the delivery before giving it back
    assert world.clock.now() < first.locked_until  # within its lock
    assert world.inventory.dead_letters == []
    written = await documents(world.inventory_documents)
    assert [(d["type"], d["reserved"]) for d in written] == [("stockItem", 0)]
    transport.clear()
    await world.stock_host.run_until_idle()
    assert settled(world.inventory) == [("abandon", None), ("complete", None)]
    assert (await inventory(world)).reserved() == {"A": 2}


async def test_a_message_id_that_would_forge_a_log_line_is_quoted_in_every_record(
    world: World, install_faulty: InstallFaulty, caplog: pytest.LogCaptureFixture
) -> None:
    """A topic consumer's MessageId is not its body's: any text the sender chose. Each retry's
    warning (every batch refused 503) and the outcome's record quote it, one line each, as
    Python escapes a string (``repr``: CR, LF and ESC escaped) (issue 36, finding 7)."""
    transport = install_faulty()
    await world.seed_stock({"A": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2}, message_id=FORGING_ID))
    transport.add(inventory_batches(world, status=503))
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)

    await world.stock_host.invoke(world.inventory.receive(1)[0])

    assert settled(world.inventory) == [("abandon", None)]
    records = consumer_records(caplog.records)
    assert len([r for r in records if hasattr(r, "attempt_outcome")]) > 1  # the retries
    assert [r.getMessage() for r in records if repr(FORGING_ID) not in r.getMessage()] == []
    assert unquoted(records) == []


@pytest.mark.parametrize(
    "answer",
    [
        FaultRule(FaultKind.STATUS, status=403, sub_status=1014),
        FaultRule(FaultKind.BATCH_OPERATION, status=403, sub_status=1014, failing_index=-1),
    ],
    ids=["403.1014-answer", "403.1014-batch-operation-in-a-207"],
)
async def test_a_full_logical_partition_is_held_as_partition_full_never_dead_lettered(
    world: World,
    install_faulty: InstallFaulty,
    caplog: pytest.LogCaptureFixture,
    answer: FaultRule,
) -> None:
    """A SKU's logical partition at its 20 GB refuses every write with 403 sub-status 1014,
    the whole request's answer or the failing operation of a 207 (two SDK paths:
    ``CosmosHttpResponseError``, ``CosmosBatchOperationError``): the system's fault, not the
    event's. The delivery is held like every systemic failure (retried within its lock, then
    abandoned, never dead-lettered by the consumer, nothing written in the SKU), and its reason
    is ``PartitionFull``, naming the runbook, in the outcome's log record and description."""
    transport = install_faulty()
    await world.seed_stock({"A": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2}))
    # The order's index is a single create; the SKU's reservation a batch: only it is refused.
    answer.method, answer.batches_only, answer.times = "POST", True, None
    answer.path_contains = f"/colls/{world.inventory_documents.id}/"
    refused = transport.add(answer)
    [first] = world.inventory.receive(1)

    await world.stock_host.invoke(first)

    assert settled(world.inventory) == [("abandon", None)]
    assert refused.fired > 1  # retried within the delivery before giving it back
    assert world.inventory.dead_letters == []
    [outcome] = [
        record
        for record in caplog.records
        if record.name == "orders.consumer" and hasattr(record, "outcome")
    ]
    assert outcome.outcome == "systemic"
    assert outcome.levelname == "ERROR"
    description = str(getattr(outcome, "description", ""))
    assert description.startswith("PartitionFull: ")
    assert "A logical partition is filling (PartitionFull)" in description
    stored = await inventory(world)
    assert stored.reserved() == {"A": 0}
    assert stored.held(ORDER) == {}
    transport.clear()
    await world.stock_host.run_until_idle()
    assert settled(world.inventory) == [("abandon", None), ("complete", None)]
    assert (await inventory(world)).reserved() == {"A": 2}


@pytest.mark.parametrize(
    ("setting", "value"),
    [("INVENTORY_CONTAINER", "not/a/container"), ("INVENTORY_SUBSCRIPTION_NAME", None)],
    ids=["invalid-container", "subscription-unset"],
)
async def test_a_bad_inventory_setting_holds_the_lock_and_consume_order_goes_on(
    world: World,
    compose_app: ComposeApp,
    caplog: pytest.LogCaptureFixture,
    setting: str,
    value: str | None,
) -> None:
    """An inventory setting the app cannot use is the system's fault, not the event's: the
    delivery holds its lock (no cycling through maxDeliveryCount into the dead-letter queue),
    a critical log names the setting, it is abandoned, nothing written; ``consume_order``
    never needs the inventory's settings and goes on."""
    env = {name: v for name, v in world.env.items() if name != setting}
    compose_app(env=env if value is None else {**env, setting: value})
    await world.seed_stock({"A": 10})
    world.inventory.send(order_event(ORDER, 1, {"A": 2}))
    world.queue.send(raw_event(order_body("ord-q1"), None, message_id="ord-q1"))
    [delivery] = world.inventory.receive(1)

    await world.stock_host.invoke(delivery)
    await world.host.run_until_idle()

    assert settled(world.inventory) == [("abandon", None)]
    lock = world.inventory.settings.lock_duration
    held = world.clock.now() - (delivery.locked_until - lock)
    assert held >= lock - timedelta(seconds=10)
    assert world.inventory.dead_letters == []
    named = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert [getattr(r, "setting", None) for r in named] == [setting]
    assert (await inventory(world)).reserved() == {"A": 0}
    assert [r.operation for r in world.queue.settlement_log] == ["complete"]


async def test_orders_on_the_queue_reach_the_inventory_through_the_relay_and_the_topic(
    world: World, app: bootstrap.Runtime
) -> None:
    """The whole chain: consume_order, the outbox relay on the change feed, the topic's
    inventory subscription, reserve_stock; an acceptance, an amendment and a cancellation."""
    await world.seed_stock({"SKU-1": 10, "SKU-2": 10, "SKU-3": 10})
    steps: list[tuple[Any, Mapping[str, int]]] = [
        (
            raw_event(order_body(ORDER), None, message_id=ORDER),
            {"SKU-1": 2, "SKU-2": 1, "SKU-3": 0},
        ),
        (
            raw_event(
                amended_body(
                    ORDER, 2, lines=[{"sku": "SKU-3", "quantity": 4, "unitPriceMinor": 5}]
                ),
                "OrderAmended",
                message_id=lifecycle_message_id(ORDER, 2),
            ),
            {"SKU-1": 0, "SKU-2": 0, "SKU-3": 4},
        ),
        (
            raw_event(
                cancelled_body(ORDER, 3),
                "OrderCancelled",
                message_id=lifecycle_message_id(ORDER, 3),
            ),
            {"SKU-1": 0, "SKU-2": 0, "SKU-3": 0},
        ),
    ]
    for message, expected in steps:
        world.queue.send(message)
        await world.host.run_until_idle()
        await world.change_feed.drain()
        await world.stock_host.run_until_idle()
        assert (await inventory(world)).reserved() == expected

    assert [r.operation for r in world.queue.settlement_log] == ["complete"] * 3
    assert settled(world.inventory) == [("complete", None)] * 3
    stored = await inventory(world)
    assert stored.indexes[ORDER]["orderVersion"] == 3
    assert stored.held(ORDER) == {sku: (3, 0, 0) for sku in ("SKU-1", "SKU-2", "SKU-3")}
