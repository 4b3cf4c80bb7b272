"""Each operation of the consumer's store ends at ``OPERATION_TIMEOUT_S``, whatever its last
attempt is doing: the SDK's own ``timeout=`` is checked only between attempts, so an attempt
that started just before it, and whose answer is slow, used to run for the client's whole
``read_timeout`` more (35 s for one operation, 80 s for a duplicate, against the 60 s lock).

The operation's budget is scaled down to 1 s (the module's constant, which both the SDK's
``timeout=`` and the adapter's deadline read); the client keeps the deployed 15 s read timeout.
The slow answer is the fault transport's ``SLOW_RESPONSE`` below the real SDK: the request
reaches the local server and commits, its answer takes 3 s (under the read timeout, so aiohttp
would wait for it). Each test fails with the kit's Cosmos store
(``kit/src/idempotent_consumer/cosmos/_store.py``) ``_within_deadline`` awaiting the operation
without its deadline: the create then succeeds after 3 s and the read returns the order after
3 s.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import TransientStoreError
from idempotent_consumer.cosmos import CLIENT_OPTIONS

from local.standins.faults import POINT_READS, WRITES, FaultInjectingTransport, FaultKind, FaultRule
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from tests.state import documents

DEADLINE_S = 1.0
SLOW_ANSWER_S = 3.0  # longer than the deadline, shorter than the client's read timeout
assert DEADLINE_S < SLOW_ANSWER_S < CLIENT_OPTIONS["read_timeout"]


@pytest.fixture
async def store(
    app_env: dict[str, str],
) -> AsyncIterator[tuple[CosmosOrderStore, FaultInjectingTransport]]:
    transport = FaultInjectingTransport(connection_verify=False)
    async with create_client(Settings.from_env(app_env), transport=transport) as client:
        proxy = client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(
            app_env["COSMOS_CONTAINER"]
        )
        yield CosmosOrderStore(proxy, operation_timeout_s=DEADLINE_S), transport


def order(order_id: str) -> dict[str, Any]:
    return {"id": order_id, "orderId": order_id, "type": "order"}


async def test_a_create_whose_answer_is_slow_ends_at_the_deadline_as_transient(
    store: tuple[CosmosOrderStore, FaultInjectingTransport], container: ContainerProxy
) -> None:
    orders, transport = store
    rule = transport.add(FaultRule(FaultKind.SLOW_RESPONSE, delay_s=SLOW_ANSWER_S, **WRITES))

    started = time.monotonic()
    with pytest.raises(TransientStoreError, match="deadline"):
        await orders.create([order("ord-deadline-1")])
    elapsed = time.monotonic() - started

    assert rule.fired == 1
    assert DEADLINE_S <= elapsed < DEADLINE_S + 0.5
    # The write had committed (the ambiguous write): the redelivery's create conflicts.
    assert [d["id"] for d in await documents(container)] == ["ord-deadline-1"]


async def test_a_conflict_read_whose_answer_is_slow_ends_at_the_deadline_as_transient(
    store: tuple[CosmosOrderStore, FaultInjectingTransport], container: ContainerProxy
) -> None:
    orders, transport = store
    await container.create_item(order("ord-deadline-2"))
    rule = transport.add(FaultRule(FaultKind.SLOW_RESPONSE, delay_s=SLOW_ANSWER_S, **POINT_READS))

    started = time.monotonic()
    with pytest.raises(TransientStoreError, match="deadline"):
        await orders.read_order("ord-deadline-2")
    elapsed = time.monotonic() - started

    assert rule.fired == 1
    assert DEADLINE_S <= elapsed < DEADLINE_S + 0.5
