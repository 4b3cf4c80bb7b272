"""The order lifecycle in ``make demo`` and ``make chaos``: amendments and cancellations sent out
of order and duplicated, converging on each order's highest version.

- ``Change`` and ``history``: one order's messages (OrderPlaced v1, OrderAmended v2..., maybe
  OrderCancelled last), with the MessageIds producers are advised (``{orderId}:v{n}``);
- ``SCHEDULE`` and ``run_lifecycle``: the demo's own scenario, on a world of its own: five
  orders, their messages in rounds (one message per order a round, so each order's order of
  arrival is the one written here): placed then amended then cancelled in order; created by an
  amendment or a cancellation that arrived first, the late OrderPlaced stale; a producer retry
  under a new MessageId (stale); the same MessageId again after the broker's
  duplicate-detection window (a duplicate); an amendment after a cancellation (dead-lettered
  ``InvalidTransition``). The relay publishes after each round;
- its table: the final documents (status, version, what created them, the stale markers), the
  events downstream per order in the order received, the money ``capture_payment`` moved for
  each at the provider stand-in (run after each round, like the relay), and its invariants:
  ``ops.audit``'s over its own data (the live audit must PASS on a healthy lifecycle) and
  ``python -m ops audit`` agreeing with them, and what only the scenario knows
  (``converged``, ``published_in_order``, the dead letters it meant, each order's ledger net
  its highest version's total: ``local.scenarios.payments``);
- ``converged`` and ``published_in_order``: checked by ``make chaos`` too, over the histories it
  mixed into its stream (``local.scenarios.demo``);
- ``LifecycleMix`` and ``mix``: the histories ``make chaos`` mixes into its stream, in random
  permutations, two orders' order of arrival pinned (``LifecycleMix.pin_order_of_arrival``: one
  accepted before its changes, whose OrderAccepted the stock reservation then receives late;
  one created by its change, its OrderPlaced stale).

Never imports ``local.scenarios.demo`` (the runner composes both).
"""

from __future__ import annotations

import functools
import json
import logging
import random
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from idempotent_consumer import INBOX_TYPE, InboxField
from rich.console import Console
from rich.table import Table

from local.assembly.world import CosmosAccount, World, local_world
from local.scenarios.deliveries import OutcomeLog
from local.scenarios.invariants import AUDIT, DEMO, Row, demo_data, operator_audit_agrees
from local.scenarios.payments import expected_nets, nets_are_the_totals, one_move_per_key
from local.scenarios.tables import figures_table, invariants_table
from local.scenarios.tool_runs import ToolRun, audit_arguments, run_tool
from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.cosmos_server import ensure_container
from ops.audit import Invariant, SeenEvent, audit, dead_lettered_as
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from shared.adapters.cosmos_orders import create_client
from shared.consumer.contract import ORDER_AMENDED, ORDER_CANCELLED, DeadletterReason
from shared.consumer.lifecycle import PARTITION_FIELD as MARKER_ORDER_ID  # the markers' order id
from shared.consumer.order import STATUS_ACCEPTED, STATUS_CANCELLED

# A subscription downstream reads (the demo's own, created before any send).
DOWNSTREAM = "downstream"
CONVERGED = "every order in the state of its highest version delivered"
PUBLISHED_IN_ORDER = (
    "each order's events received downstream in increasing versions, to its highest"
)


@dataclass(frozen=True)
class Change:
    """One message of an order's history: OrderPlaced (``subject`` None) or a change."""

    order_id: str
    version: int
    subject: str | None
    body: bytes
    message_id: str

    def message(self, message_id: str | None = None) -> OutgoingMessage:
        """The message; ``message_id``: a producer retry under a MessageId of its own."""
        return OutgoingMessage(
            message_id or self.message_id,
            self.body,
            correlation_id=f"lifecycle-{self.order_id}",
            subject=self.subject,
        )


def placed(order_id: str, body: bytes | None = None) -> Change:
    raw = body if body is not None else json.dumps(order_body(order_id)).encode()
    return Change(order_id, 1, None, raw, order_id)


def amended(order_id: str, version: int, payer: Mapping[str, Any] | None = None) -> Change:
    """``payer``: the order's ``customerId`` and ``currency``, which an amendment keeps (the
    payment capture sends one naming another payer, once money moved, to a person)."""
    body = json.dumps(amended_body(order_id, version, **(payer or {}))).encode()
    return Change(order_id, version, ORDER_AMENDED, body, lifecycle_message_id(order_id, version))


def cancelled(order_id: str, version: int) -> Change:
    body = json.dumps(cancelled_body(order_id, version)).encode()
    return Change(order_id, version, ORDER_CANCELLED, body, lifecycle_message_id(order_id, version))


