"""The inventory in ``make demo`` and ``make chaos``: the orders' events, published by the relay
to the ``order-events`` topic, reserve stock through ``reserve_stock`` on its ``inventory``
subscription (the host's trigger, ``World.stock_host``), in an inventory container of the run's
own.

- ``stock_plan``: the stock seeded, before any order is sent, for every SKU the run's orders
  want (from the plan): the few SKUs the most orders want seeded short on purpose, half their
  demand on hand (the orders race for it; the late ones reserve what is left and are
  backordered the rest), one SKU never stocked (all of it backordered), the rest with enough;
- ``InventoryRun``: the trigger run to idle after each relay phase, with trouble of its own on
  its deliveries (a crash after the commit, a lock expiry: the orders' rates, drawn per event
  from the seed), its outcomes counted from the consumer's log and its shortfall from the
  ``orders.stock.shortfall`` counter as the telemetry exports it;
- ``LateOrderAccepted``: under ``make chaos``, one late OrderAccepted pinned whatever the
  timing: the OrderAccepted of the order the lifecycle mix accepts before its changes
  (``LifecycleMix.accepted_then_changed``) stalls in its first delivery until the order's
  change is applied, then its lock lapses and its redelivery is ``stale``; the figures count
  it held (``LATE_HELD``) and completed stale by its inbox marker (``LATE_HELD_STALE``);
- ``inventory_rows``: its table of invariants over the inventory container's documents and the
  orders container's (each order's highest version and what it wants): per SKU what
  ``python -m ops stock audit`` checks (``ops.stock.read_sku``: ``reserved`` is the sum of the
  reservations, within ``0..onHand``); per order, its reservations at its highest version
  wanting what that version wants (a cancelled order, nothing); every shortfall backordered
  and counted, nothing left free of a SKU with a backorder (``exact_shortfall``: when each
  order has one version and nothing fails below the SDK; ``make chaos`` amends orders, which
  counts a shortfall again and frees stock, so it leaves that row out); no event
  dead-lettered; the stand-in's own figures;
- ``stock_rows``: per SKU onHand, reserved, free, backordered: the short SKUs, the unstocked
  one, then every other SKU summed in one row.

Never imports the runner (``local.scenarios.demo``); sends nothing (the relay publishes).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import INBOX_TYPE, InboxField, Outcome
from rich.console import Console
from rich.table import Table

from local.assembly.world import World
from local.scenarios.deliveries import ExportedCounters, OutcomeLog, Trouble, drawn
from local.scenarios.invariants import DEMO, STAND_IN, Row
from local.scenarios.options import DemoOptions
from local.scenarios.tables import figures_table, invariants_table, print_tool_run
from local.scenarios.tool_runs import ToolRun
from local.standins.broker import (
    DeadLetteredMessage,
    Delivery,
    MessageLockLostError,
    PeekLockQueue,
)
from local.standins.host import InvokeHook
from ops.audit import Invariant, SeenEvent
from ops.stock import Inventory, Patched, SkuStock, StockPartition, read_sku
from shared.consumer.contract import ORDER_ACCEPTED_EVENT_TYPE
from shared.consumer.order import ORDER_TYPE, is_cancelled, stored_version
from shared.stock.consumer import CONSUMER_NAME
from shared.stock.inventory import (
    ORDER_INDEX_ID,
    ORDER_INDEX_TYPE,
    PARTITION_FIELD,
    RESERVATION_TYPE,
    STOCK_ITEM_TYPE,
    Field,
    order_partition,
)
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.names import METRIC_STOCK_SHORTFALL

# Who checks a row: what ``python -m ops stock audit`` checks on a live deployment
# (``ops.stock``), here over the run's own inventory container.
STOCK_AUDIT = "stock audit"
RESERVED_IS_THE_SUM = "every SKU's reserved is the sum of its reservations"
WITHIN_ON_HAND = "every SKU's reserved within 0..onHand"
AT_HIGHEST_VERSION = "every order's reservations at its highest version, as that version wants"
SHORTFALL_COUNTED = "every shortfall backordered and counted, nothing free where one is"
NOTHING_DEAD_LETTERED = "no order event dead-lettered by reserve_stock"
SUBSCRIPTION_DRAINED = "inventory subscription drained"
NO_INVOCATION_FAILED = "no reserve_stock invocation failed"
STOCK_AUDIT_AGREES = "python -m ops stock audit agrees on the SKUs shown"
SHORT_COUNTED = "units short, counted (orders.stock.shortfall)"
SHORT_SKUS = 4  # seeded with half their demand
INVENTORY_CAPTION = (
    "checked by: stock audit = ops.stock, what python -m ops stock audit checks on a live "
    "deployment; demo = against the orders' highest versions and what the demo seeded; "
    "stand-in = the stand-in's own figures"
)


@dataclass(frozen=True)
class StockPlan:
    """The stock seeded for a run (``stock_plan``)."""

    on_hand: dict[str, int]  # SKU -> onHand, every SKU seeded
    short: list[str]  # seeded with less than the orders want, on purpose
    unstocked: list[str]  # wanted, never seeded

    @property
    def shown(self) -> list[str]:
        """The SKUs the stock table shows one by one."""
        return [*self.short, *self.unstocked]


def wanted_per_sku(bodies: Iterable[bytes]) -> dict[str, dict[str, int]]:
    """SKU -> order -> the most any of the order's versions wants of it (lines of one SKU
    summed, as the consumer reads them), from the bodies the producer sends (OrderPlaced and
    amendments; a cancellation wants nothing)."""
    wanted: dict[str, dict[str, int]] = defaultdict(dict)
    for raw in bodies:
        body = json.loads(raw)
        order_id = str(body["orderId"])
        for sku, quantity in _lines(body.get("lines") or []).items():
            wanted[sku][order_id] = max(wanted[sku].get(order_id, 0), quantity)
    return dict(wanted)


def _lines(lines: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    summed: Counter[str] = Counter()
    for line in lines:
        summed[str(line["sku"])] += int(line["quantity"])
    return dict(summed)


def stock_plan(wanted: Mapping[str, Mapping[str, int]], seed: int) -> StockPlan:
    """Short on purpose: the ``SHORT_SKUS`` SKUs the most orders want (then the most units),
    half their demand on hand; never stocked: one SKU a single order wants; every other SKU its
    whole demand and up to 3 more."""
    rng = random.Random(f"{seed}-stock")
    by_contention = sorted(wanted, key=lambda sku: (-len(wanted[sku]), -sum(wanted[sku].values())))
    short = by_contention[:SHORT_SKUS]
    singles = sorted(sku for sku in wanted if len(wanted[sku]) == 1 and sku not in short)
    unstocked = [rng.choice(singles)] if singles else []
    on_hand: dict[str, int] = {}
    for sku in sorted(wanted):
        demand = sum(wanted[sku].values())
        if sku in short:
            on_hand[sku] = demand // 2
        elif sku not in unstocked:
            on_hand[sku] = demand + rng.randrange(0, 4)
    return StockPlan(on_hand, short, unstocked)


# How long the pinned OrderAccepted's deliveries wait, in real time, for its order's change to be
# applied before they give up (then it is delivered as it comes, and the figures say so): the
# change's event comes after the rest of the stream's, so the wait grows with the run (at 10,000
# orders it is minutes: a fixed 120 s gave up there).
LATE_HOLD_S = 120.0
LATE_HOLD_S_PER_ORDER = 0.06


def late_hold_s(orders: int) -> float:
    """The stall's bound for a run of ``orders`` orders."""
    return LATE_HOLD_S + LATE_HOLD_S_PER_ORDER * orders


