"""``make demo`` ends with the dead-letter tool over the demo's own dead-letter queue: what a user
runs after the demo (``--dead-letters "list"``, ``"show ID"``, ``"resubmit ... --dry-run"``)
sees exactly the dead letters the demo produced, through ``ops``' local-broker adapter, and the
stored orders of the demo's container."""

from __future__ import annotations

import io
import json

from rich.console import Console

from local.scenarios.demo import print_report, run_demo
from local.scenarios.options import DemoOptions
from local.scenarios.orders import POISON_KINDS, extra_orders, plan

SMALL = {"orders": 40, "seed": 5, "mismatch_rate": 0.1, "poison_rate": 0.1, "quiet": True}


async def test_the_demo_lists_its_own_dead_letters_with_the_tool() -> None:
    options = DemoOptions(**SMALL, dead_letters="list --json")  # type: ignore[arg-type]
    the_plan = plan(options)
    assert the_plan.mismatches and the_plan.poison

    report = await run_demo(options, Console(quiet=True))

    assert report.passed
    listing = report.tool_runs["requested"]
    assert listing.exit_status == 0
    listed = json.loads(listing.output)
    assert sorted(row["reason"] for row in listed) == sorted(
        report.dead_lettered_by_reason.elements()
    )
    assert {row["messageId"] for row in listed if row["reason"] == "HashMismatch"} == set(
        the_plan.mismatches
    )
    assert {row["reason"] for row in listed} >= {POISON_KINDS[kind] for kind, _ in the_plan.poison}
    printed = io.StringIO()
    print_report(report, Console(file=printed, width=200))
    assert "$ python -m ops list --json" in printed.getvalue()


async def test_show_diffs_a_hash_mismatch_against_the_demo_s_stored_order() -> None:
    options = DemoOptions(**SMALL)  # type: ignore[arg-type]
    order_id = sorted(plan(options).mismatches)[0]
    options.dead_letters = f"show {order_id}"

    report = await run_demo(options, Console(quiet=True))

    shown = report.tool_runs["requested"]
    assert shown.exit_status == 0
    assert f"order {order_id}" in shown.output  # the diff table's title
    assert "stored order: not found" not in shown.output
    assert "quantity" in shown.output or "sku" in shown.output


async def test_a_dry_run_resubmit_changes_nothing_and_an_empty_command_skips_the_tool() -> None:
    options = DemoOptions(**SMALL, dead_letters="resubmit --reason HashMismatch --dry-run")  # type: ignore[arg-type]

    report = await run_demo(options, Console(quiet=True))

    # Refused: a copy of a HashMismatch would be dead-lettered again (exit 1: the operator looks).
    assert report.tool_runs["requested"].exit_status == 1
    assert "refused" in report.tool_runs["requested"].output
    skipped = await run_demo(DemoOptions(**SMALL, dead_letters=""), Console(quiet=True))  # type: ignore[arg-type]
    assert "requested" not in skipped.tool_runs
    assert list(skipped.tool_runs)[-1] == "audit"  # the audit runs all the same


async def test_the_demo_parks_an_event_lists_and_republishes_it_and_ends_with_the_audit() -> None:
    """What ``make demo`` runs by default over its own data: ``parked list`` shows the event the
    topic refused (phase 4), ``parked republish`` sets it back to pending, the relay publishes
    it; then the requested command, and last ``audit``, which read everything the demo wrote
    and found it healthy. A ``parked list`` asked for afterwards finds nothing left parked."""
    options = DemoOptions(**SMALL, dead_letters="parked list --json")  # type: ignore[arg-type]
    [parked_id] = extra_orders(options, "p", options.parked_events)

    report = await run_demo(options, Console(quiet=True))

    assert report.passed, [check for check in report.checks if not check.passed]
    runs = report.tool_runs
    assert list(runs) == ["parked list", "parked republish", "requested", "audit"]
    assert runs["parked list"].exit_status == 0
    assert parked_id in runs["parked list"].output
    assert "RetriesExhausted" in runs["parked list"].output
    assert (runs["parked republish"].exit_status, parked_id in runs["parked republish"].output) == (
        0,
        True,
    )
    assert "1 republished" in runs["parked republish"].output
    assert json.loads(runs["requested"].output) == []  # published since: nothing parked
    audit = runs["audit"]
    assert audit.arguments[:2] == ("audit", "--since")
    assert audit.exit_status == 0, audit.output
    assert "FAIL" not in audit.output
    orders = report.figures["order documents"]
    assert f"read {orders} orders, {orders} outbox events" in audit.output
    assert f"{orders} events at subscription retained" in audit.output
    assert report.operator_audit is not None
    audited = json.loads(report.operator_audit.output)
    assert audited["passed"]
    assert audited["read"]["deadLetters"] == sum(report.dead_lettered_by_reason.values())