def history(
    order_id: str, amendments: int, cancel: bool, placed_body: bytes | None = None
) -> list[Change]:
    """Placed, amended ``amendments`` times, cancelled last if ``cancel``: versions 1, 2 ..."""
    steps = [placed(order_id, placed_body)]
    first = json.loads(placed_body) if placed_body is not None else {}
    payer = {name: first[name] for name in ("customerId", "currency") if name in first}
    steps += [amended(order_id, version, payer) for version in range(2, 2 + amendments)]
    if cancel:
        steps.append(cancelled(order_id, 2 + amendments))
    return steps


# ---- what only the scenario knows: convergence and the order of publication -------------------


def converged(orders: Iterable[Mapping[str, Any]], highest: Mapping[str, Change]) -> Invariant:
    """Each order with a history is in the state of its highest version delivered: its version
    and status, and an accepted order's contract fields, a cancelled one's cancellation."""
    stored = {str(d.get("orderId")): d for d in orders}
    wrong: dict[str, list[str]] = {"missing": [], "not at its highest version": []}
    for order_id, change in sorted(highest.items()):
        order = stored.get(order_id)
        if order is None:
            wrong["missing"].append(order_id)
        elif not _in_state_of(order, change):
            wrong["not at its highest version"].append(order_id)
    offending = sorted({i for ids in wrong.values() for i in ids})
    states = Counter(
        str(stored[i].get("status")) for i in highest if i in stored and i not in offending
    )
    return Invariant(
        CONVERGED,
        not offending,
        offending,
        "; ".join(f"{len(ids)} {what} {ids[:5]}" for what, ids in wrong.items() if ids)
        or f"{len(highest)} orders: "
        + ", ".join(f"{n} {status}" for status, n in sorted(states.items())),
    )


def _in_state_of(order: Mapping[str, Any], change: Change) -> bool:
    body = json.loads(change.body)
    if order.get("orderVersion") != change.version:
        return False
    if change.subject == ORDER_CANCELLED:
        return (
            order.get("status") == STATUS_CANCELLED
            and order.get("cancelledAt") == body["cancelledAt"]
            and order.get("cancellationReason") == body["reason"]
        )
    return order.get("status") == STATUS_ACCEPTED and all(
        order.get(name) == body[name] for name in ("customerId", "currency", "lines")
    )


def published_in_order(events: Iterable[SeenEvent], highest: Mapping[str, Change]) -> Invariant:
    """Downstream received each order's events in strictly increasing versions, the last its
    highest version (as the scenario sent it: its type too)."""
    received: dict[str, list[tuple[int | None, str | None]]] = {}
    for event in events:
        if event.order_id in highest:
            received.setdefault(str(event.order_id), []).append((event.version, event.event_type))
    offending = []
    for order_id, change in highest.items():
        seen = received.get(order_id, [])
        versions = [v for v, _ in seen]
        increasing = all(a is not None and b is not None and a < b for a, b in pairwise(versions))
        last_type = change.subject or "OrderAccepted"
        if not seen or not increasing or seen[-1] != (change.version, last_type):
            offending.append(order_id)
    return Invariant(
        PUBLISHED_IN_ORDER,
        not offending,
        sorted(offending),
        f"{len(offending)} not so {sorted(offending)[:5]}"
        if offending
        else f"{sum(map(len, received.values()))} events of {len(highest)} orders",
    )


# ---- chaos: lifecycles mixed into the stream ------------------------------------------------


