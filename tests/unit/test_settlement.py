"""Settlement runs on its own pool, one thread per concurrent call of the host, and never waits
for ever: a hung settlement is a failed settlement. The actions are the consumer's own port
(``MessageActions``); the real gRPC path is covered by the integration tests."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from idempotent_consumer import Decision, Outcome
from idempotent_consumer.servicebus import (
    DEFAULT_MAX_CONCURRENT_CALLS,
    Settler,
    app_host_json,
    max_concurrent_calls,
    to_incoming,
)

from local.standins.doubles import COMPLETE, InMemoryOrderStore, RecordingActions
from shared.config import HOST_JSON
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry
from tests.orders import order_body
from tests.unit.doubles import received

REPO = Path(__file__).resolve().parents[2]
PROCESSED = Decision(Outcome.PROCESSED, order_id="ord-1")


def test_the_pool_is_sized_from_host_json_next_to_function_app(tmp_path: Path) -> None:
    host = json.loads((REPO / "host.json").read_text())
    assert HOST_JSON == REPO / "host.json"
    assert (REPO / "function_app.py").exists()
    assert app_host_json() == HOST_JSON  # beside function_app.py (here, the working directory)
    assert max_concurrent_calls(HOST_JSON) == host["extensions"]["serviceBus"]["maxConcurrentCalls"]
    assert Settler().max_workers == max_concurrent_calls()
    assert max_concurrent_calls(tmp_path / "missing.json") == DEFAULT_MAX_CONCURRENT_CALLS == 16


async def test_max_concurrent_calls_settlements_run_at_once_none_queued() -> None:
    # asyncio's default executor has cpu_count + 4 threads (6 on 2 cores): there, the 16
    # settlements could never all be in flight together and the barrier would break.
    settler = Settler()
    barrier = threading.Barrier(settler.max_workers)
    actions = RecordingActions(expected={COMPLETE}, before=lambda _: barrier.wait(timeout=5))
    try:
        await asyncio.gather(
            *(settler.settle(actions, object(), PROCESSED) for _ in range(settler.max_workers))
        )
    finally:
        settler.close()

    assert actions.completed == settler.max_workers


async def test_a_hung_settlement_fails_after_the_timeout_instead_of_waiting_for_ever() -> None:
    release = threading.Event()
    settler = Settler(max_workers=2, timeout_s=0.2)
    try:
        with pytest.raises(TimeoutError):
            await settler.settle(
                RecordingActions(expected={COMPLETE}, hold=None, release=release),
                object(),
                PROCESSED,
            )
    finally:
        release.set()
        settler.close()


async def test_the_consumer_logs_and_swallows_a_timed_out_settlement(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    store = InMemoryOrderStore()
    settler = Settler(max_workers=2, timeout_s=0.2)
    consumer = OrderConsumer(store, ConsumerTelemetry("orders"))
    message = received(order_body())
    try:
        decision = await consumer.handle(
            to_incoming(message),
            settler.bound(
                RecordingActions(expected={COMPLETE}, hold=None, release=release), message
            ),
        )
    finally:
        release.set()
        settler.close()

    assert decision.outcome is Outcome.PROCESSED  # committed; the redelivery completes it
    [failed] = [r for r in caplog.records if "settling message" in r.getMessage()]
    assert failed.settlement_error == "TimeoutError"  # type: ignore[attr-defined]