LATE_HELD = "OrderAccepted held until its order's change was applied (pinned)"
LATE_HELD_STALE = "of them redelivered and completed stale (its inbox marker)"


class _Held(enum.Enum):
    APPLIED = "the order's change applied"
    LAPSED = "the lock lapsed first: the broker has the message back"
    GAVE_UP = "not applied within the stall's bound"


@dataclass
class LateOrderAccepted:
    """The pinned late OrderAccepted, on the inventory subscription: a delivery of
    ``order_id``'s OrderAccepted is received and the instance that holds it stalls before the
    function runs, its host renewing the lock as it does for a running invocation (host.json's
    ``maxAutoLockRenewalDuration``: docs/configuration.md), until the order's later version (an
    amendment or a cancellation the relay published after it) has been applied by other
    deliveries; then the instance dies, its lock lapses (``PeekLockQueue.expire_lock``), and
    the broker delivers the message again (a lapsed lock makes it available, its delivery
    count + 1; without sessions a subscription promises no order among its messages:
    https://learn.microsoft.com/azure/service-bus-messaging/message-sessions). That delivery
    finds the order's index at a later version: ``stale``, whatever the timing of the other
    deliveries. A delivery of it whose lock lapsed during the stall (the run's one clock moved
    past it: another host waiting for a lock) ends there, and its next delivery stalls in turn.
    Every other delivery goes to ``then`` (the run's trouble).

    The order is ``LifecycleMix.accepted_then_changed``: its OrderAccepted is published before
    its changes' events, in one relay phase, so a change is in the subscription to be applied
    while the OrderAccepted stalls. The stall is bounded (``hold_s``, ``late_hold_s``: a
    change whose delivery needed the clock to move, which the stalled invocation keeps the
    host from doing, would never come), past which the OrderAccepted is delivered as it
    comes."""

    order_id: str
    queue: PeekLockQueue
    documents: ContainerProxy  # the inventory container, through a client without faults
    then: InvokeHook
    held: list[str] = field(default_factory=list)  # MessageIds held past their order's change
    released: bool = False  # held until its change, or given up: delivered as it comes since
    hold_s: float = LATE_HOLD_S  # the stall's bound, real time (``late_hold_s``)

    async def __call__(self, delivery: Delivery, invoke: Callable[[], Awaitable[None]]) -> None:
        message = delivery.message
        event = SeenEvent.from_body(message.message_id, message.body)
        pinned = event.order_id == self.order_id and event.event_type in (
            None,
            ORDER_ACCEPTED_EVENT_TYPE,
        )
        if self.released or not pinned or event.version is None:
            await self.then(delivery, invoke)
            return
        held = await self._stall(delivery.lock_token, event.version)
        if held is _Held.LAPSED:
            return  # the function never ran, nothing settled: the broker delivers it again
        if not self.released:  # (another delivery of it, stalled at once, may have ended first)
            self.released = True
            if held is _Held.APPLIED:
                self.held.append(str(message.message_id))
        with contextlib.suppress(MessageLockLostError):  # lapsed meanwhile: back all the same
            self.queue.expire_lock(delivery.lock_token)

    async def _stall(self, lock_token: uuid.UUID, version: int) -> _Held:
        """Until the order's index (``reserve_stock``'s gate) is above ``version``, read every
        50 ms, renewing the lock before each read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.hold_s
        while loop.time() < deadline:
            try:
                self.queue.renew_lock(lock_token)
            except MessageLockLostError:
                return _Held.LAPSED
            found = self._in_partition("c.id = @id", {"@id": ORDER_INDEX_ID})
            versions = [index.get(Field.ORDER_VERSION) async for index in found]
            if any(isinstance(v, int) and v > version for v in versions):
                return _Held.APPLIED
            await asyncio.sleep(0.05)
        return _Held.GAVE_UP

    async def stale_markers(self) -> int:
        """How many of the held MessageIds ``reserve_stock`` completed stale: the outcome its
        inbox marker records in the order's index partition (the gate's)."""
        stale = 0
        for message_id in self.held:
            found = self._in_partition("c.type = @inbox", {"@inbox": INBOX_TYPE})
            stale += sum(
                [
                    marker.get(InboxField.CONSUMER) == CONSUMER_NAME
                    and marker.get(InboxField.MESSAGE_ID) == message_id
                    and marker.get(InboxField.OUTCOME) == Outcome.STALE.value
                    async for marker in found
                ]
            )
        return stale

    def _in_partition(self, condition: str, values: Mapping[str, str]) -> AsyncIterable[Any]:
        """The order's index partition's documents on ``condition``: one query targeted at
        its partition key value, named in the query too (the local server requires it)."""
        key = order_partition(self.order_id)
        return self.documents.query_items(
            f"SELECT * FROM c WHERE c.{PARTITION_FIELD} = @key AND {condition}",
            parameters=[
                {"name": name, "value": value} for name, value in {"@key": key, **values}.items()
            ],
            partition_key=key,
        )


@dataclass
class InventoryRun:
    """``reserve_stock`` on the inventory subscription, run to idle with its own trouble (and,
    when the mix pinned one, the late OrderAccepted: ``LateOrderAccepted``)."""

    world: World
    trouble: Trouble
    log: OutcomeLog  # the stock consumer's outcome records (``OutcomeLog(CONSUMER_NAME)``)
    counters: ExportedCounters = field(default_factory=ExportedCounters)
    late: LateOrderAccepted | None = None

    @classmethod
    def on(
        cls,
        world: World,
        options: DemoOptions,
        log: OutcomeLog,
        late_accepted: str | None = None,
    ) -> InventoryRun:
        """On ``world``'s inventory subscription, with the orders' trouble rates; the
        OrderAccepted of ``late_accepted`` (an order id) held until its change is applied."""
        trouble = Trouble(
            world.inventory,
            world.settlement,
            crash=drawn(options.seed, "inventory-crash", options.crash_rate),
            lock_expiry=drawn(options.seed, "inventory-lock-expiry", options.lock_expiry_rate),
        )
        late = (
            LateOrderAccepted(
                late_accepted,
                world.inventory,
                world.inventory_documents,
                trouble,
                hold_s=late_hold_s(options.orders),
            )
            if late_accepted is not None
            else None
        )
        return cls(world, trouble, log, late=late)

    def telemetry(self) -> ConsumerTelemetry:
        """The stock consumer's telemetry, for ``World.compose(stock_telemetry=...)``."""
        env = self.world.env
        return self.counters.telemetry(
            env["ORDER_EVENTS_TOPIC_NAME"], env["INVENTORY_SUBSCRIPTION_NAME"], CONSUMER_NAME
        )

    async def seed(self, plan: StockPlan, *, concurrently: int = 16) -> None:
        """Every SKU's stock item, ``concurrently`` writes at a time (one SKU each)."""
        items = list(plan.on_hand.items())
        for start in range(0, len(items), concurrently):
            batch = items[start : start + concurrently]
            await asyncio.gather(*(self.world.seed_stock({sku: n}) for sku, n in batch))

    async def until_idle(self) -> None:
        on_delivery: InvokeHook = self.trouble if self.late is None else self.late
        await self.world.stock_host.run_until_idle(on_delivery=on_delivery)

    async def documents(self) -> list[dict[str, Any]]:
        """The inventory container's stock items, reservations and order indexes (its inbox
        markers left out: the table needs none of them, and they are most of it)."""
        found = self.world.inventory_documents.query_items(
            "SELECT * FROM c WHERE c.type IN (@stock, @reservation, @index)",
            parameters=[
                {"name": "@stock", "value": STOCK_ITEM_TYPE},
                {"name": "@reservation", "value": RESERVATION_TYPE},
                {"name": "@index", "value": ORDER_INDEX_TYPE},
            ],
        )
        return [document async for document in found]

    def figures(self) -> dict[str, int]:
        queue = self.world.inventory.stats
        outcomes = self.log.outcomes
        return {
            "events delivered to the inventory subscription": queue.accepted,
            "deliveries": queue.deliveries,
            "processed": outcomes["processed"],
            "duplicates": outcomes["duplicate"],
            "stale": outcomes["stale"],
            "dead-lettered": queue.dead_lettered,
            "settlements lost (crash / lock expiry)": self.log.settlement_failures,
            "in-delivery retries": self.log.retries,
            SHORT_COUNTED: self.counters.total(METRIC_STOCK_SHORTFALL, CONSUMER_NAME),
            **({LATE_HELD: len(self.late.held)} if self.late is not None else {}),
        }

    def stand_in_checks(self) -> list[Invariant]:
        host = self.world.stock_host.stats
        return subscription_checks(
            active_messages=self.world.inventory.active_count(),
            failed_invocations=host.failed_invocations,
            errors=host.errors,
        )


