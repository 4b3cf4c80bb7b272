"""`make demo` at a small size: the invariants hold and every kind of trouble really happened;
each row of its table fails when what it guards is broken (the flow's, ``ops.audit``'s as the
operator's audit runs them; the demo's expectations; its phases'; the stand-in's own)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import IncomingMessage
from rich.console import Console

from local.assembly.world import World
from local.scenarios.demo import run_demo
from local.scenarios.invariants import (
    AUDIT,
    DEMO,
    STAND_IN,
    Expected,
    demo_data,
    expectations,
    flow_invariants,
    operator_audit_agrees,
    outbox_off,
    stand_in_checks,
)
from local.scenarios.inventory import (
    AT_HIGHEST_VERSION,
    NO_INVOCATION_FAILED,
    NOTHING_DEAD_LETTERED,
    RESERVED_IS_THE_SUM,
    SHORTFALL_COUNTED,
    STOCK_AUDIT,
    STOCK_AUDIT_AGREES,
    SUBSCRIPTION_DRAINED,
    WITHIN_ON_HAND,
    InventoryReport,
)
from local.scenarios.lifecycle import (
    CONVERGED,
    PUBLISHED_IN_ORDER,
    LifecycleReport,
    amended,
    cancelled,
    converged,
    published_in_order,
)
from local.scenarios.options import DemoOptions
from local.scenarios.orders import POISON_KINDS, plan
from local.scenarios.payments import (
    DECLINED_RECORDED,
    NETS_ARE_THE_TOTALS,
    NEVER_BELOW_ZERO,
    ONE_MOVE_PER_KEY,
    PaymentsReport,
)
from local.scenarios.relay import ParkedRun, WatchdogRun
from local.scenarios.tool_runs import ToolRun
from local.standins.broker import OutgoingMessage
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from ops.audit import (
    EVERY_REASON,
    MARKERS_OF_ORDERS,
    NO_EVENT_FOR_REJECTED,
    NO_ORDER_LOST,
    NO_VALID_ORDER_DEAD_LETTERED,
    NOTHING_PENDING,
    ONE_EVENT_PER_ORDER,
    ONE_ORDER_PER_ID,
    ORDERS_ARE_THE_REQUESTS,
    AuditData,
    Invariant,
    SeenEvent,
)
from ops.port import DeadLetter
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.relay.outbox import outbox_document_id
from tests.orders import message, order_body
from tests.state import documents

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


async def test_demo_invariants_hold_with_every_kind_of_trouble() -> None:
    options = DemoOptions(
        orders=100,
        seed=11,
        duplicate_rate=0.2,
        crash_rate=0.05,
        lock_expiry_rate=0.05,
        mismatch_rate=0.05,
        poison_rate=0.06,
        # Small relay batches and a high crash rate: enough topic sends for every kind of relay
        # trouble to happen in 100 orders (the run is seeded, so it happens every time).
        relay_batch=10,
        relay_crash_rate=0.2,
        send_failure_rate=0.2,
        api_orders=4,  # the orders API's phase, small: its own tests hold it (test_api_scenario)
        quiet=True,
    )
    the_plan = plan(options)
    assert the_plan.crash and the_plan.lock_expiry and the_plan.mismatches
    assert the_plan.early_retries and the_plan.late_retries

    report = await run_demo(options, Console(quiet=True))

    failed = [check for check in report.checks if not check.passed]
    assert report.passed, failed
    # One definition: the flow's rows are the operator's audit's, by name and in its order; the
    # demo's own and the stand-in's are marked as such.
    by = {row.invariant.name: row.checked_by for row in report.rows}
    assert [name for name, kind in by.items() if kind == AUDIT] == [
        ONE_ORDER_PER_ID,
        ONE_EVENT_PER_ORDER,
        NO_EVENT_FOR_REJECTED,
        MARKERS_OF_ORDERS,
        NOTHING_PENDING,
        EVERY_REASON,
    ]
    assert [name for name, kind in by.items() if kind == STAND_IN] == [
        "queue drained",
        "no invocation failed",
    ]
    assert by["python -m ops audit agrees with this table"] == DEMO
    assert len(by) == len(report.rows) == 16  # 6 audit, 8 demo, 2 stand-in
    figures = report.figures
    # Phase 3's and phase 4's orders too: accepted while the relay's lease store was empty, and
    # while the topic refused every send.
    orders = options.orders + options.skipped_orders + options.parked_events
    assert figures["order documents"] == orders
    assert figures["outbox documents"] == orders
    assert figures["dropped by duplicate detection"] == len(the_plan.early_retries)
    assert report.dead_lettered_by_reason["HashMismatch"] == len(the_plan.mismatches)
    assert set(report.dead_lettered_by_reason) == {"HashMismatch", *POISON_KINDS.values()}
    # Late retries, crashes after commit and lock-expiry redeliveries all end as duplicates.
    assert figures["duplicates"] >= len(the_plan.late_retries) + len(the_plan.crash)
    assert figures["settlements lost (crash / lock expiry)"] >= len(the_plan.crash)
    assert figures["processed"] == orders
    # Followed to the subscription, through relay crashes between send and mark and refused sends.
    assert figures["OrderAccepted delivered to the subscription"] == orders
    assert figures["relay crashes between send and mark"] > 0
    refused = figures["topic sends refused (injected: timeouts and the stall)"]
    assert refused > 0
    assert (
        figures["relay invocations failed (retried)"]
        >= refused - figures["watchdog runs failed (retried at the next)"]
    )
    # Phase 4: each send refused until the relay's bound, then parked (RetriesExhausted).
    assert figures["topic sends refused (phase 4, until the fix)"] == 10
    assert figures["events parked by the relay (RetriesExhausted)"] == options.parked_events
    # The change feed skipped phase 3's events (its lease started from now); the watchdog's
    # timer, through the worker, published every one (an invariant, above).
    assert figures["events skipped by the change feed (lease from now)"] == options.skipped_orders
    assert figures["watchdog runs (timer, through the worker)"] >= 1
    assert figures["events dropped by topic duplicate detection"] > 0
    assert_the_inventory_passed(report.inventory, orders)
    assert_the_payments_passed(report.payments, orders)
    assert_the_lifecycle_passed(report.lifecycle)
    assert report.api is not None and report.api.passed, report.api
    assert report.api.figures["intents: places"] == report.api.figures["order documents"] == 4


def assert_the_payments_passed(payments: PaymentsReport | None, orders: int) -> None:
    """The payments' table: every row PASSes, the declined card's among them; every order's
    event reached capture_payment through its own trouble and the provider's faults (each
    fired), the money moved once per order; the declined card's orders paid nothing."""
    assert payments is not None
    failed = [c for c in payments.checks if not c.passed]
    assert payments.checks and not failed, failed
    names = [row.invariant.name for row in payments.rows]
    assert names[:4] == [NETS_ARE_THE_TOTALS, NEVER_BELOW_ZERO, ONE_MOVE_PER_KEY, DECLINED_RECORDED]
    figures = payments.figures
    assert figures["events delivered to the payments subscription"] == orders
    assert figures["duplicates"] > 0
    assert figures["in-delivery retries"] > 0  # the provider's faults, ridden out
    for fault in ("timeout_after_commit", "error_after_commit", "error_before_commit"):
        assert figures[f"provider faults fired: {fault}"] == 2
    declined = figures["declined, counted (orders.payments.declined)"]
    assert declined >= 1
    assert figures["captures in the ledger"] == orders - declined  # once each, whatever the faults
    assert figures["refunds in the ledger"] == 0
    *shown, _ = payments.ledger
    assert shown[0].customer == payments.declined and shown[0].net == 0


