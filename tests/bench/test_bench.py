"""Smoke tests of ``python -m bench``: the smallest run measures every target through the real
function, the real SDK and the local Cosmos server, and writes its numbers without touching the
page's prose. Only what cannot vary with the machine is asserted (request counts, settlements,
the same write for the consumer and the floor); the timing verdicts are the bench's business.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import coldstart, report
from bench.__main__ import main
from bench.request_counts import count_outcomes
from bench.standin import standin
from local.assembly.world import CosmosAccount

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALLEST = [
    *("--cpu-messages", "100", "--creates", "20", "--messages", "16", "--rounds", "1"),
    *("--relay-orders", "20", "--relay-rounds", "1", "--ingestion-orders", "5"),
    *("--watchdog-stuck", "150", "--watchdog-page", "5"),
]


def test_smallest_run_measures_every_target_and_keeps_the_prose(
    cosmos_account: CosmosAccount, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COSMOS_EMULATOR_ENDPOINT", cosmos_account.endpoint)
    monkeypatch.setenv("COSMOS_EMULATOR_KEY", cosmos_account.key or "")
    page = tmp_path / "benchmarks.md"
    page.write_text((REPO_ROOT / "docs" / "benchmarks.md").read_text())
    output = tmp_path / "results.json"
    arguments = [*SMALLEST, "--memory-messages", "100", "--skip", "coldstart"]

    assert main([*arguments, "--output", str(output), "--markdown", str(page)]) == 0

    results = json.loads(output.read_text())
    assert set(results["verdicts"]) == {
        "requests",
        "cpu",
        "throughput",
        "memory",
        "relay",
        "ingestion",
        "watchdog",
    }
    assert results["requests"]["ok"], results["requests"]
    assert results["requests"]["outcomes"]["new"]["kinds"] == {"batch": 1}  # outbox on
    throughput = results["throughput"]
    assert throughput["problems"] == []
    assert throughput["concurrency"] == 16  # host.json's maxConcurrentCalls
    for function in ("consumer", "floor"):  # the same write, every message completed
        measured = throughput["functions"][function]
        assert measured["documents_per_message"]["values"] == [1.0]
        assert measured["completed_share"]["values"] == [1.0]
    assert results["cpu"]["create_item_cpu_us"] > 0 < results["cpu"]["decide_cpu_us"]["p50"]
    relay = results["relay"]
    assert relay["problems"] == []  # every order of every round published once and marked
    assert relay["max_items_per_invocation"] == 300  # the binding's
    assert {name: tier["leases"] for name, tier in relay["tiers"].items()} == {
        "orders-100-per-second.parameters.json": 1,
        "orders-1000-per-second.parameters.json": 4,
        "orders-10000-per-second.parameters.json": 40,
    }
    assert results["ingestion"]["ok"], results["ingestion"]
    # Target 8, small: 150 stuck, 20 pages of 5: the 100 oldest published, loaded by one query
    # read page by page, no aggregate, the tiers each above the watchdog's capacity.
    wd = results["watchdog"]
    assert wd["ok"], wd
    assert (wd["published"], wd["aggregates"]) == (100, 0)
    assert 100 <= wd["documents_loaded"] <= 1.1 * 100 + 5
    assert {tier["covered"] for tier in wd["tiers"].values()} == {False}
    written = page.read_text()
    prose = (REPO_ROOT / "docs" / "benchmarks.md").read_text().partition(report.BEGIN)[0]
    assert written.startswith(prose)
    assert "| 3. consumer / platform floor throughput, concurrency 16 |" in written
    assert "| 6. relay on one lease, marks in flight" in written
    assert "| 7. Log Analytics rows per healthy order" in written
    assert "| 8. one watchdog run over 150 stuck events" in written


async def test_a_new_order_is_one_create_item_with_the_outbox_off(
    cosmos_account: CosmosAccount,
) -> None:
    async with standin(cosmos_account, outbox=False) as world:
        result = await count_outcomes(world)

    outcomes = result["outcomes"]
    assert result["ok"], outcomes
    assert {name: o["documents"] for name, o in outcomes.items()} == {
        "new": 1,
        "duplicate": 2,
        "mismatch": 2,
        "invalid": 0,
    }
    assert outcomes["new"]["kinds"] == {"create": 1}
    assert (
        outcomes["duplicate"]["kinds"] == outcomes["mismatch"]["kinds"] == {"create": 1, "read": 1}
    )


def test_cold_start_baseline_is_the_apps_third_party_imports() -> None:
    imports = coldstart.third_party_imports()

    assert "from azure.cosmos.aio import CosmosClient" in imports
    assert "import azure.functions as func" in imports
    assert not [s for s in imports if s.split()[1].split(".")[0] in coldstart.PROJECT_PACKAGES]