def subscription_checks(
    *, active_messages: int, failed_invocations: int, errors: Sequence[str]
) -> list[Invariant]:
    """The stand-in's own figures: the inventory subscription holds nothing undelivered or
    locked, and no invocation of ``reserve_stock`` failed."""
    return [
        Invariant(
            SUBSCRIPTION_DRAINED, active_messages == 0, [], f"{active_messages} still active"
        ),
        Invariant(
            NO_INVOCATION_FAILED,
            failed_invocations == 0,
            [],
            "; ".join(errors[:3]) or "none",
        ),
    ]


# ---- the table: what the documents say --------------------------------------------------------


class StoredInventory:
    """``ops.stock``'s ``Inventory`` port over documents already read (one query of the whole
    container): ``read_sku`` then checks each SKU as ``python -m ops stock audit`` does. Read
    only."""

    def __init__(self, documents: Iterable[Mapping[str, Any]]) -> None:
        self._by_sku: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for document in documents:
            if document.get(Field.TYPE) in (STOCK_ITEM_TYPE, RESERVATION_TYPE):
                self._by_sku[str(document.get(Field.SKU))].append(dict(document))

    def partition(self, sku: str) -> StockPartition:
        return StockPartition(self._by_sku.get(sku, []), 0.0)

    def skus(self) -> list[str]:
        """Every SKU with a stock item or a reservation."""
        return sorted(self._by_sku)

    def stocked_skus(self) -> list[str]:
        return [
            sku
            for sku, found in self._by_sku.items()
            if any(d.get(Field.TYPE) == STOCK_ITEM_TYPE for d in found)
        ]

    def stock_item(self, sku: str) -> dict[str, Any] | None:
        return next(
            (d for d in self._by_sku.get(sku, []) if d.get(Field.TYPE) == STOCK_ITEM_TYPE), None
        )

    def create_stock_item(self, document: Mapping[str, Any]) -> bool:
        raise NotImplementedError("read only: the documents as the run left them")

    def set_on_hand(self, sku: str, on_hand: int) -> Patched:
        raise NotImplementedError("read only: the documents as the run left them")