def assert_the_inventory_passed(inventory: InventoryReport | None, orders: int) -> None:
    """The inventory's table: every row PASSes, the shortfall's among them (the demo's orders
    have one version each); every order's event reached reserve_stock, through its own
    trouble; the short SKUs fell short, the unstocked one backordered it all."""
    assert inventory is not None
    assert inventory.checks and all(c.passed for c in inventory.checks), [
        c for c in inventory.checks if not c.passed
    ]
    by = {row.invariant.name: row.checked_by for row in inventory.rows}
    assert by == {
        RESERVED_IS_THE_SUM: STOCK_AUDIT,
        WITHIN_ON_HAND: STOCK_AUDIT,
        AT_HIGHEST_VERSION: DEMO,
        SHORTFALL_COUNTED: DEMO,
        NOTHING_DEAD_LETTERED: DEMO,
        STOCK_AUDIT_AGREES: DEMO,
        SUBSCRIPTION_DRAINED: STAND_IN,
        NO_INVOCATION_FAILED: STAND_IN,
    }
    figures = inventory.figures
    assert figures["events delivered to the inventory subscription"] == orders
    assert figures["processed"] == orders
    assert figures["duplicates"] > 0  # its crashes after the commit, its lock expiries
    assert figures["settlements lost (crash / lock expiry)"] > 0
    assert figures["units backordered (on the reservations)"] > 0
    *shown, rest = inventory.stock
    short, [unstocked] = shown[:-1], shown[-1:]
    assert all(s.backordered > 0 and s.free == 0 for s in short)
    assert unstocked.on_hand is None and unstocked.backordered > 0
    assert rest.sku.endswith("other SKUs") and rest.backordered == 0


