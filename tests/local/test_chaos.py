"""`make chaos` at 300 messages: every failure mixed in, lifecycles too, the invariants still
hold (but one: see ``test_each_orders_events_reach_the_subscription_in_increasing_versions``)."""

from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from local.scenarios.demo import DemoReport, run_demo
from local.scenarios.lifecycle import CONVERGED, PUBLISHED_IN_ORDER
from local.scenarios.options import CHAOS
from ops.audit import ONE_EVENT_PER_ORDER

# Rows that check the order in which each order's events reached the subscription. The local
# change feed orders changes by ``_ts`` only, and cosmosdb-server's ``_ts`` has one-second
# resolution (local/standins/change_feed.py, "What it does not reproduce"): two versions of one
# order committed within the same second may be relayed in either order here, where the real
# feed orders them by LSN.
PUBLICATION_ORDER = {
    ONE_EVENT_PER_ORDER,
    PUBLISHED_IN_ORDER,
    "python -m ops audit agrees with this table",
}


@pytest.fixture(scope="module")
async def chaos() -> DemoReport:
    options = dataclasses.replace(CHAOS, orders=300, seed=5, quiet=True, lifecycle=False)
    return await run_demo(options, Console(quiet=True))


async def test_chaos_run_keeps_every_invariant(chaos: DemoReport) -> None:
    report = chaos
    failed = [c for c in report.checks if not c.passed and c.name not in PUBLICATION_ORDER]
    assert not failed, failed
    figures = report.figures
    assert figures["lost valid orders"] == 0
    assert figures["duplicate order documents"] == 0
    assert figures["injected Cosmos faults"] > 0
    assert figures["settlements lost (crash / lock expiry)"] > 0
    assert figures["dropped by duplicate detection"] > 0
    assert max(report.deliveries_per_message) > 1
    assert figures["relay crashes between send and mark"] > 0
    # The relay stalled (a disabled topic for a run of sends) and caught up.
    assert figures["topic sends refused (injected: timeouts and the stall)"] >= CHAOS.relay_stall
    # Throttled transactional batches (207) below the SDK, ridden out within their deliveries.
    assert figures["throttled transactional batches (207, injected)"] > 0
    assert figures["events skipped by the change feed (lease from now)"] == CHAOS.skipped_orders
    assert figures["events dropped by topic duplicate detection"] > 0
    # Phase 4 parked its events on purpose (the tool republished them).
    assert figures["events parked by the relay (RetriesExhausted)"] == CHAOS.parked_events


async def test_chaos_mixes_lifecycles_in_and_every_order_converges(chaos: DemoReport) -> None:
    figures = chaos.figures
    checks = {c.name: c for c in chaos.checks}
    assert checks[CONVERGED].passed, checks[CONVERGED]
    assert "accepted" in checks[CONVERGED].detail and "cancelled" in checks[CONVERGED].detail
    assert figures["OrderAmended and OrderCancelled delivered"] > 0
    assert figures["stale"] > 0
    # Orders created by a change that arrived before their OrderPlaced have no OrderAccepted.
    assert figures["OrderAccepted delivered to the subscription"] < figures["order documents"]


@pytest.mark.xfail(
    strict=True,
    reason="the local change feed orders changes within one second of _ts arbitrarily "
    "(cosmosdb-server's _ts resolution; the real feed orders by LSN): versions of one order "
    "committed in the same second may reach the subscription out of order here",
)
async def test_each_orders_events_reach_the_subscription_in_increasing_versions(
    chaos: DemoReport,
) -> None:
    failed = [c for c in chaos.checks if not c.passed]
    assert not failed, failed
