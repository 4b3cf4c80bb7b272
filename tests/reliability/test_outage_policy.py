"""The transient-failure policy: an outage shorter than about maxDeliveryCount x lockDuration
dead-letters nothing; systemic errors are never dead-lettered by the consumer. Time is the queue's
manual clock: backoff and lock expiry happen on one time line, without sleeping."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import RetryPolicy

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from tests.orders import message, order_body
from tests.state import documents, settlements


def tolerated_outage(queue: PeekLockQueue) -> timedelta:
    """What the policy promises: every delivery retries until lock_margin before its expiry."""
    settings, policy = queue.settings, RetryPolicy()
    per_delivery = settings.lock_duration - timedelta(seconds=policy.lock_margin_s)
    return settings.max_delivery_count * per_delivery


# 500 and connection resets reach the consumer at once; a 503 is first retried by the SDK with
# fixed real-time waits of its own (500 ms), which would only slow the test down (see
# test_sdk_faults.py for 503). 403 is the systemic case: RBAC being fixed during the outage.
OUTAGES: dict[str, dict[str, Any]] = {
    "500 from every write": {"kind": FaultKind.STATUS, "status": 500},
    "connections reset": {"kind": FaultKind.CONNECTION_ERROR},
    "403 until RBAC is fixed": {"kind": FaultKind.STATUS, "status": 403},
}


@pytest.mark.parametrize("outage_kind", list(OUTAGES))
async def test_outage_within_the_tolerated_span_dead_letters_nothing(
    outage_kind: str,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
    clock: ManualClock,
) -> None:
    outage_ends = clock.now() + tolerated_outage(queue) - timedelta(seconds=10)
    outage = faulty.add(
        FaultRule(
            **OUTAGES[outage_kind],
            times=None,
            active=lambda: clock.now() < outage_ends,
            **WRITES,
        )
    )
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert clock.now() >= outage_ends  # the order really waited out the whole outage
    assert queue.dead_letters == []
    assert queue.stats.deliveries == queue.settings.max_delivery_count
    assert outage.fired > 5 * queue.settings.max_delivery_count  # backoff retries per delivery
    assert settlements(queue)[-1] == ("complete", True)
    assert len(await documents(container)) == 2


async def test_outage_beyond_the_span_ends_in_the_broker_dead_letter_queue_not_ours(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    faulty: FaultInjectingTransport,
    clock: ManualClock,
) -> None:
    faulty.add(FaultRule(FaultKind.STATUS, status=500, times=None, **WRITES))
    queue.send(message(order_body()))

    await host.run_until_idle()

    # The consumer only ever abandoned; Service Bus parked it after maxDeliveryCount, to be
    # resubmitted once the outage is over.
    [dead] = queue.dead_letters
    assert dead.reason == "MaxDeliveryCountExceeded"
    assert {r.operation for r in queue.settlement_log} == {"abandon"}
    assert await documents(container) == []


def test_backoff_doubles_up_to_the_cap_and_stops_at_the_lock_margin() -> None:
    policy = RetryPolicy(first_delay_s=1, max_delay_s=8, lock_margin_s=5)

    delays = [policy.next_delay(attempt, 60, jitter=1.0) for attempt in range(1, 7)]

    assert delays == [1, 2, 4, 8, 8, 8]
    assert policy.next_delay(1, 7, jitter=1.0) == 1
    assert policy.next_delay(4, 7, jitter=1.0) == 2  # only what is left before the margin
    assert policy.next_delay(1, 5, jitter=1.0) is None
    assert policy.next_delay(3, 60, jitter=0.5) == 2  # full jitter scales the ceiling