def assert_the_lifecycle_passed(lifecycle: LifecycleReport | None) -> None:
    """The lifecycle scenario's table: every row PASSes, ``ops.audit``'s among them; its
    documents converged with stale messages counted; downstream saw each order's versions in
    increasing order; the amendment after a cancellation was dead-lettered."""
    assert lifecycle is not None
    assert lifecycle.passed, [c for c in lifecycle.checks if not c.passed]
    by = {row.invariant.name: row.checked_by for row in lifecycle.rows}
    assert [name for name, kind in by.items() if kind == AUDIT] == [
        ONE_ORDER_PER_ID,
        ONE_EVENT_PER_ORDER,
        NO_EVENT_FOR_REJECTED,
        MARKERS_OF_ORDERS,
        NOTHING_PENDING,
        EVERY_REASON,
    ]
    assert {CONVERGED, PUBLISHED_IN_ORDER, "python -m ops audit agrees with this table"} <= set(by)
    assert lifecycle.documents == {
        # status, version, created by, stale markers, messages sent
        "lc-1": ("cancelled", 4, "OrderPlaced", 0, 5),
        "lc-2": ("accepted", 3, "OrderAmended", 2, 4),
        "lc-3": ("cancelled", 3, "OrderCancelled", 2, 3),
        "lc-4": ("cancelled", 3, "OrderPlaced", 1, 5),
        "lc-5": ("cancelled", 3, "OrderAmended", 1, 4),
    }
    assert lifecycle.figures["stale"] == 6
    assert lifecycle.figures["duplicates"] == 3  # the same MessageIds after the window
    assert lifecycle.figures["dead-lettered InvalidTransition"] == 1
    # capture_payment on the same events: each order's money to its highest version's total.
    assert lifecycle.money == {
        "lc-1": ["capture 3499", "capture 1250", "capture 1250", "refund 5999"],
        "lc-2": ["capture 5999"],
        "lc-4": ["capture 3499", "capture 1250", "refund 4749"],
        "lc-5": ["capture 4749", "refund 4749"],
    }
    assert lifecycle.events == {
        "lc-1": [
            "OrderAccepted v1",
            "OrderAmended v2",
            "OrderAmended v3",
            "OrderCancelled v4",
        ],
        "lc-2": ["OrderAmended v3"],
        "lc-3": ["OrderCancelled v3"],
        "lc-4": ["OrderAccepted v1", "OrderAmended v2", "OrderCancelled v3"],
        "lc-5": ["OrderAmended v2", "OrderCancelled v3"],
    }