def read_stock(documents: Iterable[Mapping[str, Any]]) -> list[SkuStock]:
    """Every SKU of the documents, read as ``python -m ops stock`` reads one."""
    stored = StoredInventory(documents)
    inventory: Inventory = stored  # the port, as the tool's adapter implements it
    return [read_sku(inventory, sku) for sku in stored.skus()]


def reserved_is_the_sum(stocks: Sequence[SkuStock]) -> Invariant:
    """The consumer moves a SKU's ``reserved`` and an order's reservation in one batch: they
    agree (a SKU never stocked reserves nothing)."""
    wrong = [s.sku for s in stocks if (s.reserved or 0) != s.reserved_by_orders]
    return Invariant(
        RESERVED_IS_THE_SUM,
        not wrong,
        wrong,
        _offending(wrong, "SKUs")
        or f"{len(stocks)} SKUs, {sum(s.reserved_by_orders for s in stocks)} units reserved by "
        f"{sum(s.reservations for s in stocks)} reservations",
    )


def within_on_hand(stocks: Sequence[SkuStock]) -> Invariant:
    """Never negative, never above ``onHand`` (the increment's condition, in the batch)."""
    wrong = [
        s.sku
        for s in stocks
        if s.reserved is not None and s.on_hand is not None and not 0 <= s.reserved <= s.on_hand
    ]
    full = sum(1 for s in stocks if s.free == 0)
    return Invariant(
        WITHIN_ON_HAND,
        not wrong,
        wrong,
        _offending(wrong, "SKUs") or f"{len(stocks)} SKUs, {full} with nothing free",
    )


