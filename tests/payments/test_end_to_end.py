"""The payment capture end to end: order events on the payments subscription of the order-events
topic, delivered to ``capture_payment`` by the local Functions host through Microsoft's worker,
the real azure-cosmos client against the local Cosmos DB server's atomic transactional batch,
settlement over the extension's gRPC, the provider called over HTTP by the app's aiohttp adapter;
and the whole chain from the orders queue (``consume_order``, the relay, the topic).

The referee is the provider stand-in's ledger (``world.payment_provider``): the money that moved.
Beside it, what an operator would check: the payments container's documents, the subscription's
settlements and dead letters, the exported telemetry. Cosmos DB faults are injected below the
SDK (``local.standins.faults``: an azure-core transport); provider faults by the stand-in's own
rules (``local.standins.payment_provider``)."""

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
from idempotent_consumer import NEEDS_RECONCILIATION, call_key

from local.assembly.world import World
from local.standins.broker import OutgoingMessage, PeekLockQueue
from local.standins.faults import FaultKind
from local.standins.faults import FaultRule as CosmosFault
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared import bootstrap
from shared.payments.consumer import CONSUMER_NAME
from shared.payments.provider import Operation
from shared.stock.consumer import CONSUMER_NAME as STOCK_CONSUMER_NAME
from tests.conftest import ComposeApp, InstallFaulty
from tests.payments.conftest import PROVIDER_TIMEOUT_S, exported, payment_message
from tests.payments.events import event_id
from tests.state import documents
from tests.telemetry.kept_out import MARK, exported_logs, marked_event, showing

ORDER = "ord-8001"
DECLINED_CUSTOMER = "customer-declined"


@dataclass(frozen=True)
class Payments:
    """The payments container's documents, by kind."""

    states: dict[str, dict[str, Any]]  # by order
    calls: list[dict[str, Any]]
    markers: list[dict[str, Any]]

    def outcomes(self, order_id: str) -> dict[str, str]:
        return {m["messageId"]: m["outcome"] for m in self.markers if m["orderId"] == order_id}


async def payments(world: World) -> Payments:
    found = Payments({}, [], [])
    for document in await documents(world.payments_documents):
        kind = document["type"]
        if kind == "payment":
            found.states[document["orderId"]] = document
        elif kind == "call":
            found.calls.append(document)
        else:
            assert kind == "inbox", document
            found.markers.append(document)
    return found


def settled(queue: PeekLockQueue) -> list[tuple[str, str | None]]:
    return [(r.operation, r.reason) for r in queue.settlement_log if r.ok]


def moved(provider: PaymentProviderStandIn) -> list[tuple[str, int]]:
    """The ledger: (operation, amount) of every movement of money, in order."""
    return [(str(entry.operation), entry.amount_minor) for entry in provider.ledger]


def key_of(message_id: str, operation: Operation) -> str:
    return call_key(CONSUMER_NAME, message_id, operation)


@pytest.fixture
async def app(compose_app: ComposeApp) -> bootstrap.Runtime:
    """The app on the world's manual clock (backoff and holds take no real time)."""
    return compose_app()


@dataclass
class FromNthBatch(CosmosFault):
    """Fires on the ``nth`` matching request and on every one after it, until removed."""

    nth: int = 1
    seen: int = 0

    def matches(self, request: HttpRequest) -> bool:
        if not super().matches(request):
            return False
        self.seen += 1
        return self.seen >= self.nth


def payments_batches(world: World, *, status: int = 503) -> FromNthBatch:
    """Every batch request to the payments container answered ``status``: the completing
    batch (marker, state, call record); the in-progress record is a single create."""
    return FromNthBatch(
        FaultKind.STATUS,
        method="POST",
        path_contains=f"/colls/{world.payments_documents.id}/",
        batches_only=True,
        status=status,
        times=None,
    )