def test_the_lifecycle_invariants_fail_when_an_order_diverges_or_is_published_out_of_order() -> (
    None
):
    highest = {"lc-1": cancelled("lc-1", 3), "lc-2": amended("lc-2", 2)}
    lc1 = {
        "orderId": "lc-1",
        "orderVersion": 3,
        "status": "cancelled",
        "cancelledAt": "2026-11-29T23:00:00Z",
        "cancellationReason": "customer request",
    }
    body = json.loads(amended("lc-2", 2).body)
    lc2 = {
        "orderId": "lc-2",
        "orderVersion": 2,
        "status": "accepted",
        **{k: body[k] for k in ("customerId", "currency", "lines")},
    }
    assert converged([lc1, lc2], highest).passed
    assert converged([lc1, {**lc2, "orderVersion": 1}], highest).offending == ["lc-2"]
    assert converged([lc1, {**lc2, "lines": []}], highest).offending == ["lc-2"]
    assert converged([{**lc1, "status": "accepted"}, lc2], highest).offending == ["lc-1"]
    assert converged([lc2], highest).offending == ["lc-1"]  # missing

    def seen(order_id: str, version: int, kind: str) -> SeenEvent:
        return SeenEvent("m", order_id, None, None, version, kind)

    in_order = [
        seen("lc-1", 1, "OrderAccepted"),
        seen("lc-1", 2, "OrderAmended"),
        seen("lc-2", 2, "OrderAmended"),
        seen("lc-1", 3, "OrderCancelled"),
    ]
    assert published_in_order(in_order, highest).passed
    swapped = [in_order[1], in_order[0], *in_order[2:]]
    assert published_in_order(swapped, highest).offending == ["lc-1"]
    assert published_in_order(in_order[:3], highest).offending == ["lc-1"]  # not to the highest
    assert published_in_order([*in_order, in_order[2]], highest).offending == ["lc-2"]  # twice


def test_demo_command_exits_zero_and_prints_the_verdicts() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "local", "demo", "--orders", "30", "--seed", "3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert "FAIL" not in result.stdout
    assert "$ python -m ops audit --since" in result.stdout  # it ends with the audit
    assert "Inventory invariants" in result.stdout
    assert "$ python -m ops stock audit SKU-" in result.stdout
    assert "Payments invariants" in result.stdout
    assert "Lifecycle: the money the provider moved" in result.stdout
    assert "Lifecycle: the final documents" in result.stdout
    assert "Lifecycle: the events downstream" in result.stdout
    assert "Orders API invariants" in result.stdout
    # It reads clean: no library warning or log line among the tables.
    assert "Warning" not in result.stdout + result.stderr
    assert "GOAWAY" not in result.stdout + result.stderr


def flow_failures(
    documents: list[dict[str, Any]],
    delivered: list[OutgoingMessage],
    dead_letters: list[DeadLetter] | None = None,
) -> list[str]:
    """The names of the table's flow invariants (``ops.audit.audit``, as the demo runs it) that
    fail over these documents, subscription messages and dead letters."""
    data = demo_data(documents, [], delivered)
    if dead_letters is not None:
        data = dataclasses.replace(data, dead_letters=dead_letters)
    return [i.name for i in flow_invariants(data, now=NOW) if not i.passed]


