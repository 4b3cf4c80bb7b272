"""A transactional batch that fails answers 207 Multi-Status: the failing operation carries its
status (and sub-status, and, throttled, its retry-after), the others 424. azure-cosmos raises
``CosmosBatchOperationError`` for it, an azure-core ``HttpResponseError`` that its throttling
retries never see. Before this was read, every throttled batch was an *unexpected* error (held
30 s, abandoned, ten deliveries later dead-lettered as ``MaxDeliveryCountExceeded``): healthy
orders burned their deliveries under any burst of a serverless account.

Every case goes through the real SDK: ``local.standins.faults`` answers the batch below it, at the
azure-core transport, with the body and headers the service sends (its docstring gives the
source of each field). Fails on 223dafd: ``_classify`` returned None for every 207.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import RetryPolicy, SystemicStoreError, TransientStoreError

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import BATCHES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument
from tests.conftest import InstallFaulty
from tests.integration.test_batch_conflicts import order_documents
from tests.orders import message, order_body
from tests.state import documents, settlements

THROTTLED = 3200  # 429 sub-status RU budget exceeded (SubStatusCodes in the SDKs)

# (status, sub-status, failing index, per-operation retry-after ms, extra 207 headers)
#   -> what the store raises, and the retry-after it carries (s).
CASES: dict[str, tuple[tuple[int, int | None, int, int | None, dict[str, str]], Any, Any]] = {
    "429 on the order": ((429, THROTTLED, 0, 1500, {}), TransientStoreError, 1.5),
    "429 on the event": ((429, THROTTLED, 1, 250, {}), TransientStoreError, 0.25),
    "429, retry-after in the headers only": (
        (429, None, 0, None, {"x-ms-retry-after-ms": "2500", "x-ms-substatus": "3200"}),
        TransientStoreError,
        2.5,
    ),
    "449 on the order": ((449, None, 0, None, {}), TransientStoreError, None),
    "449 on the event": ((449, None, 1, None, {}), TransientStoreError, None),
    "503 on the order": ((503, None, 0, None, {}), TransientStoreError, None),
    "503 on the event": ((503, None, 1, None, {}), TransientStoreError, None),
    "408 on the order": ((408, None, 0, None, {}), TransientStoreError, None),
    "408 on the event": ((408, None, 1, None, {}), TransientStoreError, None),
    "409 on the order: the duplicate check": ((409, None, 0, None, {}), OrderAlreadyExists, None),
    "409 on the event: orphaned": ((409, None, 1, None, {}), OrphanedDocument, None),
    "403 on the order": ((403, None, 0, None, {}), SystemicStoreError, None),
    "403.3 write forbidden (failover)": ((403, 3, 1, None, {}), TransientStoreError, None),
    "403.3 with a retry-after": ((403, 3, 0, 800, {}), TransientStoreError, 0.8),
    "404 on the event (container gone)": ((404, None, 1, None, {}), SystemicStoreError, None),
    "400 on the event": ((400, None, 1, None, {}), cosmos_errors.CosmosBatchOperationError, None),
    "413 on the order": ((413, None, 0, None, {}), cosmos_errors.CosmosBatchOperationError, None),
}


def batch_rule(
    status: int,
    sub_status: int | None = None,
    index: int = 0,
    retry_after_ms: int | None = None,
    headers: dict[str, str] | None = None,
    **options: Any,
) -> FaultRule:
    return FaultRule(
        FaultKind.BATCH_OPERATION,
        status=status,
        sub_status=sub_status,
        failing_index=index,
        retry_after_ms=retry_after_ms,
        headers=headers or {},
        **{**BATCHES, **options},
    )


@pytest.mark.parametrize("case", list(CASES))
async def test_the_failing_operation_of_a_207_is_classified_like_a_single_request(
    case: str, app_env: dict[str, str], container: ContainerProxy
) -> None:
    (status, sub_status, index, retry_after_ms, headers), expected, retry_after_s = CASES[case]
    settings = Settings.from_env(app_env)
    transport = FaultInjectingTransport(connection_verify=False)
    rule = transport.add(batch_rule(status, sub_status, index, retry_after_ms, headers))
    async with create_client(settings, transport=transport) as client:
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        with pytest.raises(expected) as raised:
            await CosmosOrderStore(proxy).create(order_documents())

    assert rule.fired == 1  # one 207, no retry by the SDK
    error = raised.value
    if isinstance(error, TransientStoreError):
        assert error.retry_after_s == retry_after_s
        # What the log shows: the status, and the sub-status when the operation gave one.
        assert (f"{status}.{sub_status}" if sub_status else str(status)) in str(error)
        assert f"batch operation {index} failed" in str(error)
    if isinstance(error, cosmos_errors.CosmosBatchOperationError):
        assert error.status_code == status  # unclassified: the core treats it as unexpected
    assert await documents(container) == []  # nothing reached the server


async def test_a_throttled_batch_waits_the_retry_after_within_the_delivery(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    clock: ManualClock,
    install_faulty: InstallFaulty,
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = install_faulty()
    rule = transport.add(batch_rule(429, THROTTLED, 0, retry_after_ms=7000, times=1))
    queue.send(message(order_body()))
    started = clock.now()

    await host.run_until_idle()

    assert rule.fired == 1
    assert settlements(queue) == [("complete", True)]
    [retry] = [r for r in caplog.records if hasattr(r, "attempt_outcome")]
    assert retry.attempt_outcome == "transient"
    # The backoff alone would wait 1 s (jitter 1.0): the service asked for 7.
    assert retry.retry_delay_s == 7.0  # type: ignore[attr-defined]
    assert clock.now() - started == timedelta(seconds=7)
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


async def test_a_burst_of_throttled_batches_never_burns_a_delivery(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    clock: ManualClock,
    install_faulty: InstallFaulty,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 40 s of throttling, within one 60 s lock: the delivery rides it out in place.
    transport = install_faulty()
    until = clock.now() + timedelta(seconds=40)
    rule = transport.add(
        batch_rule(
            429, THROTTLED, 1, retry_after_ms=2000, times=None, active=lambda: clock.now() < until
        )
    )
    queue.send(message(order_body()))
    caplog.set_level(logging.INFO, "orders.consumer")

    await host.run_until_idle()

    assert rule.fired > 5
    assert queue.stats.deliveries == 1
    assert settlements(queue) == [("complete", True)]
    assert queue.dead_letters == []
    [final] = [r for r in caplog.records if hasattr(r, "outcome")]
    assert final.outcome == "processed"
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


@pytest.mark.parametrize("status", [429, 449, 503, 408])
@pytest.mark.parametrize("index", [0, 1], ids=["on the order", "on the event"])
async def test_every_throttling_status_of_a_batch_ends_in_one_order_and_one_complete(
    status: int,
    index: int,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    install_faulty: InstallFaulty,
) -> None:
    transport = install_faulty()
    rule = transport.add(batch_rule(status, None, index, times=2))
    queue.send(message(order_body()))

    await host.run_until_idle()

    assert rule.fired == 2
    assert queue.stats.deliveries == 1
    assert settlements(queue) == [("complete", True)]
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]


def test_the_retry_after_is_honoured_but_never_past_the_lock_margin() -> None:
    policy = RetryPolicy()
    assert policy.next_delay(1, remaining_s=55, jitter=1.0) == 1.0
    assert policy.next_delay(1, remaining_s=55, jitter=1.0, retry_after_s=7.0) == 7.0
    assert policy.next_delay(4, remaining_s=55, jitter=1.0, retry_after_s=2.0) == 8.0
    # Never past the lock margin (5 s before the lock expires): the delivery then abandons.
    assert policy.next_delay(1, remaining_s=10, jitter=1.0, retry_after_s=30.0) == 5.0
    assert policy.next_delay(1, remaining_s=5, jitter=1.0, retry_after_s=1.0) is None
