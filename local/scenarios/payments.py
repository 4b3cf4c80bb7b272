"""The payments in ``make demo`` and ``make chaos``: the orders' events, published by the relay to
the ``order-events`` topic, move money through ``capture_payment`` on its ``payments``
subscription (the host's trigger, ``World.payment_host``) at the payment provider stand-in
(``local.standins.payment_provider``), whose ledger is the referee: the money that moved.

- ``declined_customer``: one customer whose card the provider declines (the first order's; never
  the customer the sample amendments carry), so every order of theirs is declined: a business
  outcome, recorded, completed, counted (``orders.payments.declined``), nothing captured;
- ``provider_faults``: the provider's own faults on its first requests, ``count`` of each: a
  timeout after it committed (the money moved, the app never heard), a 503 after it committed,
  a 503 before it committed (nothing moved); the app's call deadline is short
  (``PROVIDER_TIMEOUT_S``), the held answers longer;
- ``keyless_customers``: under ``make chaos`` (``--keyless-customer-rate``), a seeded share of
  the customers whose provider honours no Idempotency-Key (the stand-in's
  ``keyless_customers``); the app, which cannot tell them apart, is set to honour none
  (``keyless_settings``: ``ignored``, with the stand-in's processing bound), and the ledger per
  order is checked in each key mode apart (``ledger_per_key_mode``);
- ``PaymentsRun``: the trigger run to idle after each relay phase, with trouble of its own on
  its deliveries (a crash after the commit, a lock expiry: a concurrent delivery of one event,
  which the provider answers 409 while the first is in progress);
- ``payments_rows``: its table: every order's ledger net is its highest version's total (zero
  when cancelled or declined) as the orders container holds it; no order's running net ever
  below zero (never a refund of money not captured); each movement under an idempotency key of
  its own (the key never moved money twice); every declined card recorded and counted once
  (``exact``: each order one version; an amendment tries a declined card again); nothing
  dead-lettered or parked for reconciliation; the stand-in's own figures;
- ``ledger_rows``: per order, what the ledger moved: the declined orders, those the provider's
  faults hit, then every other summed.

Never imports the runner (``local.scenarios.demo``); sends nothing (the relay publishes).
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from local.assembly.world import World
from local.scenarios.deliveries import ExportedCounters, OutcomeLog, Trouble, drawn
from local.scenarios.invariants import DEMO, STAND_IN, Row
from local.scenarios.options import DemoOptions
from local.scenarios.tables import figures_table, invariants_table
from local.standins.broker import DeadLetteredMessage
from local.standins.payment_provider import Fault, FaultRule, LedgerEntry
from ops.audit import Invariant
from ops.sample_orders import amended_body
from shared.config import (
    KEYS_IGNORED,
    PAYMENT_PROVIDER_KEYS_SETTING,
    PAYMENT_PROVIDER_PROCESSING_BOUND_SETTING,
)
from shared.consumer.order import ORDER_TYPE, is_cancelled
from shared.payments.capture import PAYMENT_TYPE, PaymentField
from shared.payments.consumer import CONSUMER_NAME
from shared.payments.provider import Operation
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.names import METRIC_PAYMENTS_DECLINED, METRIC_PAYMENTS_RECONCILIATION_NEEDED

# The app's provider timeout (PAYMENT_PROVIDER_TIMEOUT_SECONDS, the kit's call deadline): short,
# so that a held answer (real time, the stand-in's) outlasts it quickly.
PROVIDER_TIMEOUT_S = 0.5
# The stand-in's stated processing bound (PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS), given to
# the app when some customers' provider honours no key: a request it received commits before it
# answers, and no fault of the demo's holds one before its commit (SLOW_BEFORE_COMMIT).
PROVIDER_PROCESSING_BOUND_S = 1.0
# The two key modes the provider's ledger is checked in apart (``ledger_per_key_mode``).
KEYED, KEYLESS = "honours the Idempotency-Key", "honours no key"
LEDGER_PER_ORDER = (
    "the provider's ledger per order, customers whose provider {mode}: one capture net of "
    "refunds, the highest version's total"
)
FAULTS = (Fault.TIMEOUT_AFTER_COMMIT, Fault.ERROR_AFTER_COMMIT, Fault.ERROR_BEFORE_COMMIT)
NETS_ARE_THE_TOTALS = (
    "every order's ledger net is its highest version's total (zero when cancelled or declined)"
)
NEVER_BELOW_ZERO = "no refund of money not captured (each order's running net never below zero)"
ONE_MOVE_PER_KEY = "each movement of money under an idempotency key of its own"
DECLINED_RECORDED = "every declined card recorded, completed and counted once"
NOTHING_PARKED = "no payment event dead-lettered or parked for reconciliation"
SUBSCRIPTION_DRAINED = "payments subscription drained"
NO_INVOCATION_FAILED = "no capture_payment invocation failed"
CAPTION = (
    "checked by: demo = the provider stand-in's ledger (the money that moved) against the orders' "
    "highest versions; stand-in = the stand-in's own figures"
)


def declined_customer(bodies: Mapping[str, bytes]) -> str | None:
    """The first order's customer, unless it is the one the sample amendments carry (an amended
    order would then be declined too)."""
    amending = amended_body()["customerId"]
    for raw in bodies.values():
        customer = json.loads(raw).get("customerId")
        if isinstance(customer, str) and customer != amending:
            return customer
    return None


def keyless_customers(bodies: Mapping[str, bytes], rate: float, seed: int) -> set[str]:
    """A seeded share ``rate`` of the orders' customers: those the provider honours no key for."""
    customers = sorted({str(json.loads(raw).get("customerId")) for raw in bodies.values()})
    rng = random.Random(f"{seed}-keyless")
    return {customer for customer in customers if rng.random() < rate}