@dataclass
class LifecycleMix:
    """The lifecycles ``make chaos`` mixes into its stream, decided up front from the seed."""

    histories: dict[str, list[Change]] = field(default_factory=dict)
    # Phase 1, in place of the order's OrderPlaced: its history in a random permutation, with
    # copies under the same MessageId (the broker drops them) and producer retries under new
    # MessageIds (stale, or applied when they come first and the original is then stale).
    sends: dict[str, list[OutgoingMessage]] = field(default_factory=dict)
    late: list[OutgoingMessage] = field(default_factory=list)  # copies after the window
    # Phase 1 too, once the stream is consumed (``pin_order_of_arrival``): what two orders'
    # order of arrival is pinned by, whatever the timing of the concurrent deliveries.
    after_stream: list[OutgoingMessage] = field(default_factory=list)
    # The order whose changes come after its OrderPlaced was applied: its OrderAccepted is
    # published, then its changes' events (the stock reservation's pinned late OrderAccepted).
    accepted_then_changed: str | None = None
    # The order created by a change: its OrderPlaced comes after, stale, and publishes nothing.
    created_by_change: str | None = None

    @property
    def message_ids(self) -> set[str]:
        sent = [*self.sends.values(), self.late, self.after_stream]
        return {str(m.message_id) for ms in sent for m in ms} - set(self.histories)

    def change_messages(self) -> dict[str, int]:
        """Per order, the distinct MessageIds of its changes sent (its OrderPlaced not counted)."""
        ids: dict[str, set[str]] = {}
        for order_id, messages in self.sends.items():
            ids[order_id] = {str(m.message_id) for m in messages} - {order_id}
        for message in [*self.after_stream, *self.late]:  # a MessageId sent before: counted once
            order_id = str(json.loads(message.body)["orderId"])
            if message.message_id != order_id:
                ids.setdefault(order_id, set()).add(str(message.message_id))
        return {order_id: len(found) for order_id, found in ids.items()}

    def pin_order_of_arrival(self, excluded: Collection[str]) -> None:
        """Pins two orders' order of arrival at ``consume_order``, the first two of the mix not
        in ``excluded`` (orders whose OrderPlaced a producer retries: its copy would come in the
        stream): the rest of the mix arrives in its random permutation, and concurrent
        deliveries may overtake one another, so which order is created by what is otherwise
        left to timing.

        - ``accepted_then_changed``: its changes held back until the stream is consumed, so its
          OrderPlaced is applied first: its OrderAccepted is published, and its changes' events
          after it. The stock reservation holds that OrderAccepted back until its changes are
          applied (``local.scenarios.inventory.LateOrderAccepted``): stale there, always;
        - ``created_by_change``: its OrderPlaced held back until the stream is consumed, so a
          change creates the order: the OrderPlaced is stale, always, and no OrderAccepted of
          it is ever published."""
        chosen = [order_id for order_id in self.histories if order_id not in excluded][:2]
        if len(chosen) < 2:
            return
        self.accepted_then_changed, self.created_by_change = chosen
        for order_id, hold_back_placed in zip(chosen, (False, True), strict=True):
            messages = self.sends[order_id]
            held = [m for m in messages if (m.message_id == order_id) is hold_back_placed]
            self.sends[order_id] = [m for m in messages if m not in held]
            self.after_stream += held

    @property
    def highest(self) -> dict[str, Change]:
        return {order_id: steps[-1] for order_id, steps in self.histories.items()}


def mix(bodies: Mapping[str, bytes], rate: float, seed: int) -> LifecycleMix:
    """A ``rate`` of the orders get 1 to 3 amendments and, one in two, a cancellation; each
    change may be copied (at once or after the window) or retried under a new MessageId. An RNG
    of its own: the rest of the plan is the same with or without lifecycles. The plan then pins
    two orders' order of arrival (``LifecycleMix.pin_order_of_arrival``)."""
    rng = random.Random(f"{seed}-lifecycle")
    found = LifecycleMix()
    for order_id, body in bodies.items():
        if rng.random() >= rate:
            continue
        steps = history(order_id, rng.randint(1, 3), rng.random() < 0.5, placed_body=body)
        messages = [step.message() for step in steps]
        messages[0] = OutgoingMessage(
            order_id, body, correlation_id=f"checkout-{order_id}", subject=None
        )
        for step in steps[1:]:
            roll = rng.random()
            if roll < 0.2:
                messages.append(step.message())  # at once: the broker drops it
            elif roll < 0.4:
                messages.append(step.message(f"{step.message_id}:retry"))
            elif roll < 0.5:
                found.late.append(step.message())
        rng.shuffle(messages)
        found.histories[order_id] = steps
        found.sends[order_id] = messages
    return found


# ---- the demo's scenario ------------------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    change: Change
    retry_id: str | None = None  # a producer retry: the same change under a new MessageId


AFTER_THE_WINDOW = "after the duplicate-detection window"


