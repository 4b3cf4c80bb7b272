"""A settlement call that hangs keeps its pool thread for as long as it hangs (the extension's
gRPC stubs set no deadline, and a running thread cannot be cancelled). Before, after
``maxConcurrentCalls`` such calls every later settlement queued behind them and timed out, and
nothing but a warning per failed settlement said why. Now the damage is bounded (new
settlements move to a fresh pool once half of a pool is hung; at most ``MAX_POOLS`` pools) and
visible (``orders.settlement.hung`` and an error log per hang, critical once no pool is left).

Fails on 223dafd: the third settlement below queued behind two hung ones and timed out, and
``Settler`` took no watcher.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from idempotent_consumer import Decision, Outcome
from idempotent_consumer.servicebus import HungSettlements, Settler
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from local.standins.doubles import COMPLETE, RecordingActions
from shared.telemetry.consumer import ConsumerTelemetry

PROCESSED = Decision(Outcome.PROCESSED, order_id="ord-1")


@pytest.fixture
def reports() -> list[HungSettlements]:
    return []


@pytest.fixture
def hanging() -> Iterator[RecordingActions]:
    actions = RecordingActions(expected={COMPLETE}, hold=2, hold_timeout_s=30)
    yield actions
    actions.release.set()  # never leave a thread blocked past the test


async def test_hung_calls_move_new_settlements_to_a_fresh_pool(
    hanging: RecordingActions, reports: list[HungSettlements]
) -> None:
    settler = Settler(max_workers=2, timeout_s=0.1, watcher=reports.append)
    try:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                await settler.settle(hanging, object(), PROCESSED)
        assert settler.hung == 2

        # Two threads held: in one pool of two, this one would have queued behind them.
        await asyncio.wait_for(settler.settle(hanging, object(), PROCESSED), timeout=5)

        assert hanging.completed == 1
        # Half of a pool of two hung: each hang moves new settlements to a fresh pool.
        assert [(r.hung, r.replaced_pool) for r in reports] == [(1, True), (2, True)]
        hanging.release.set()
        for _ in range(100):
            if settler.hung == 0:
                break
            await asyncio.sleep(0.01)
        assert settler.hung == 0
        returns = [r for r in reports if r.returned_after_s is not None]
        assert [r.hung for r in returns] == [1, 0]
        assert all(r.returned_after_s >= 0.1 for r in returns)  # type: ignore[operator]
    finally:
        settler.close()


async def test_the_pools_are_bounded_and_an_exhausted_settler_says_so(
    reports: list[HungSettlements],
) -> None:
    actions = RecordingActions(expected={COMPLETE}, hold=3, hold_timeout_s=30)
    settler = Settler(max_workers=1, timeout_s=0.05, watcher=reports.append, max_pools=2)
    try:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                await settler.settle(actions, object(), PROCESSED)
        assert [(r.replaced_pool, r.exhausted) for r in reports] == [
            (True, False),  # pool 1 -> pool 2
            (False, True),  # pool 2 held, no third: the worker must be restarted
        ]  # the third call queued behind the hung one and timed out: cancelled, never hung
        assert settler.hung == 2
    finally:
        actions.release.set()
        settler.close()


async def test_hung_settlements_are_counted_and_logged_for_an_alert(
    hanging: RecordingActions, caplog: pytest.LogCaptureFixture
) -> None:
    reader = InMemoryMetricReader()
    telemetry = ConsumerTelemetry("orders", meter_provider=MeterProvider([reader]))
    settler = Settler(max_workers=2, timeout_s=0.05, watcher=telemetry.settlements_hung)
    try:
        with caplog.at_level(logging.WARNING, logger="orders.consumer"):
            for _ in range(2):
                with pytest.raises(TimeoutError):
                    await settler.settle(hanging, object(), PROCESSED)
        data = reader.get_metrics_data()
        assert data is not None
        [point] = [
            p
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "orders.settlement.hung"
            for p in m.data.data_points
            if isinstance(p, NumberDataPoint)
        ]
        assert point.value == 2
        errors = [r for r in caplog.records if hasattr(r, "hung_settlements")]
        assert [(r.levelno, r.hung_settlements) for r in errors] == [
            (logging.ERROR, 1),
            (logging.ERROR, 2),
        ]
        assert "fresh thread pool" in errors[0].getMessage()
    finally:
        hanging.release.set()
        settler.close()