def keyless_settings(options: DemoOptions) -> dict[str, str]:
    """The app settings for a provider that honours no key for some customers: the app cannot
    tell which, so it honours none (``ignored``: a lookup before any repeat), with the
    stand-in's processing bound (``PROVIDER_PROCESSING_BOUND_S``)."""
    if options.keyless_customer_rate <= 0:
        return {}
    return {
        PAYMENT_PROVIDER_KEYS_SETTING: KEYS_IGNORED,
        PAYMENT_PROVIDER_PROCESSING_BOUND_SETTING: str(PROVIDER_PROCESSING_BOUND_S),
    }


def provider_faults(count: int) -> list[FaultRule]:
    """``count`` of each fault, on the provider's first requests (captures and refunds)."""
    return [
        FaultRule(fault, times=count, delay_s=3 * PROVIDER_TIMEOUT_S)
        for fault in FAULTS
        if count > 0
    ]


@dataclass
class PaymentsRun:
    """``capture_payment`` on the payments subscription, run to idle with its own trouble."""

    world: World
    trouble: Trouble
    log: OutcomeLog  # the payment consumer's outcome records (``OutcomeLog(CONSUMER_NAME)``)
    declined: str | None = None
    faults: list[FaultRule] = field(default_factory=list)
    counters: ExportedCounters = field(default_factory=ExportedCounters)
    keyless: set[str] = field(default_factory=set)  # customers whose provider honours no key

    @classmethod
    def on(
        cls, world: World, options: DemoOptions, log: OutcomeLog, bodies: Mapping[str, bytes]
    ) -> PaymentsRun:
        """On ``world``'s payments subscription, with the orders' trouble rates, the card of
        ``declined_customer(bodies)`` declined and ``options.provider_faults`` of each fault."""
        trouble = Trouble(
            world.payments,
            world.settlement,
            crash=drawn(options.seed, "payments-crash", options.crash_rate),
            lock_expiry=drawn(options.seed, "payments-lock-expiry", options.lock_expiry_rate),
        )
        provider = world.payment_provider
        declined = declined_customer(bodies) if options.declined_card else None
        if declined is not None:
            provider.declined_customers.add(declined)
        faults = [provider.inject(rule) for rule in provider_faults(options.provider_faults)]
        keyless = keyless_customers(bodies, options.keyless_customer_rate, options.seed)
        provider.keyless_customers.update(keyless)
        return cls(world, trouble, log, declined, faults, keyless=keyless)

    def telemetry(self) -> ConsumerTelemetry:
        """The payment consumer's telemetry, for ``World.compose(payment_telemetry=...)``."""
        env = self.world.env
        return self.counters.telemetry(
            env["ORDER_EVENTS_TOPIC_NAME"], env["PAYMENTS_SUBSCRIPTION_NAME"], CONSUMER_NAME
        )

    async def until_idle(self) -> None:
        await self.world.payment_host.run_until_idle(on_delivery=self.trouble)

    async def states(self) -> list[dict[str, Any]]:
        """The payments container's payment states (one per order)."""
        found = self.world.payments_documents.query_items(
            "SELECT * FROM c WHERE c.type = @payment",
            parameters=[{"name": "@payment", "value": PAYMENT_TYPE}],
        )
        return [document async for document in found]

    def figures(self) -> dict[str, int]:
        queue = self.world.payments.stats
        outcomes = self.log.outcomes
        ledger = self.world.payment_provider.ledger
        captured = [e.amount_minor for e in ledger if e.operation is Operation.CAPTURE]
        refunded = [e.amount_minor for e in ledger if e.operation is Operation.REFUND]
        return {
            "events delivered to the payments subscription": queue.accepted,
            "deliveries": queue.deliveries,
            "processed": outcomes["processed"],
            "duplicates": outcomes["duplicate"],
            "stale": outcomes["stale"],
            "dead-lettered": queue.dead_lettered,
            "settlements lost (crash / lock expiry)": self.log.settlement_failures,
            "in-delivery retries": self.log.retries,
            **{f"provider faults fired: {rule.fault}": rule.fired for rule in self.faults},
            "customers whose provider honours no Idempotency-Key": len(self.keyless),
            "captures in the ledger": len(captured),
            "refunds in the ledger": len(refunded),
            "net captured, minor units": sum(captured) - sum(refunded),
            "declined, counted (orders.payments.declined)": self.declined_count(),
            "parked, counted (orders.payments.reconciliation_needed)": self.counters.total(
                METRIC_PAYMENTS_RECONCILIATION_NEEDED, CONSUMER_NAME
            ),
        }

    def declined_count(self) -> int:
        return self.counters.total(METRIC_PAYMENTS_DECLINED, CONSUMER_NAME)