async def test_an_accepted_order_is_captured_once_and_recorded(world: World) -> None:
    # Uncomposed: the app builds the payment consumer from the app settings on its first event.
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("complete", None)]
    assert moved(world.payment_provider) == [("capture", 4200)]
    accepted = event_id(ORDER, 1)
    key = key_of(accepted, Operation.CAPTURE)
    assert [entry.idempotency_key for entry in world.payment_provider.ledger] == [key]
    stored = await payments(world)
    state = stored.states[ORDER]
    assert (state["capturedMinor"], state["version"], state["pending"]) == (4200, 1, None)
    [call] = stored.calls
    assert (call["key"], call["operation"], call["result"]["status"]) == (
        key,
        "capture",
        "succeeded",
    )
    assert [m["id"] for m in stored.markers] == [f"inbox:{CONSUMER_NAME}:{accepted}"]


async def test_a_lifecycle_moves_the_difference_each_time_and_nets_the_highest_total(
    world: World, app: bootstrap.Runtime
) -> None:
    steps = [(1, 4200, 4200), (2, 5000, 5000), (3, 1000, 1000), (4, None, 0)]
    for version, total, net in steps:
        world.payments.send(payment_message(ORDER, version, total))
        await world.payment_host.run_until_idle()
        assert world.payment_provider.net_captured(ORDER) == net

    assert settled(world.payments) == [("complete", None)] * 4
    assert moved(world.payment_provider) == [
        ("capture", 4200),  # accepted
        ("capture", 800),  # amended up: the difference
        ("refund", 4000),  # amended down
        ("refund", 1000),  # cancelled: all that was left
    ]
    assert (await payments(world)).states[ORDER]["capturedMinor"] == 0


async def test_duplicates_within_and_beyond_the_topic_window_move_nothing(
    world: World, app: bootstrap.Runtime
) -> None:
    published = payment_message(ORDER, 1, 4200)
    subject = "OrderAccepted"

    def sent() -> ServiceBusMessage:
        return ServiceBusMessage(
            published.body, message_id=published.message_id, subject=subject,
            application_properties={"eventType": subject},
        )  # fmt: skip

    await world.topic.send_messages(sent())
    await world.payment_host.run_until_idle()
    first = await payments(world)
    # Within the topic's duplicate detection window the copy never reaches the subscription;
    # after it, and resubmitted by an operator, it does, and is completed unchanged.
    await world.topic.send_messages(sent())
    assert world.topic.stats.dropped_duplicates == 1
    world.clock.advance(timedelta(seconds=world.topic.duplicate_detection_window_s))
    await world.topic.send_messages(sent())
    world.payments.send(published)

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("complete", None)] * 3
    assert moved(world.payment_provider) == [("capture", 4200)]
    again = await payments(world)
    assert again.states[ORDER]["_etag"] == first.states[ORDER]["_etag"]
    assert again.outcomes(ORDER) == {event_id(ORDER, 1): "processed"}


async def test_a_provider_timeout_after_it_committed_moves_the_money_once_under_one_key(
    world: World, app: bootstrap.Runtime
) -> None:
    """The provider commits, then holds its answer past the client's timeout: the outcome is
    unknown to the app, which finishes the call by the provider's lookup, never a new key."""
    held = world.payment_provider.inject(
        FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=3 * PROVIDER_TIMEOUT_S)
    )
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert held.fired == 1
    assert settled(world.payments) == [("complete", None)]
    received = world.payment_provider.requests_received
    assert (received["POST /v1/captures"], received["GET /v1/operations"]) == (1, 1)
    assert moved(world.payment_provider) == [("capture", 4200)]
    key = key_of(event_id(ORDER, 1), Operation.CAPTURE)
    assert [entry.idempotency_key for entry in world.payment_provider.ledger] == [key]
    [call] = (await payments(world)).calls
    assert (call["key"], call["result"]["amountMinor"]) == (key, 4200)


async def test_a_provider_error_before_it_committed_is_repeated_with_the_same_key_once(
    world: World, app: bootstrap.Runtime
) -> None:
    world.payment_provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("complete", None)]
    assert world.payment_provider.requests_received["POST /v1/captures"] == 2
    key = key_of(event_id(ORDER, 1), Operation.CAPTURE)
    assert [entry.idempotency_key for entry in world.payment_provider.ledger] == [key]
    assert moved(world.payment_provider) == [("capture", 4200)]