def schedule() -> list[list[Send] | str]:
    """The scenario's rounds, one message per order a round (and ``AFTER_THE_WINDOW``: the
    clock advanced past the broker's duplicate detection). What each ends in, per order:

    - lc-1: placed, amended v2, v3, cancelled v4 in order; v2 again after the window (duplicate);
    - lc-2: amendment v3 first (creates the order), v2 (stale), OrderPlaced (stale), v3 again
      after the window (duplicate);
    - lc-3: cancellation v3 first (a tombstone), OrderPlaced (stale), amendment v2 (stale);
    - lc-4: placed, amended v2, v2 retried under a new MessageId (stale), cancelled v3, then an
      amendment v4 after its cancellation (dead-lettered ``InvalidTransition``);
    - lc-5: amendment v2 first (creates it), OrderPlaced (stale), cancelled v3, v2 again after
      the window (duplicate)."""
    return [
        [
            Send(placed("lc-1")),
            Send(amended("lc-2", 3)),
            Send(cancelled("lc-3", 3)),
            Send(placed("lc-4")),
            Send(amended("lc-5", 2)),
        ],
        [
            Send(amended("lc-1", 2)),
            Send(amended("lc-2", 2)),
            Send(placed("lc-3")),
            Send(amended("lc-4", 2)),
            Send(placed("lc-5")),
        ],
        [
            Send(amended("lc-1", 3)),
            Send(placed("lc-2")),
            Send(amended("lc-3", 2)),
            Send(amended("lc-4", 2), retry_id="lc-4:v2:retry"),
            Send(cancelled("lc-5", 3)),
        ],
        AFTER_THE_WINDOW,
        [
            Send(amended("lc-1", 2)),
            Send(amended("lc-2", 3)),
            Send(cancelled("lc-4", 3)),
            Send(amended("lc-5", 2)),
        ],
        [Send(cancelled("lc-1", 4)), Send(amended("lc-4", 4))],
    ]


# The one change the scenario means to be refused: after lc-4's cancellation at v3.
INVALID_TRANSITIONS = [("lc-4:v4", DeadletterReason.INVALID_TRANSITION)]


@dataclass
class LifecycleReport:
    figures: dict[str, int] = field(default_factory=dict)
    # order id -> (status, version, created by, stale markers, messages delivered)
    documents: dict[str, tuple[str, int, str, int, int]] = field(default_factory=dict)
    events: dict[str, list[str]] = field(default_factory=dict)  # order id -> "Type vN" received
    money: dict[str, list[str]] = field(default_factory=dict)  # order id -> "capture N" moved
    rows: list[Row] = field(default_factory=list)

    @property
    def checks(self) -> list[Invariant]:
        return [row.invariant for row in self.rows]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


async def run_lifecycle(
    account: CosmosAccount,
    *,
    seed: int,
    verify_tls: bool,
    concurrency: int,
) -> LifecycleReport:
    """The scenario on a world (queue, topic, container) of its own, then its table."""
    suffix = f"{seed}-{uuid.uuid4().hex[:8]}"
    container_name = f"lifecycle-{suffix}"
    # The downstream consumers' containers of its own too (a real account keeps none of it).
    own = {
        "INVENTORY_CONTAINER": f"lifecycle-inventory-{suffix}",
        "PAYMENTS_CONTAINER": f"lifecycle-payments-{suffix}",
    }
    started = datetime.now(UTC)
    counted = OutcomeLog()
    consumer_logger = logging.getLogger("orders.consumer")
    consumer_logger.addHandler(counted)
    try:
        async with (
            local_world(
                account=account,
                container=container_name,
                verify_tls=verify_tls,
                clock=ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
                max_concurrent_calls=concurrency,
                env=own,
            ) as world,
            create_client(world.settings) as verifier,
        ):
            container = await ensure_container(
                verifier, world.settings.cosmos_database, container_name
            )
            world.compose(jitter=random.Random(seed).random)
            world.topic.add_subscription(DOWNSTREAM)
            sent = await _send_rounds(world)
            documents = [item async for item in container.query_items("SELECT * FROM c")]
            tool = functools.partial(
                run_tool, world=world, account=account, container_name=container_name
            )
            report = _report(world, documents, sent, counted.outcomes, tool, started)
            if not account.is_local_server:
                database = verifier.get_database_client(world.settings.cosmos_database)
                for name in (container_name, *own.values()):
                    await database.delete_container(name)
            return report
    finally:
        consumer_logger.removeHandler(counted)


async def _send_rounds(world: World) -> Counter[str]:
    """Each round sent, delivered to idle, and published; returns the messages sent per order."""
    sent: Counter[str] = Counter()
    for round_ in schedule():
        if isinstance(round_, str):
            world.clock.advance(world.queue.settings.duplicate_detection_window)
            continue
        for send in round_:
            world.queue.send(send.change.message(send.retry_id))
            sent[send.change.order_id] += 1
        await world.host.run_until_idle()
        await world.change_feed.drain()
        await world.payment_host.run_until_idle()  # the money, from the events published
    return sent


def _highest(rounds: Sequence[list[Send] | str]) -> dict[str, Change]:
    """Each order's highest version sent, but the change meant to be refused."""
    refused = {message_id for message_id, _ in INVALID_TRANSITIONS}
    highest: dict[str, Change] = {}
    for round_ in rounds:
        for send in round_ if not isinstance(round_, str) else []:
            change = send.change
            if change.message_id in refused:
                continue
            if change.order_id not in highest or highest[change.order_id].version < change.version:
                highest[change.order_id] = change
    return highest