# ---- the table: what the ledger says ----------------------------------------------------------


def expected_nets(orders: Iterable[Mapping[str, Any]], declined: str | None) -> dict[str, int]:
    """Each stored order's highest version's total: zero when cancelled, or when its customer's
    card is declined (nothing captured)."""
    return {
        str(o.get("orderId")): (
            0
            if is_cancelled(o) or (declined is not None and o.get("customerId") == declined)
            else int(o.get("totalMinor", 0))
        )
        for o in orders
        if o.get("type") == ORDER_TYPE
    }


def nets(ledger: Iterable[LedgerEntry]) -> dict[str, int]:
    moved: dict[str, int] = defaultdict(int)
    for entry in ledger:
        sign = 1 if entry.operation is Operation.CAPTURE else -1
        moved[entry.order_id] += sign * entry.amount_minor
    return dict(moved)


def nets_are_the_totals(
    expected: Mapping[str, int],
    ledger: Sequence[LedgerEntry],
    name: str = NETS_ARE_THE_TOTALS,
) -> Invariant:
    """Exactly once at the provider: what moved for each order is what its highest version
    asks, whatever the arrival order, the duplicates, the faults; no money for an order never
    stored."""
    moved = nets(ledger)
    wrong = sorted(
        {i for i in expected if moved.get(i, 0) != expected[i]} | (set(moved) - set(expected))
    )
    return Invariant(
        name,
        not wrong,
        wrong,
        "; ".join(f"{i}: moved {moved.get(i, 0)}, asks {expected.get(i, 0)}" for i in wrong[:3])
        or f"{len(expected)} orders, {sum(expected.values())} minor units net, "
        f"{sum(1 for v in expected.values() if not v)} at zero",
    )


