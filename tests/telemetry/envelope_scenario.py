"""The driving half of ``test_envelopes.py``: run ONLY in a fresh interpreter by that test
(``pytest tests/telemetry/envelope_scenario.py``; the file name keeps it out of normal
collection), because the Azure Monitor distro configures the global providers once per process.

It configures the project's own exporters (``configure_exporters``) with the connection string
the outer test passes, whose ``IngestionEndpoint`` is the outer test's local HTTP server, then
drives one delivery of each outcome through the real function on the local Functions host, and
flushes. The outer test reads what the real exporter posted.

The outbox relay is not driven yet: when a relay function is in ``function_app.app``, the outer
test stops skipping the relay's names and fails until a publish is driven here too (through the
relay's change-feed emulation, owner: relay).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import _logs as logs
from opentelemetry import metrics, trace

from local.broker import ManualClock, PeekLockQueue
from local.faults import WRITES, FaultKind, FaultRule
from local.host import LocalFunctionsHost
from shared.telemetry import CONNECTION_STRING_SETTING, configure_exporters
from tests.conftest import InstallFaulty
from tests.orders import message, order_body

CAPTURE_CONNECTION_SETTING = "ORDERS_CAPTURE_CONNECTION_STRING"
CAPTURE_SUMMARY_SETTING = "ORDERS_CAPTURE_SUMMARY"


@pytest.mark.skipif(
    CAPTURE_CONNECTION_SETTING not in os.environ, reason="run by tests/telemetry/test_envelopes.py"
)
async def test_drive_one_delivery_of_each_outcome(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    install_faulty: InstallFaulty,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONNECTION_STRING_SETTING, os.environ[CAPTURE_CONNECTION_SETTING])
    assert configure_exporters(os.environ) is True
    faults = install_faulty()  # the consumer's telemetry uses the (now configured) globals
    window = queue.settings.duplicate_detection_window

    # processed, after one in-delivery retry of a transient failure
    faults.add(FaultRule(FaultKind.STATUS, status=500, times=1, **WRITES))
    queue.send(message(order_body("ord-1"), message_id="ord-1"))
    await host.run_until_idle()
    # duplicate, then mismatch (HashMismatch), each once the broker's window has passed
    clock.advance(window)
    queue.send(message(order_body("ord-1"), message_id="ord-1"))
    await host.run_until_idle()
    clock.advance(window)
    changed = order_body("ord-1")
    changed["lines"][0]["quantity"] = 3
    queue.send(message(changed, message_id="ord-1"))
    await host.run_until_idle()
    # invalid (MessageIdMismatch)
    queue.send(message(order_body("ord-2"), message_id="ord-9"))
    await host.run_until_idle()
    # transient, then systemic: one delivery each, abandoned after riding out the lock
    for status, order_id in ((500, "ord-3"), (403, "ord-4")):
        faults.add(FaultRule(FaultKind.STATUS, status=status, times=None, **WRITES))
        queue.send(message(order_body(order_id), message_id=order_id))
        await host.invoke(queue.receive(1)[0])
        faults.clear()
    await host.run_until_idle()  # their redeliveries: processed
    # a settlement that fails (the lock was lost): settlement "none"; the redelivery: duplicate
    queue.send(message(order_body("ord-5"), message_id="ord-5"))
    [delivery] = queue.receive(1)
    queue.expire_lock(delivery.lock_token)
    await host.invoke(delivery)
    await host.run_until_idle()

    providers: list[Any] = [
        trace.get_tracer_provider(),
        metrics.get_meter_provider(),
        logs.get_logger_provider(),
    ]
    for provider in providers:  # the SDK's providers, set by the distro
        assert provider.force_flush(30_000) is not False
    summary = {"deliveries": queue.stats.deliveries, "dead_letters": len(queue.dead_letters)}
    write_summary(Path(os.environ[CAPTURE_SUMMARY_SETTING]), summary)


def write_summary(path: Path, summary: dict[str, int]) -> None:
    path.write_text(json.dumps(summary), encoding="utf-8")