def at_highest_versions(
    orders: Iterable[Mapping[str, Any]], documents: Iterable[Mapping[str, Any]]
) -> Invariant:
    """Each stored order's highest version (the orders container's document, which the order
    lifecycle's invariants hold to the highest version sent) is the inventory's: its index at
    that version, a reservation in each SKU that version wants, every reservation of the order
    at that version and requesting what it wants there (nothing, once cancelled, or in a SKU
    only an earlier version wanted), reserved and backordered adding up to it; and no
    reservation of an order that was never stored."""
    highest = {
        str(o.get("orderId")): (stored_version(o), {} if is_cancelled(o) else _lines(_of(o)))
        for o in orders
        if o.get("type") == ORDER_TYPE
    }
    reservations: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    indexes: dict[str, Mapping[str, Any]] = {}
    for document in documents:
        kind, order_id = document.get(Field.TYPE), str(document.get(Field.ORDER_ID))
        if kind == RESERVATION_TYPE:
            reservations[order_id].append(document)
        elif kind == ORDER_INDEX_TYPE and document.get(Field.SKU) == order_partition(order_id):
            indexes[order_id] = document
    wrong: dict[str, list[str]] = {
        "index not at the order's version": [],
        "a reservation at another version": [],
        "a reservation not requesting what the version wants": [],
        "a wanted SKU without a reservation": [],
        "reserved + backordered not the request": [],
        "reservations of no stored order": sorted(set(reservations) - set(highest)),
    }
    for order_id, (version, wants) in sorted(highest.items()):
        index = indexes.get(order_id)
        if index is None or index.get(Field.ORDER_VERSION) != version:
            wrong["index not at the order's version"].append(order_id)
        held = {str(r.get(Field.SKU)): r for r in reservations.get(order_id, [])}
        if any(r.get(Field.ORDER_VERSION) != version for r in held.values()):
            wrong["a reservation at another version"].append(order_id)
        if any(r.get(Field.REQUESTED) != wants.get(sku, 0) for sku, r in held.items()):
            wrong["a reservation not requesting what the version wants"].append(order_id)
        if set(wants) - set(held):
            wrong["a wanted SKU without a reservation"].append(order_id)
        if any(not _adds_up(r) for r in held.values()):
            wrong["reserved + backordered not the request"].append(order_id)
    offending = sorted({i for ids in wrong.values() for i in ids})
    cancelled = sum(1 for _, wants in highest.values() if not wants)
    return Invariant(
        AT_HIGHEST_VERSION,
        not offending,
        offending,
        "; ".join(f"{len(ids)} {what} {ids[:3]}" for what, ids in wrong.items() if ids)
        or f"{len(highest)} orders ({cancelled} wanting nothing), "
        f"{sum(map(len, reservations.values()))} reservations",
    )