async def test_a_stop_between_the_call_and_the_completed_record_is_finished_by_the_redelivery(
    world: World, install_faulty: InstallFaulty
) -> None:
    transport = install_faulty()
    # The completing batch (marker, state, call record) fails for this whole delivery, its
    # in-delivery retries too: the call was made, its record was not.
    transport.add(payments_batches(world))
    world.payments.send(payment_message(ORDER, 1, 4200))
    [first] = world.payments.receive(1)

    await world.payment_host.invoke(first)

    assert settled(world.payments) == [("abandon", None)]
    assert moved(world.payment_provider) == [("capture", 4200)]
    stopped = await payments(world)
    pending = stopped.states[ORDER]["pending"]
    assert pending["key"] == key_of(event_id(ORDER, 1), Operation.CAPTURE)
    assert (stopped.calls, stopped.markers) == ([], [])

    transport.clear()
    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("abandon", None), ("complete", None)]
    assert moved(world.payment_provider) == [("capture", 4200)]  # found, not made again
    finished = await payments(world)
    assert finished.states[ORDER]["pending"] is None
    assert [call["key"] for call in finished.calls] == [pending["key"]]
    assert finished.outcomes(ORDER) == {event_id(ORDER, 1): "processed"}


async def test_concurrent_deliveries_of_one_event_capture_once(
    world: World, app: bootstrap.Runtime
) -> None:
    # Two copies of one event (a resubmission while the first is still locked), invoked
    # together; the provider takes a while, so the second finds the first's call in progress.
    world.payment_provider.inject(
        FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=PROVIDER_TIMEOUT_S / 2)
    )
    world.payments.send(payment_message(ORDER, 1, 4200))
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert [operation for operation, _ in settled(world.payments)].count("complete") == 2
    assert world.payments.dead_letters == []
    assert moved(world.payment_provider) == [("capture", 4200)]
    assert (await payments(world)).outcomes(ORDER) == {event_id(ORDER, 1): "processed"}


async def test_without_keys_an_inconclusive_call_is_parked_and_the_order_waits_behind_it(
    world: World, compose_app: ComposeApp
) -> None:
    """A provider that honours no Idempotency-Key, whose lookup keeps saying the capture is in
    progress: never called again blindly; after its deliveries the event is dead-lettered
    NeedsReconciliation, counted, and the order's next event is parked behind it."""
    telemetry = exported(world.env["ORDER_EVENTS_TOPIC_NAME"], "payments", CONSUMER_NAME)
    world.payment_provider.honour_keys = False
    compose_app(
        env={**world.env, "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "ignored"},
        payment_telemetry=telemetry.telemetry,
    )
    world.payment_provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=60))
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [
        ("abandon", None),
        ("abandon", None),
        ("dead_letter", NEEDS_RECONCILIATION),
    ]
    [parked] = world.payments.dead_letters
    assert parked.delivery_count == 3 and "Payments needing reconciliation" in (
        parked.description or ""
    )
    assert world.payment_provider.requests_received["POST /v1/captures"] == 1
    assert telemetry.counter("orders.payments.reconciliation_needed") == {CONSUMER_NAME: 1}
    assert (await payments(world)).states[ORDER]["pending"]["reconcile"] is True

    world.payments.send(payment_message(ORDER, 2, 5000))
    await world.payment_host.run_until_idle()

    [_, behind] = world.payments.dead_letters
    assert behind.reason == NEEDS_RECONCILIATION and behind.delivery_count == 1
    assert world.payment_provider.requests_received["POST /v1/captures"] == 1
    assert moved(world.payment_provider) == []  # still processing there: an operator decides


