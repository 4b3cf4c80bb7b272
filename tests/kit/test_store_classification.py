"""What the kit's Cosmos DB store raises for an answer it classifies, through the real SDK
against the local Cosmos DB server, the answer made at the azure-core transport: the status,
the failing operation of a batch and the wait the service asked for, as the consumer's retry
and its dead-letter description read them.

Mutation run 5, the twelfth session: ``idempotent_consumer.cosmos._store.classify_error``
``_6`` (a batch's failing operation left out of the description), ``_7``, ``_13`` (its
``retryAfterMilliseconds`` dropped), ``_16``, ``_17``, ``_22``-``_25``, ``_27``, ``_33``,
``_39``, ``_45``, ``_47``, ``_48`` (a single request's ``x-ms-retry-after-ms`` never read, not
passed on, or scaled wrong);
``CosmosDocumentStore.commit`` ``_12``, ``_25`` (a create's or a batch's deadline dropped),
``_39``, ``_40`` (a refused batch's charge named ``None`` or never read).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Create, TransientStoreError, Write
from idempotent_consumer.cosmos import CosmosDocumentStore

from local.standins.faults import BATCHES, WRITES, FaultInjectingTransport, FaultKind, FaultRule
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings

DEADLINE_S = 0.3  # the store's operation deadline, scaled down
SLOW_ANSWER_S = 1.5  # longer than the deadline, shorter than the client's read timeout

Charges = list[tuple[str, float]]


@pytest.fixture
async def through_faults(
    app_env: dict[str, str], container: ContainerProxy
) -> AsyncIterator[tuple[CosmosDocumentStore, FaultInjectingTransport, Charges]]:
    transport = FaultInjectingTransport()
    charges: Charges = []
    async with create_client(Settings.from_env(app_env), transport=transport) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        yield (
            CosmosDocumentStore(
                database.get_container_client(container.id),
                lambda operation, charge: charges.append((operation, charge)),
                operation_timeout_s=DEADLINE_S,
            ),
            transport,
            charges,
        )


async def test_a_batch_whose_operation_is_throttled_names_it_and_keeps_its_wait(
    through_faults: tuple[CosmosDocumentStore, FaultInjectingTransport, Charges],
) -> None:
    # A 207: operation 1 answered 429 with its retryAfterMilliseconds, the others 424
    # (learn.microsoft.com/azure/cosmos-db/nosql/transactional-batch); the SDK raises
    # CosmosBatchOperationError and retries nothing. Its charge is the whole batch's.
    store, transport, charges = through_faults
    transport.add(
        FaultRule(
            FaultKind.BATCH_OPERATION, failing_index=1, status=429, retry_after_ms=3000, **BATCHES
        )
    )

    with pytest.raises(TransientStoreError) as raised:
        await store.commit(
            "o-1", [Create({"id": "a", "orderId": "o-1"}), Create({"id": "b", "orderId": "o-1"})]
        )

    assert str(raised.value) == "Cosmos DB answered 429: batch operation 1 failed (the others 424)"
    assert raised.value.retry_after_s == 3.0
    assert charges == [("batch", 1.24)]


async def test_a_create_throttled_past_the_sdks_retries_keeps_the_wait_the_service_asked_for(
    through_faults: tuple[CosmosDocumentStore, FaultInjectingTransport, Charges],
) -> None:
    # Every attempt answered 429 with x-ms-retry-after-ms 10: the SDK retries as its throttling
    # policy says (CLIENT_OPTIONS' retry_total), then raises with the last answer's headers,
    # whose wait the consumer's retry honours (RetryPolicy.next_delay).
    store, transport, _ = through_faults
    rule = transport.add(
        FaultRule(
            FaultKind.STATUS,
            status=429,
            headers={"x-ms-retry-after-ms": "10"},
            times=None,
            **WRITES,
        )
    )

    with pytest.raises(TransientStoreError) as raised:
        await store.commit("o-1", [Create({"id": "a", "orderId": "o-1"})])

    assert str(raised.value).startswith("Cosmos DB answered 429: ")
    assert raised.value.retry_after_s == 0.01
    assert rule.fired > 1  # the SDK's own retries came first


@pytest.mark.parametrize("documents", [1, 2], ids=["create", "batch"])
async def test_a_commit_whose_answer_is_slow_ends_at_the_store_s_deadline_as_transient(
    through_faults: tuple[CosmosDocumentStore, FaultInjectingTransport, Charges],
    documents: int,
) -> None:
    # The request reaches the server and commits; its answer takes longer than the store's
    # operation deadline (the SDK's own timeout is checked only between attempts): cancelled
    # at the deadline, transient, for the redelivery to meet what it wrote.
    store, transport, _ = through_faults
    transport.add(FaultRule(FaultKind.SLOW_RESPONSE, delay_s=SLOW_ANSWER_S, **WRITES))
    writes: list[Write] = [Create({"id": f"d{n}", "orderId": "o-1"}) for n in range(documents)]

    started = time.monotonic()
    with pytest.raises(TransientStoreError, match="deadline"):
        await store.commit("o-1", writes)

    assert time.monotonic() - started < SLOW_ANSWER_S - 0.5  # at the deadline, not the answer