def ledger_per_key_mode(
    orders: Iterable[Mapping[str, Any]],
    expected: Mapping[str, int],
    ledger: Sequence[LedgerEntry],
    keyless: Collection[str],
) -> list[Invariant]:
    """``nets_are_the_totals`` over each key mode's orders apart (the customers whose provider
    honours the Idempotency-Key, and those whose provider honours none): exactly one capture
    per order net of refunds, whatever the mode. A mode with no order gets no row."""
    customers = {str(o.get("orderId")): o.get("customerId") for o in orders}
    ledger_orders = {entry.order_id for entry in ledger}
    rows = []
    for mode, in_mode in ((KEYED, False), (KEYLESS, True)):
        ids = {i for i in {*expected, *ledger_orders} if (customers.get(i) in keyless) is in_mode}
        if not ids & set(expected):
            continue
        rows.append(
            nets_are_the_totals(
                {i: v for i, v in expected.items() if i in ids},
                [entry for entry in ledger if entry.order_id in ids],
                LEDGER_PER_ORDER.format(mode=mode),
            )
        )
    return rows


def never_below_zero(ledger: Sequence[LedgerEntry]) -> Invariant:
    running: dict[str, int] = defaultdict(int)
    wrong: set[str] = set()
    for entry in ledger:
        sign = 1 if entry.operation is Operation.CAPTURE else -1
        running[entry.order_id] += sign * entry.amount_minor
        if running[entry.order_id] < 0:
            wrong.add(entry.order_id)
    refunds = sum(1 for e in ledger if e.operation is Operation.REFUND)
    return Invariant(
        NEVER_BELOW_ZERO,
        not wrong,
        sorted(wrong),
        f"{len(wrong)} orders refunded past their captures {sorted(wrong)[:3]}"
        if wrong
        else f"{refunds} refunds, each within what its order held",
    )


def one_move_per_key(ledger: Sequence[LedgerEntry]) -> Invariant:
    """The key is derived from (consumer, MessageId, operation) and the provider honours it: a
    repeat under a key is answered, never moved again; a movement without a key is a bug."""
    keys = Counter(entry.idempotency_key for entry in ledger)
    wrong = sorted(
        {e.order_id for e in ledger if e.idempotency_key is None or keys[e.idempotency_key] > 1}
    )
    return Invariant(
        ONE_MOVE_PER_KEY,
        not wrong,
        wrong,
        f"{len(wrong)} orders with money moved twice under one key or with none {wrong[:3]}"
        if wrong
        else f"{len(ledger)} movements, {len(keys)} keys",
    )


def declined_recorded(
    declined_orders: Sequence[str], states: Iterable[Mapping[str, Any]], counted: int
) -> Invariant:
    """Each order of the declined card: its payment state records the decline (completed, not
    retried), and the counter counted each once."""
    outcome = {str(s.get(PaymentField.ORDER_ID)): s.get(PaymentField.LAST_OUTCOME) for s in states}
    wrong = [i for i in declined_orders if outcome.get(i) != "declined"]
    return Invariant(
        DECLINED_RECORDED,
        bool(declined_orders) and not wrong and counted == len(declined_orders),
        wrong,
        f"{len(declined_orders)} order(s) declined, {counted} counted"
        + (f"; not recorded declined: {wrong[:3]}" if wrong else ""),
    )


def nothing_parked(letters: Sequence[DeadLetteredMessage], parked: int) -> Invariant:
    """The provider honours keys: every in-progress call is finished by a repeat under its key,
    none needs an operator."""
    return Invariant(
        NOTHING_PARKED,
        not letters and parked == 0,
        sorted(str(x.message.message_id) for x in letters),
        "; ".join(sorted({str(x.reason) for x in letters}))
        or ("none" if not parked else f"{parked} parked"),
    )


def subscription_checks(
    *, active_messages: int, failed_invocations: int, errors: Sequence[str]
) -> list[Invariant]:
    return [
        Invariant(
            SUBSCRIPTION_DRAINED, active_messages == 0, [], f"{active_messages} still active"
        ),
        Invariant(
            NO_INVOCATION_FAILED, failed_invocations == 0, [], "; ".join(errors[:3]) or "none"
        ),
    ]


@dataclass(frozen=True)
class LedgerRow:
    """One order's money (or every other order's, summed)."""

    order: str
    customer: str
    asks: int
    captured: int
    refunded: int
    movements: int

    @property
    def net(self) -> int:
        return self.captured - self.refunded