def test_the_flow_invariants_fail_when_the_subscription_or_the_outbox_is_wrong() -> None:
    """What each of the table's flow invariants catches, from documents and deliveries as a
    broken consumer or relay would leave them (each case breaks one thing). These are the rows
    the demo used to define itself ("one outbox event per order", "exactly one OrderAccepted per
    accepted order at the subscription", "no outbox document left pending" ...): now
    ``ops.audit``'s, the same the operator's audit runs."""
    documents = [*accepted("ord-1"), *accepted("ord-2")]
    orders = {d["orderId"]: d for d in documents if d["type"] == "order"}
    good = [event_of(orders["ord-1"]), event_of(orders["ord-2"])]
    assert flow_failures(documents, good) == []

    assert flow_failures(documents, good[:1]) == [ONE_EVENT_PER_ORDER]  # an event lost
    assert flow_failures(documents, [*good, good[0]]) == [ONE_EVENT_PER_ORDER]  # a copy kept
    no_outbox = [d for d in documents if d["id"] != outbox_document_id("ord-2")]
    assert flow_failures(no_outbox, good) == [ONE_EVENT_PER_ORDER]  # an order without its event
    assert flow_failures(documents, [*good, event_of({**orders["ord-1"], "orderId": "bad-1"})]) == [
        NO_EVENT_FOR_REJECTED  # an event for a message that was dead-lettered
    ]
    changed = {**orders["ord-2"], "totalMinor": orders["ord-2"]["totalMinor"] + 1}
    assert flow_failures(documents, [good[0], event_of(changed)]) == [NO_EVENT_FOR_REJECTED]
    ghost = [d for d in accepted("ord-3") if d["type"] == "outbox"]
    assert flow_failures([*documents, *ghost], good) == [NO_EVENT_FOR_REJECTED]  # no order
    unmarked = [{**d, "status": "pending"} if d["type"] == "outbox" else d for d in documents]
    assert flow_failures(unmarked, good) == [NOTHING_PENDING]
    parked = [
        {**d, "status": "parked"} if d["id"] == outbox_document_id("ord-1") else d
        for d in documents
    ]
    assert flow_failures(parked, good) == [NOTHING_PENDING]
    stranger = [{**d, "messageId": "x"} if d is orders["ord-1"] else d for d in documents]
    assert flow_failures(stranger, good) == [ONE_ORDER_PER_ID]  # stored under another MessageId
    assert flow_failures(documents, good, [letter("m-1", "")]) == [EVERY_REASON]
    assert flow_failures(documents, good, [letter("m-1", "InvalidPayload")]) == []


def test_without_the_outbox_an_outbox_event_or_a_delivery_fails_the_check() -> None:
    order = [d for d in accepted("ord-1") if d["type"] == "order"]
    assert outbox_off(demo_data(order, [], [])).passed
    assert not outbox_off(demo_data(accepted("ord-1"), [], [])).passed
    assert not outbox_off(demo_data(order, [], [event_of(order[0])])).passed
    # Without the outbox the table leaves out the invariants about events (none can hold).
    names = {
        i.name for i in flow_invariants(demo_data(order, [], []), now=NOW, outbox_enabled=False)
    }
    assert names == {ONE_ORDER_PER_ID, MARKERS_OF_ORDERS, EVERY_REASON}


