"""``make demo`` ends with the dead-letter tool over the demo's own dead-letter queue: what a user
runs after the demo (``--dead-letters "list"``, ``"show ID"``, ``"resubmit ... --dry-run"``)
sees exactly the dead letters the demo produced, through ``ops``' local-broker adapter, and the
stored orders of the demo's container."""

from __future__ import annotations

import io
import json

from rich.console import Console

from local.demo import POISON_KINDS, DemoOptions, plan, print_report, run_demo

SMALL = {"orders": 40, "seed": 5, "mismatch_rate": 0.1, "poison_rate": 0.1, "quiet": True}


async def test_the_demo_lists_its_own_dead_letters_with_the_tool() -> None:
    options = DemoOptions(**SMALL, dead_letters="list --json")  # type: ignore[arg-type]
    the_plan = plan(options)
    assert the_plan.mismatches and the_plan.poison

    report = await run_demo(options, Console(quiet=True))

    assert report.passed
    assert report.dead_letter_tool_exit == 0
    listed = json.loads(report.dead_letter_tool)
    assert sorted(row["reason"] for row in listed) == sorted(
        report.dead_lettered_by_reason.elements()
    )
    assert {row["messageId"] for row in listed if row["reason"] == "HashMismatch"} == set(
        the_plan.mismatches
    )
    assert {row["reason"] for row in listed} >= {POISON_KINDS[kind] for kind, _ in the_plan.poison}
    printed = io.StringIO()
    print_report(report, Console(file=printed, width=200))
    assert "python -m ops, over this demo's dead-letter queue" in printed.getvalue()


async def test_show_diffs_a_hash_mismatch_against_the_demo_s_stored_order() -> None:
    options = DemoOptions(**SMALL)  # type: ignore[arg-type]
    order_id = sorted(plan(options).mismatches)[0]
    options.dead_letters = f"show {order_id}"

    report = await run_demo(options, Console(quiet=True))

    assert report.dead_letter_tool_exit == 0
    assert f"order {order_id}" in report.dead_letter_tool  # the diff table's title
    assert "stored order: not found" not in report.dead_letter_tool
    assert "quantity" in report.dead_letter_tool or "sku" in report.dead_letter_tool


async def test_a_dry_run_resubmit_changes_nothing_and_an_empty_command_skips_the_tool() -> None:
    options = DemoOptions(**SMALL, dead_letters="resubmit --reason HashMismatch --dry-run")  # type: ignore[arg-type]

    report = await run_demo(options, Console(quiet=True))

    # Refused: a copy of a HashMismatch would be dead-lettered again (exit 1: the operator looks).
    assert report.dead_letter_tool_exit == 1
    assert "refused" in report.dead_letter_tool
    skipped = await run_demo(DemoOptions(**SMALL, dead_letters=""), Console(quiet=True))  # type: ignore[arg-type]
    assert skipped.dead_letter_tool_exit is None and skipped.dead_letter_tool == ""


async def test_the_demo_audits_its_own_run_and_lists_its_parked_events() -> None:
    """The audit and the parked-event commands over the demo's own container and queues: the
    demo's run is healthy, so every invariant holds and nothing is parked."""
    options = DemoOptions(**SMALL, dead_letters="audit --since 1h --json")  # type: ignore[arg-type]

    report = await run_demo(options, Console(quiet=True))

    assert report.passed
    assert report.dead_letter_tool_exit == 0, report.dead_letter_tool
    audited = json.loads(report.dead_letter_tool)
    assert audited["passed"]
    assert {i["verdict"] for i in audited["invariants"]} == {"PASS"}
    assert audited["read"]["deadLetters"] == sum(report.dead_lettered_by_reason.values())
    parked = await run_demo(
        DemoOptions(**SMALL, dead_letters="parked list --json"),  # type: ignore[arg-type]
        Console(quiet=True),
    )
    assert (parked.dead_letter_tool_exit, json.loads(parked.dead_letter_tool)) == (0, [])