async def test_a_declined_card_is_completed_recorded_and_counted(
    world: World, compose_app: ComposeApp
) -> None:
    telemetry = exported(world.env["ORDER_EVENTS_TOPIC_NAME"], "payments", CONSUMER_NAME)
    compose_app(payment_telemetry=telemetry.telemetry)
    world.payment_provider.declined_customers.add(DECLINED_CUSTOMER)
    world.payments.send(payment_message(ORDER, 1, 4200, customer_id=DECLINED_CUSTOMER))

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("complete", None)]
    assert moved(world.payment_provider) == []
    stored = await payments(world)
    assert (stored.states[ORDER]["lastOutcome"], stored.states[ORDER]["capturedMinor"]) == (
        "declined",
        0,
    )
    assert [call["result"]["status"] for call in stored.calls] == ["declined"]
    assert telemetry.counter("orders.payments.declined") == {CONSUMER_NAME: 1}
    assert [(a["orders.outcome"], a["orders.consumer"]) for a in telemetry.span_attributes()] == [
        ("processed", CONSUMER_NAME)
    ]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            OutgoingMessage("m-1", b"{}", subject="OrderShipped"),
            "UnsupportedMessageType",
        ),
        (OutgoingMessage("m-2", b"{not json", subject="OrderAccepted"), "InvalidPayload"),
    ],
    ids=["unsupported-type", "invalid-payload"],
)
async def test_an_invalid_event_is_dead_lettered_and_calls_nothing(
    world: World, app: bootstrap.Runtime, message: OutgoingMessage, reason: str
) -> None:
    world.payments.send(message)

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("dead_letter", reason)]
    assert sum(world.payment_provider.requests_received.values()) == 0
    assert await documents(world.payments_documents) == []


async def test_an_invalid_event_s_values_reach_no_description_span_or_log(
    world: World, compose_app: ComposeApp, caplog: pytest.LogCaptureFixture
) -> None:
    """A customer id and an address in an event that fails the contract: dead-lettered with a
    description of what is wrong, and none of the values in it, in the span or in the log
    record, as logged or exported (issue 36, finding 6)."""
    telemetry = exported(world.env["ORDER_EVENTS_TOPIC_NAME"], "payments", CONSUMER_NAME)
    compose_app(payment_telemetry=telemetry.telemetry)
    world.payments.send(
        OutgoingMessage("m-6", json.dumps(marked_event()).encode(), subject="OrderAccepted")
    )

    with exported_logs() as logs:
        await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("dead_letter", "InvalidPayload")]
    assert sum(world.payment_provider.requests_received.values()) == 0
    [dead] = world.payments.dead_letters
    spans = telemetry.spans.get_finished_spans()
    assert [a["orders.outcome"] for a in telemetry.span_attributes()] == ["invalid"]
    places = showing(
        MARK, descriptions=[dead.description], spans=spans, records=caplog.records, exported=logs
    )
    assert places == []
    assert dead.description == (
        "payload.orderId: Field required; "
        "payload.customerId: String should have at most 64 characters"
    )


async def test_a_cancellation_before_the_acceptance_makes_it_stale_and_moves_no_money(
    world: World, app: bootstrap.Runtime
) -> None:
    world.payments.send(payment_message(ORDER, 2, None))
    await world.payment_host.run_until_idle()
    world.payments.send(payment_message(ORDER, 1, 4200))

    await world.payment_host.run_until_idle()

    assert settled(world.payments) == [("complete", None)] * 2
    assert moved(world.payment_provider) == []
    assert (await payments(world)).outcomes(ORDER) == {
        event_id(ORDER, 2): "processed",
        event_id(ORDER, 1): "stale",
    }


SECRET = "sk-live-do-not-show-9f8e7d"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("PAYMENT_PROVIDER_API_KEY", None),
        ("PAYMENT_PROVIDER_API_KEY", "@Microsoft.KeyVault(SecretUri=https://v/secrets/k/)"),
        ("PAYMENT_PROVIDER_BASE_URL", f"http://{SECRET}@payments.example"),
        ("PAYMENTS_CONTAINER", "not/a/container"),
    ],
    ids=["key-unset", "key-vault-reference-unresolved", "url-plain-http", "invalid-container"],
)
async def test_a_bad_payment_setting_holds_the_lock_and_consume_order_goes_on(
    world: World,
    compose_app: ComposeApp,
    caplog: pytest.LogCaptureFixture,
    setting: str,
    value: str | None,
) -> None:
    """A payment setting the app cannot use is the system's fault, not the event's: held,
    abandoned, never dead-lettered, a critical log naming the setting (never its value), no
    call made; ``consume_order`` never needs the payment settings and goes on."""
    env = {name: v for name, v in world.env.items() if name != setting}
    compose_app(env=env if value is None else {**env, setting: value})
    world.payments.send(payment_message(ORDER, 1, 4200))
    world.queue.send(
        OutgoingMessage("ord-q1", json.dumps(order_body("ord-q1")).encode(), subject=None)
    )
    [delivery] = world.payments.receive(1)

    await world.payment_host.invoke(delivery)
    await world.host.run_until_idle()

    assert settled(world.payments) == [("abandon", None)]
    lock = world.payments.settings.lock_duration
    assert world.clock.now() - (delivery.locked_until - lock) >= lock - timedelta(seconds=10)
    assert world.payments.dead_letters == []
    named = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert [getattr(r, "setting", None) for r in named] == [setting]
    assert SECRET not in caplog.text and world.payment_provider.api_key not in caplog.text
    assert sum(world.payment_provider.requests_received.values()) == 0
    assert [r.operation for r in world.queue.settlement_log] == ["complete"]