def test_the_demo_s_expectations_fail_when_an_order_is_lost_changed_or_dead_lettered_wrongly() -> (
    None
):
    """The checks only the demo can make (it sent every message), each broken once: with
    ``ops.audit``'s functions, so "dead-lettered with its reason" means one thing."""
    one, two = (accepted(order_id)[0] for order_id in ("ord-1", "ord-2"))
    expected = Expected(
        request_hashes={"ord-1": one["requestHash"], "ord-2": two["requestHash"]},
        mismatches={"ord-2"},  # sent again with another body
        poison=[("bad-1", "InvalidPayload"), (None, "MissingMessageId")],
    )
    healthy = [letter("ord-2", "HashMismatch"), letter("bad-1", "InvalidPayload")]
    healthy.append(letter(None, "MissingMessageId"))

    def failures(orders: list[dict[str, Any]], dead_letters: list[DeadLetter]) -> list[str]:
        data = AuditData(orders, [], [], {}, dead_letters, None)
        return [i.name for i in expectations(data, expected) if not i.passed]

    mismatch = "every mismatch dead-lettered HashMismatch"
    poison = "every poison message dead-lettered with its reason"
    assert failures([one, two], healthy) == []
    assert failures([one], healthy) == [NO_ORDER_LOST]
    changed = {**two, "requestHash": "0" * 64}  # the mismatch's body stored, not the original
    assert failures([one, changed], healthy) == [ORDERS_ARE_THE_REQUESTS]
    assert failures([one, two, accepted("ord-9")[0]], healthy) == [ORDERS_ARE_THE_REQUESTS]
    assert failures([one, two], healthy[1:]) == [mismatch]  # the mismatch completed
    assert failures([one, two], [*healthy, letter("ord-2", "HashMismatch")]) == [mismatch]
    assert failures([one, two], [*healthy, letter("ord-2", "InvalidPayload")]) == [mismatch]
    assert failures([one, two], healthy[:2]) == [poison]  # the message without an id: lost
    assert failures([one, two], [*healthy[:1], letter("bad-1", "PayloadTooLarge"), healthy[2]]) == [
        poison
    ]
    assert failures([one, two], [*healthy, letter("ord-1", "MaxDeliveryCountExceeded")]) == [
        NO_VALID_ORDER_DEAD_LETTERED
    ]
    # A HashMismatch for an order the demo never changed is no excuse.
    assert failures([one, two], [*healthy, letter("ord-1", "HashMismatch")]) == [
        NO_VALID_ORDER_DEAD_LETTERED
    ]


def test_the_stand_in_checks_fail_on_its_own_figures() -> None:
    def failures(active: int, failed: int) -> list[str]:
        checks = stand_in_checks(active_messages=active, failed_invocations=failed, errors=["e"])
        return [i.name for i in checks if not i.passed]

    assert failures(0, 0) == []
    assert failures(1, 0) == ["queue drained"]
    assert failures(0, 1) == ["no invocation failed"]


def test_the_operator_audit_must_say_what_the_table_says_having_read_what_it_read() -> None:
    """The agreement row: same verdicts and offending ids, and the same amount read; an audit
    that reads nothing (a window on the wrong clock, a subscription someone drained) passes
    over nothing and must not agree."""
    documents = [*accepted("ord-1"), *accepted("ord-2")]
    orders = [d for d in documents if d["type"] == "order"]
    data = demo_data(documents, [], [event_of(o) for o in orders])
    flow = flow_invariants(data, now=NOW)
    read = {"orders": 2, "outboxEvents": 2, "markers": 0, "deadLetters": 0, "deliveredEvents": 2}
    rows = [{"name": i.name, "verdict": i.verdict, "offending": i.offending} for i in flow]

    def agrees(rows: list[dict[str, Any]], read: dict[str, Any], exit_status: int = 0) -> Invariant:
        output = json.dumps({"passed": exit_status == 0, "invariants": rows, "read": read})
        return operator_audit_agrees(flow, data, ToolRun(("audit",), exit_status, output))

    assert agrees(rows, read).passed
    assert not agrees(rows, {**read, "deliveredEvents": 0}).passed  # the subscription drained
    assert not agrees(rows, {**read, "orders": 0, "outboxEvents": 0}).passed  # the wrong window
    assert not agrees(rows, {k: v for k, v in read.items() if k != "markers"}).passed  # no markers
    other = [{**rows[1], "verdict": "FAIL", "offending": ["ord-2"]}, *rows[:1], *rows[2:]]
    disagreement = agrees(other, read, exit_status=1)
    assert (disagreement.passed, disagreement.offending) == (False, [ONE_EVENT_PER_ORDER])
    assert not agrees(rows[1:], read).passed  # an invariant the tool did not check
    unreadable = operator_audit_agrees(flow, data, ToolRun(("audit",), 2, "error: no container"))
    assert not unreadable.passed
    assert "error: no container" in unreadable.detail