def _report(
    world: World,
    documents: list[dict[str, Any]],
    sent: Counter[str],
    outcomes: Counter[str],
    tool: Callable[[Sequence[str]], ToolRun],
    started: datetime,
) -> LifecycleReport:
    delivered = world.topic.delivered(DOWNSTREAM)
    data = demo_data(documents, world.queue.dead_letters, delivered)
    highest = _highest(schedule())
    stale = Counter(
        str(m.get(MARKER_ORDER_ID))
        for m in data.markers
        if m.get(InboxField.OUTCOME) == "stale" and m.get(InboxField.TYPE) == INBOX_TYPE
    )
    report = LifecycleReport()
    for order in sorted(data.orders, key=lambda d: str(d.get("orderId"))):
        order_id = str(order.get("orderId"))
        report.documents[order_id] = (
            str(order.get("status")),
            int(order.get("orderVersion", 1)),
            str(order.get("createdBy") or "OrderPlaced"),
            stale[order_id],
            sent[order_id],
        )
    for event in data.events or []:
        report.events.setdefault(str(event.order_id), []).append(
            f"{event.event_type} v{event.version}"
        )
    letters = world.queue.dead_letters
    report.figures = {
        "messages sent": sum(sent.values()),
        "dropped by duplicate detection": world.queue.stats.dropped_duplicates,
        "processed": outcomes["processed"],
        "stale": outcomes["stale"],
        "stale markers": sum(stale.values()),
        "duplicates": outcomes["duplicate"],
        "dead-lettered InvalidTransition": sum(
            x.reason == DeadletterReason.INVALID_TRANSITION for x in letters
        ),
        "events received downstream": len(data.events or []),
    }
    flow = audit(data, now=world.clock.now(), pending_grace=timedelta(0))
    agreement = operator_audit_agrees(flow, data, tool([*audit_arguments(started), "--json"]))
    refused = dead_lettered_as(
        data.dead_letters,
        INVALID_TRANSITIONS,
        "the amendment after a cancellation dead-lettered InvalidTransition, and nothing else",
    )
    others = [x for x in data.dead_letters if (x.message_id, x.reason) not in INVALID_TRANSITIONS]
    only_that = Invariant(
        refused.name,
        refused.passed and not others,
        sorted({*refused.offending, *(str(x.message_id) for x in others)}),
        refused.detail + (f"; {len(others)} other dead letters" if others else ""),
    )
    stale_seen = Invariant(
        "stale messages completed with a marker (a retry, a late OrderPlaced)",
        outcomes["stale"] > 0 and outcomes["stale"] == sum(stale.values()),
        [],
        f"{outcomes['stale']} stale, {sum(stale.values())} stale markers",
    )
    ledger = world.payment_provider.ledger
    for entry in ledger:
        report.money.setdefault(entry.order_id, []).append(
            f"{entry.operation} {entry.amount_minor}"
        )
    report.rows = [
        *(Row(invariant, AUDIT) for invariant in flow),
        *(
            Row(invariant, DEMO)
            for invariant in [
                converged(data.orders, highest),
                published_in_order(data.events or [], highest),
                stale_seen,
                only_that,
                agreement,
                # capture_payment on the same events: the money through the lifecycle
                nets_are_the_totals(expected_nets(data.orders, None), ledger),
                one_move_per_key(ledger),
            ]
        ),
    ]
    return report


def print_lifecycle(report: LifecycleReport, console: Console) -> None:
    console.print(figures_table("The order lifecycle", report.figures))
    documents = Table(title="Lifecycle: the final documents")
    for column in ("order", "status", "version", "created by", "stale", "messages sent"):
        documents.add_column(column, justify="right" if column in ("version", "stale") else "left")
    for order_id, (status, version, created_by, stale, sent) in report.documents.items():
        documents.add_row(order_id, status, str(version), created_by, str(stale), str(sent))
    console.print(documents)
    events = Table(title="Lifecycle: the events downstream, in the order received")
    events.add_column("order")
    events.add_column("events")
    for order_id, received in sorted(report.events.items()):
        events.add_row(order_id, " -> ".join(received))
    console.print(events)
    money = Table(title="Lifecycle: the money the provider moved (capture_payment), in order")
    money.add_column("order")
    money.add_column("ledger")
    for order_id, moved in sorted(report.money.items()):
        money.add_row(order_id, " -> ".join(moved))
    console.print(money)
    console.print(invariants_table("Lifecycle invariants", report.rows))
