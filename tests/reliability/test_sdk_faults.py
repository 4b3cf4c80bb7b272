"""Faults injected below the real azure-cosmos SDK (an azure-core transport), one per kind of
trouble production has. For each: the settlement is right and the final state is one order."""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import PeekLockQueue
from local.standins.faults import POINT_READS, WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from tests.conftest import InstallFaulty
from tests.integration.consumer_logs import consumer_records, retried_attempts
from tests.orders import message, order_body
from tests.state import documents, settlements

FAULTS: dict[str, dict[str, Any]] = {
    "429 beyond the SDK's retries": {
        "kind": FaultKind.STATUS,
        "status": 429,
        "headers": {"x-ms-retry-after-ms": "1"},
        "times": 8,
    },
    "503 service unavailable": {"kind": FaultKind.STATUS, "status": 503, "times": 3},
    "408 request timeout": {"kind": FaultKind.STATUS, "status": 408, "times": 2},
    "449 retry with": {"kind": FaultKind.STATUS, "status": 449, "times": 2},
    "410 gone": {"kind": FaultKind.STATUS, "status": 410, "times": 2},
    "connection reset before sending": {"kind": FaultKind.CONNECTION_ERROR, "times": 2},
    "ambiguous write: committed, response lost": {"kind": FaultKind.LOST_RESPONSE},
    "response slower than the client timeout": {"kind": FaultKind.SLOW_RESPONSE, "delay_s": 5},
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_write_fault_ends_in_one_order_and_one_complete(
    fault: str,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    install_faulty: InstallFaulty,
) -> None:
    # A short read timeout so that "slower than the timeout" costs a fraction of a second.
    transport = install_faulty(read_timeout=0.3)
    rule = transport.add(FaultRule(**FAULTS[fault], **WRITES))
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert rule.fired >= 1
    assert settlements(queue) == [("complete", True)]
    assert queue.dead_letters == []
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_client_settings_let_the_sdk_absorb_a_short_429_burst(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
) -> None:
    # Tests CLIENT_OPTIONS (retry_total, retry_backoff_max), not product code: two throttled
    # answers never reach the consumer, which sees one successful write. The records are read
    # from the consumer's own logger: pytest's root capture misses them when propagation is off.
    rule = faulty.add(
        FaultRule(
            FaultKind.STATUS, status=429, headers={"x-ms-retry-after-ms": "5"}, times=2, **WRITES
        )
    )
    queue.send(message(order_body()))

    with consumer_records() as records:
        await host.run_until_idle()

    assert rule.fired == 2
    assert records, "the consumer's logger recorded nothing: the assertion below would be empty"
    assert retried_attempts(records) == []  # no consumer retry
    assert settlements(queue) == [("complete", True)]
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_fault_on_the_conflict_read_is_retried_and_the_duplicate_completed(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
) -> None:
    queue.send(message(order_body()))
    await host.run_until_idle()
    rule = faulty.add(FaultRule(FaultKind.STATUS, status=503, times=3, **POINT_READS))
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert rule.fired == 3
    assert settlements(queue) == [("complete", True)] * 2
    assert len(await documents(container)) == 2