def ledger_rows(
    orders: Iterable[Mapping[str, Any]],
    expected: Mapping[str, int],
    ledger: Sequence[LedgerEntry],
    declined: str | None,
    *,
    shown: int = 6,
) -> list[LedgerRow]:
    """The declined orders, then the orders with the most movements (refunds, faults), then
    every other order summed."""
    customers = {str(o.get("orderId")): str(o.get("customerId")) for o in orders}
    entries: dict[str, list[LedgerEntry]] = defaultdict(list)
    for entry in ledger:
        entries[entry.order_id].append(entry)

    def row(order_id: str) -> LedgerRow:
        moved = entries.get(order_id, [])
        return LedgerRow(
            order_id,
            customers.get(order_id, "?"),
            expected.get(order_id, 0),
            sum(e.amount_minor for e in moved if e.operation is Operation.CAPTURE),
            sum(e.amount_minor for e in moved if e.operation is Operation.REFUND),
            len(moved),
        )

    first = sorted(i for i, c in customers.items() if declined is not None and c == declined)
    busiest = sorted(
        (i for i in expected if i not in first), key=lambda i: (-len(entries.get(i, [])), i)
    )
    picked = [*first, *busiest[: max(0, shown - len(first))]]
    rest = [row(i) for i in expected if i not in picked]
    summed = LedgerRow(
        f"{len(rest)} other orders",
        "",
        sum(r.asks for r in rest),
        sum(r.captured for r in rest),
        sum(r.refunded for r in rest),
        sum(r.movements for r in rest),
    )
    return [*(row(i) for i in picked), summed]


@dataclass
class PaymentsReport:
    figures: dict[str, int] = field(default_factory=dict)
    ledger: list[LedgerRow] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    declined: str | None = None  # the customer whose card the provider declined

    @property
    def checks(self) -> list[Invariant]:
        return [row.invariant for row in self.rows]


async def payments_report(
    run: PaymentsRun, orders: Sequence[Mapping[str, Any]], *, exact: bool
) -> PaymentsReport:
    ledger = run.world.payment_provider.ledger
    expected = expected_nets(orders, run.declined)
    figures = run.figures()
    declined_orders = sorted(
        str(o.get("orderId"))
        for o in orders
        if o.get("type") == ORDER_TYPE and run.declined and o.get("customerId") == run.declined
    )
    host = run.world.payment_host.stats
    states = await run.states()
    by_mode = ledger_per_key_mode(orders, expected, ledger, run.keyless) if run.keyless else []
    rows = [
        Row(nets_are_the_totals(expected, ledger), DEMO),
        *(Row(check, DEMO) for check in by_mode),
        Row(never_below_zero(ledger), DEMO),
        Row(one_move_per_key(ledger), DEMO),
        *(
            [
                Row(
                    declined_recorded(declined_orders, states, run.declined_count()),
                    DEMO,
                )
            ]
            if exact and run.declined
            else []
        ),
        Row(
            nothing_parked(
                run.world.payments.dead_letters,
                figures["parked, counted (orders.payments.reconciliation_needed)"],
            ),
            DEMO,
        ),
        *(
            Row(check, STAND_IN)
            for check in subscription_checks(
                active_messages=run.world.payments.active_count(),
                failed_invocations=host.failed_invocations,
                errors=host.errors,
            )
        ),
    ]
    return PaymentsReport(
        figures, ledger_rows(orders, expected, ledger, run.declined), rows, run.declined
    )


def print_payments(report: PaymentsReport, console: Console) -> None:
    console.print(figures_table("The payments", report.figures))
    ledger = Table(
        title="Payments: the provider's ledger per order (the declined card's, those with the "
        "most movements, every other summed)"
    )
    for column in ("order", "customer", "asks", "net", "moves"):
        ledger.add_column(column, justify="left" if column in ("order", "customer") else "right")
    for row in report.ledger:
        declined = " (declined)" if report.declined and row.customer == report.declined else ""
        ledger.add_row(
            row.order, row.customer + declined, str(row.asks), str(row.net), str(row.movements)
        )
    console.print(ledger)
    console.print(invariants_table("Payments invariants", report.rows, CAPTION))