async def test_a_refused_credential_is_held_and_abandoned_never_dead_lettered(
    world: World, compose_app: ComposeApp, caplog: pytest.LogCaptureFixture
) -> None:
    """401 from the provider: the system is wrong (a rotated key), retried within the delivery
    while its lock lasts, then given back; the key is in no log."""
    compose_app(env={**world.env, "PAYMENT_PROVIDER_API_KEY": SECRET})
    world.payments.send(payment_message(ORDER, 1, 4200))
    [delivery] = world.payments.receive(1)

    with caplog.at_level(logging.DEBUG):
        await world.payment_host.invoke(delivery)

    assert settled(world.payments) == [("abandon", None)]
    assert world.payments.dead_letters == [] and moved(world.payment_provider) == []
    assert SECRET not in caplog.text


async def test_orders_on_the_queue_reach_the_provider_through_the_relay_and_the_topic(
    world: World, compose_app: ComposeApp
) -> None:
    """The whole chain: consume_order, the outbox relay on the change feed, the topic's payments
    subscription, capture_payment (and reserve_stock on its own subscription, from the same
    events); an acceptance, an amendment up, one down and a cancellation. Each consumer's
    exported span names it."""
    topic = world.env["ORDER_EVENTS_TOPIC_NAME"]
    payment_telemetry = exported(topic, "payments", CONSUMER_NAME)
    stock_telemetry = exported(topic, "inventory", STOCK_CONSUMER_NAME)
    compose_app(
        payment_telemetry=payment_telemetry.telemetry, stock_telemetry=stock_telemetry.telemetry
    )
    one_line = [{"sku": "SKU-1", "quantity": 1, "unitPriceMinor": 1250}]
    steps: list[tuple[OutgoingMessage, int]] = [
        (_queued(order_body(ORDER), None, ORDER), 2 * 1250 + 999),
        (_queued(amended_body(ORDER, 2), "OrderAmended", lifecycle_message_id(ORDER, 2)), 4749),
        (
            _queued(
                amended_body(ORDER, 3, lines=one_line),
                "OrderAmended",
                lifecycle_message_id(ORDER, 3),
            ),
            1250,
        ),
        (_queued(cancelled_body(ORDER, 4), "OrderCancelled", lifecycle_message_id(ORDER, 4)), 0),
    ]
    for message, net in steps:
        world.queue.send(message)
        await world.host.run_until_idle()
        await world.change_feed.drain()
        await world.payment_host.run_until_idle()
        assert world.payment_provider.net_captured(ORDER) == net

    await world.stock_host.run_until_idle()
    assert [r.operation for r in world.queue.settlement_log] == ["complete"] * 4
    assert settled(world.payments) == [("complete", None)] * 4
    assert moved(world.payment_provider) == [
        ("capture", 3499),
        ("capture", 1250),
        ("refund", 3499),
        ("refund", 1250),
    ]
    assert {a["orders.consumer"] for a in payment_telemetry.span_attributes()} == {CONSUMER_NAME}
    assert {a["orders.consumer"] for a in stock_telemetry.span_attributes()} == {
        STOCK_CONSUMER_NAME
    }
    assert settled(world.inventory) == [("complete", None)] * 4


def _queued(body: Mapping[str, Any], subject: str | None, message_id: str) -> OutgoingMessage:
    """A message on the orders queue, as a producer sends it."""
    properties: dict[str, str | int | float | bool] = {}
    if subject is not None:
        properties["eventType"] = subject
    return OutgoingMessage(
        message_id, json.dumps(body).encode(), subject=subject, application_properties=properties
    )
