"""`make demo` at a small size: the invariants hold and every kind of trouble really happened;
the relay's invariants fail when the relay is broken."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.cosmos.aio import ContainerProxy
from rich.console import Console

from local.broker import OutgoingMessage
from local.demo import POISON_KINDS, DemoOptions, plan, relay_checks, run_demo
from local.faults import FaultInjectingTransport, FaultKind, FaultRule
from local.host import LocalFunctionsHost
from local.world import World
from shared.contract import parse_order
from shared.core import IncomingMessage, build_documents
from tests.orders import message, order_body
from tests.state import documents

REPO = Path(__file__).resolve().parents[2]


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
        quiet=True,
    )
    the_plan = plan(options)
    assert the_plan.crash and the_plan.lock_expiry and the_plan.mismatches
    assert the_plan.early_retries and the_plan.late_retries

    report = await run_demo(options, Console(quiet=True))

    failed = [check for check in report.checks if not check.passed]
    assert report.passed, failed
    figures = report.figures
    # Phase 3's orders too: accepted while the relay's lease store was empty.
    orders = options.orders + options.skipped_orders
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
    # The change feed skipped phase 3's events (its lease started from now); the watchdog's
    # timer, through the worker, published every one (an invariant, above).
    assert figures["events skipped by the change feed (lease from now)"] == options.skipped_orders
    assert figures["watchdog runs (timer, through the worker)"] >= 1
    assert figures["events dropped by topic duplicate detection"] > 0


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


def test_the_relay_invariants_fail_when_the_subscription_or_the_outbox_is_wrong() -> None:
    # What each check catches, from documents and deliveries as a broken relay would leave them.
    documents = [*accepted("ord-1"), *accepted("ord-2")]
    orders = {d["orderId"]: d for d in documents if d["type"] == "order"}
    good = [event_of(orders["ord-1"]), event_of(orders["ord-2"])]
    assert all(check.passed for check in relay_checks(documents, good))

    def failed(docs: list[dict[str, Any]], delivered: list[OutgoingMessage]) -> list[str]:
        return [check.name for check in relay_checks(docs, delivered) if not check.passed]

    one = "exactly one OrderAccepted per accepted order at the subscription"
    pending = "no outbox document left pending"
    rejected = "no OrderAccepted for a rejected order or request"
    assert failed(documents, good[:1]) == [one]  # an event lost
    assert failed(documents, [*good, good[0]]) == [one]  # a republish not dropped
    assert failed(documents, [*good, event_of({**orders["ord-1"], "orderId": "bad-1"})]) == [
        rejected  # an event for a message that was dead-lettered
    ]
    changed = {**orders["ord-2"], "totalMinor": orders["ord-2"]["totalMinor"] + 1}
    assert failed(documents, [good[0], event_of(changed)]) == [rejected]  # the mismatch's body
    unmarked = [{**d, "status": "pending"} if d["type"] == "outbox" else d for d in documents]
    assert failed(unmarked, good) == [pending]


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

    checks = {c.name: c for c in relay_checks(await documents(container), world.topic.delivered())}

    assert checks["exactly one OrderAccepted per accepted order at the subscription"].passed
    unmarked = checks["no outbox document left pending"]
    assert not unmarked.passed
    assert unmarked.detail == "2 pending"


def accepted(order_id: str) -> list[dict[str, Any]]:
    """An order and its outbox event as the consumer writes them, the event dispatched."""
    raw = json.dumps(order_body(order_id)).encode()
    written = build_documents(
        parse_order(raw, order_id),
        IncomingMessage(order_id, raw),
        outbox_enabled=True,
        accepted_at=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
    )
    return [{**d, "status": "dispatched"} if d["type"] == "outbox" else d for d in written]


def event_of(order: dict[str, Any]) -> OutgoingMessage:
    payload = {k: order[k] for k in ("orderId", "customerId", "totalMinor")}
    return OutgoingMessage(f"event-{order['orderId']}", json.dumps({"payload": payload}).encode())


def test_the_watchdog_invariant_fails_when_a_skipped_event_stays_pending_or_nothing_skipped() -> (
    None
):
    from local.demo import _WatchdogRun

    ids = {"ord-w1", "ord-w2"}
    assert _WatchdogRun(ids, skipped=2, ticks=1, left_pending=0).check().passed
    assert not _WatchdogRun(ids, skipped=2, ticks=3, left_pending=1).check().passed  # not published
    # The change feed delivered them after all: the phase did not show what it claims to.
    assert not _WatchdogRun(ids, skipped=0, ticks=0, left_pending=0).check().passed
