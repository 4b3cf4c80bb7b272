"""`make demo` at a small size: the invariants hold and every kind of trouble really happened."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rich.console import Console

from local.demo import POISON_KINDS, DemoOptions, plan, run_demo

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
        quiet=True,
    )
    the_plan = plan(options)
    assert the_plan.crash and the_plan.lock_expiry and the_plan.mismatches
    assert the_plan.early_retries and the_plan.late_retries

    report = await run_demo(options, Console(quiet=True))

    failed = [check for check in report.checks if not check.passed]
    assert report.passed, failed
    figures = report.figures
    assert figures["order documents"] == options.orders
    assert figures["outbox documents"] == options.orders
    assert figures["dropped by duplicate detection"] == len(the_plan.early_retries)
    assert report.dead_lettered_by_reason["HashMismatch"] == len(the_plan.mismatches)
    assert set(report.dead_lettered_by_reason) == {"HashMismatch", *POISON_KINDS.values()}
    # Late retries, crashes after commit and lock-expiry redeliveries all end as duplicates.
    assert figures["duplicates"] >= len(the_plan.late_retries) + len(the_plan.crash)
    assert figures["settlements lost (crash / lock expiry)"] >= len(the_plan.crash)
    assert figures["processed"] == options.orders


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