def test_the_parked_phase_fails_unless_each_event_was_parked_listed_and_republished() -> None:
    ids = {"ord-p1"}
    listed = ToolRun(("parked", "list"), 0, "ord-p1 parked RetriesExhausted")
    done = ToolRun(("parked", "republish"), 0, "ord-p1 republished")

    def phase(parked: dict[str, str], listing: ToolRun, republishing: ToolRun) -> bool:
        return ParkedRun(ids, parked, 10, listing, republishing).check().passed

    retried = {"ord-p1": "RetriesExhausted"}
    assert phase(retried, listed, done)
    assert not phase({}, listed, done)  # published after all: the phase showed nothing
    assert not phase({"ord-p1": "RejectedByBroker"}, listed, done)
    assert not phase({**retried, "ord-9": "RetriesExhausted"}, listed, done)  # another's event
    assert not phase(retried, ToolRun(("parked", "list"), 0, "0 outbox event(s)"), done)
    assert not phase(retried, listed, ToolRun(("parked", "republish"), 1, "ord-p1 changed"))


async def test_a_relay_that_skips_marking_leaves_pending_documents_and_the_invariant_fails(
    world: World, host: LocalFunctionsHost, container: ContainerProxy
) -> None:
    # Every mark answered 412 ("changed since read"): the relay takes it for an earlier run's
    # mark and returns, the trigger checkpoints, and the outbox documents stay pending for ever.
    transport = FaultInjectingTransport(connection_verify=False)
    transport.add(FaultRule(FaultKind.STATUS, method="PATCH", status=412, times=None))
    world.compose(transport=transport, jitter=lambda: 1.0)
    for order_id in ("ord-1", "ord-2"):
        world.queue.send(message(order_body(order_id), message_id=order_id))
    await host.run_until_idle()
    await world.change_feed.drain()

    data = demo_data(await documents(container), world.queue.dead_letters, world.topic.delivered())
    checks = {i.name: i for i in flow_invariants(data, now=world.clock.now())}

    assert checks[ONE_EVENT_PER_ORDER].passed
    unmarked = checks[NOTHING_PENDING]
    assert (unmarked.passed, unmarked.offending) == (False, ["ord-1", "ord-2"])
    assert unmarked.detail.startswith("2 pending")


def accepted(order_id: str) -> list[dict[str, Any]]:
    """An order and its outbox event as the consumer writes them, the event dispatched."""
    raw = json.dumps(order_body(order_id)).encode()
    written = build_documents(
        parse_order(raw, order_id),
        IncomingMessage(order_id, raw),
        outbox_enabled=True,
        accepted_at=NOW,
    )
    return [{**d, "status": "dispatched"} if d["type"] == "outbox" else d for d in written]


def event_of(order: dict[str, Any]) -> OutgoingMessage:
    payload = {k: order[k] for k in ("orderId", "customerId", "totalMinor")}
    return OutgoingMessage(f"event-{order['orderId']}", json.dumps({"payload": payload}).encode())


def letter(message_id: str | None, reason: str) -> DeadLetter:
    return DeadLetter(1, message_id, NOW, 1, reason, None, b"{}")


def test_the_watchdog_invariant_fails_when_a_skipped_event_stays_pending_or_nothing_skipped() -> (
    None
):
    ids = {"ord-w1", "ord-w2"}
    assert WatchdogRun(ids, skipped=2, ticks=1, left_pending=0).check().passed
    assert not WatchdogRun(ids, skipped=2, ticks=3, left_pending=1).check().passed  # not published
    # The change feed delivered them after all: the phase did not show what it claims to.
    assert not WatchdogRun(ids, skipped=0, ticks=0, left_pending=0).check().passed
