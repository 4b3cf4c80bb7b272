"""A gateway in front of Cosmos DB failing (502 Bad Gateway, 504 Gateway Timeout), through the
real azure-cosmos SDK and Microsoft's worker, with the answers injected at the azure-core
transport. The SDK does not retry a non-idempotent write on these statuses (its timeout-failover
policy retries reads only: azure/cosmos/_timeout_failover_retry_policy.py:41-43), so the consumer
meets them: the moment is wrong, not the order. The delivery rides them out in-delivery and
completes the order once; a gateway incident must never hold and abandon healthy orders until
Service Bus dead-letters them as ``MaxDeliveryCountExceeded``.

Killed mutants: 502 or 504 removed from ``idempotent_consumer.cosmos._store._TRANSIENT_STATUS`` (the
answer becomes "unexpected": held 30 s, abandoned, no order)."""

from __future__ import annotations

import pytest
from azure.cosmos.aio import ContainerProxy

from local.standins.broker import PeekLockQueue
from local.standins.faults import POINT_READS, WRITES, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from tests.conftest import InstallFaulty
from tests.integration.consumer_logs import consumer_records, retried_attempts
from tests.orders import message, order_body
from tests.state import documents, settlements


@pytest.mark.parametrize("status", [502, 504], ids=["502 bad gateway", "504 gateway timeout"])
async def test_a_gateway_error_on_the_write_is_ridden_out_and_the_order_completed_once(
    status: int,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    install_faulty: InstallFaulty,
) -> None:
    transport = install_faulty()
    rule = transport.add(FaultRule(FaultKind.STATUS, status=status, times=2, **WRITES))
    queue.send(message(order_body()))

    with consumer_records() as records:
        await host.run_until_idle()

    assert rule.fired == 2
    assert retried_attempts(records) == ["transient", "transient"]
    assert settlements(queue) == [("complete", True)]
    assert queue.dead_letters == []
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


@pytest.mark.parametrize("status", [502, 504], ids=["502 bad gateway", "504 gateway timeout"])
async def test_a_gateway_error_on_the_conflict_read_is_ridden_out_and_the_duplicate_completed(
    status: int,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    install_faulty: InstallFaulty,
) -> None:
    # The SDK retries a read itself on these statuses (its timeout-failover policy), so six
    # answers: more than its own retries, the consumer meets some of them.
    transport = install_faulty()
    queue.send(message(order_body()))
    await host.run_until_idle()
    rule = transport.add(FaultRule(FaultKind.STATUS, status=status, times=6, **POINT_READS))
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert rule.fired == 6
    assert settlements(queue) == [("complete", True)] * 2
    assert queue.dead_letters == []
    assert len(await documents(container)) == 2