def _of(order: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    lines = order.get("lines")
    return lines if isinstance(lines, list) else []


def _adds_up(reservation: Mapping[str, Any]) -> bool:
    held, short = reservation.get(Field.RESERVED), reservation.get(Field.BACKORDERED)
    requested = reservation.get(Field.REQUESTED)
    if not all(isinstance(v, int) for v in (held, short, requested)):
        return False
    return bool(held >= 0 and short >= 0 and held + short == requested)  # type: ignore[operator]


def shortfall_counted(stocks: Sequence[SkuStock], counted: int) -> Invariant:
    """Not enough stock is a business outcome: what was not reserved is backordered on the
    reservations and counted (``orders.stock.shortfall``, as exported) once, and the consumer
    reserved everything there was before backordering (no SKU with a backorder has stock free).
    Holds when each order has one version: an amendment counts its shortfall again and may free
    stock a backorder does not take back."""
    backordered = sum(s.backordered for s in stocks)
    left_free = [s.sku for s in stocks if s.backordered and s.free]
    detail = [f"{backordered} units backordered, {counted} counted"]
    if left_free:
        detail.append(_offending(left_free, "SKUs with a backorder and stock free"))
    if not backordered:
        detail.append("no shortfall: the short SKUs showed nothing")
    return Invariant(
        SHORTFALL_COUNTED,
        backordered == counted and backordered > 0 and not left_free,
        left_free,
        "; ".join(detail),
    )


def nothing_dead_lettered(letters: Sequence[DeadLetteredMessage]) -> Invariant:
    """Every event the relay publishes is valid for the stock reservation: none is refused."""
    return Invariant(
        NOTHING_DEAD_LETTERED,
        not letters,
        sorted(str(x.message.message_id) for x in letters),
        "; ".join(sorted({str(x.reason) for x in letters})) or "none",
    )


def stock_audit_agrees(shown: Sequence[SkuStock], audited: ToolRun) -> Invariant:
    """``python -m ops stock audit --json <the SKUs shown>`` over the run's inventory container,
    through the tool's own adapter: it passes each, and reads what the table read (onHand,
    reserved, backordered, reservations), so the table and the operator's tool are one
    definition."""
    try:
        report = json.loads(audited.output)
    except ValueError:
        return Invariant(
            STOCK_AUDIT_AGREES, False, [], f"exit {audited.exit_status}: {audited.output[:200]}"
        )
    rows = {str(row.get("sku")): row for row in report.get("skus", [])}
    differ = [
        s.sku
        for s in shown
        if s.sku not in rows
        or rows[s.sku].get("problems")
        or (
            rows[s.sku].get("onHand"),
            rows[s.sku].get("reserved"),
            rows[s.sku].get("backordered"),
            rows[s.sku].get("reservations"),
        )
        != (s.on_hand, s.reserved, s.backordered, s.reservations)
    ]
    return Invariant(
        STOCK_AUDIT_AGREES,
        not differ and audited.exit_status == 0 and bool(shown),
        differ,
        _offending(differ, "SKUs differ or FAIL")
        or f"exit {audited.exit_status}: {len(shown)} SKUs, the same figures, each PASS",
    )


def _offending(ids: Sequence[str], what: str) -> str:
    return f"{len(ids)} {what} {list(ids[:5])}" if ids else ""


@dataclass
class InventoryReport:
    figures: dict[str, int] = field(default_factory=dict)
    stock: list[SkuStock] = field(default_factory=list)  # the SKUs shown one by one, then a sum
    rows: list[Row] = field(default_factory=list)
    # ``python -m ops stock audit <the SKUs shown>``, as an operator runs it
    tool_runs: dict[str, ToolRun] = field(default_factory=dict)

    @property
    def checks(self) -> list[Invariant]:
        return [row.invariant for row in self.rows]


async def inventory_report(
    run: InventoryRun,
    plan: StockPlan,
    orders: Iterable[Mapping[str, Any]],
    tool: Callable[[Sequence[str]], ToolRun] | None,
    *,
    exact_shortfall: bool,
) -> InventoryReport:
    """The table; with ``tool``, ``python -m ops stock audit`` over the SKUs shown too (one
    query per SKU, which the local server answers from that SKU's partition)."""
    documents = await run.documents()
    stocks = read_stock(documents)
    figures = run.figures()
    shown = [s for s in stocks if s.sku in plan.shown]
    audited = tool(["stock", "audit", *plan.shown, "--json"]) if tool is not None else None
    checks = [
        Row(reserved_is_the_sum(stocks), STOCK_AUDIT),
        Row(within_on_hand(stocks), STOCK_AUDIT),
        Row(at_highest_versions(orders, documents), DEMO),
        *(
            [Row(shortfall_counted(stocks, figures[SHORT_COUNTED]), DEMO)]
            if exact_shortfall
            else []
        ),
        Row(nothing_dead_lettered(run.world.inventory.dead_letters), DEMO),
        *([Row(stock_audit_agrees(shown, audited), DEMO)] if audited is not None else []),
        *(Row(check, STAND_IN) for check in run.stand_in_checks()),
    ]
    if run.late is not None:
        figures[LATE_HELD_STALE] = await run.late.stale_markers()
    figures["SKUs stocked"] = len(plan.on_hand)
    figures["units backordered (on the reservations)"] = sum(s.backordered for s in stocks)
    runs = {"stock audit": tool(["stock", "audit", *plan.shown])} if tool is not None else {}
    return InventoryReport(figures, stock_rows(stocks, plan), checks, runs)


def stock_rows(stocks: Sequence[SkuStock], plan: StockPlan) -> list[SkuStock]:
    """The short SKUs and the unstocked one as they are, then one row summing every other."""
    by_sku = {s.sku: s for s in stocks}
    shown = [by_sku[sku] for sku in plan.shown if sku in by_sku]
    rest = [s for s in stocks if s.sku not in plan.shown]
    summed = SkuStock(
        f"{len(rest)} other SKUs",
        sum(s.on_hand or 0 for s in rest),
        sum(s.reserved or 0 for s in rest),
        sum(s.reservations for s in rest),
        sum(s.reserved_by_orders for s in rest),
        sum(s.backordered for s in rest),
        0.0,
    )
    return [*shown, summed]


def print_inventory(report: InventoryReport, console: Console) -> None:
    console.print(figures_table("The inventory", report.figures))
    stock = Table(
        title="Inventory: the SKUs seeded short, the one never stocked, every other summed"
    )
    for column in ("SKU", "onHand", "reserved", "free", "backordered", "orders"):
        stock.add_column(column, justify="left" if column == "SKU" else "right")
    for sku in report.stock:
        stocked = sku.on_hand is not None
        stock.add_row(
            sku.sku,
            str(sku.on_hand) if stocked else "not stocked",
            str(sku.reserved) if stocked else "-",
            str(sku.free) if stocked else "-",
            str(sku.backordered),
            str(sku.reservations),
        )
    console.print(stock)
    console.print(invariants_table("Inventory invariants", report.rows, INVENTORY_CAPTION))
    for run in report.tool_runs.values():  # the operator's view of the SKUs shown
        print_tool_run(run, console)
