"""The Cosmos DB client settings (``shared.adapters.cosmos_orders``: ``OPERATION_TIMEOUT_S``,
``CLIENT_OPTIONS``): the relation that matters, held against the queue's lock as
infra/messaging.json deploys it, and each setting's effect where the real azure-cosmos SDK hands
a request to the azure-core transport (a recording transport below the SDK; nothing mocked).

What each test kills (``make mutation``): the lock relation, ``OPERATION_TIMEOUT_S`` 90 and the
timeouts or backoff cap raised; the Prefer header, ``no_response_on_write`` off; the bounded
requests, the ``timeout=`` of the create, the batch, the conflict read or either of the
lifecycle's commits removed; the throttling
burst, ``retry_total`` 0 (the SDK then falls back to its default of 9 retries,
azure/cosmos/aio/_cosmos_client.py:106-109) or any other retry count.

Not exercised through the SDK: the backoff cap. The SDK stops retrying 429s once the waits it
made add up to ``retry_backoff_max`` (azure/cosmos/_resource_throttle_retry_policy.py:56-58), so
showing it takes at least that long in real time; the relation test holds it instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Create, RetryPolicy
from idempotent_consumer.cosmos import CLIENT_OPTIONS, OPERATION_TIMEOUT_S
from idempotent_consumer.servicebus import SETTLEMENT_TIMEOUT_S

from local.standins.broker import PeekLockQueue, QueueSettings
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from tests.conftest import ComposeApp
from tests.integration.consumer_logs import consumer_records, retried_attempts
from tests.orders import message, order_body
from tests.state import documents, settlements

# The lock every delivery gets, as deployed (infra/messaging.json "lockDuration").
LOCK_S = QueueSettings.from_messaging_file().lock_duration.total_seconds()
# The consumer abandons this long before the lock expires (shared.consumer.core.RetryPolicy).
LOCK_MARGIN_S = RetryPolicy().lock_margin_s


def test_create_conflict_read_and_settlement_fit_inside_the_lock() -> None:
    # A duplicate costs two sequential operations, each bounded by OPERATION_TIMEOUT_S across
    # the SDK's own retries, then the settlement, bounded by SETTLEMENT_TIMEOUT_S: all of it
    # must end before the consumer's lock margin, even before the host renews the lock.
    assert 2 * OPERATION_TIMEOUT_S + SETTLEMENT_TIMEOUT_S <= LOCK_S - LOCK_MARGIN_S


def test_one_attempt_and_the_throttling_waits_fit_inside_one_operation() -> None:
    # A request that connects slowly and then waits for its answer, or the SDK's cumulative
    # 429 waits, must not be what consumes an operation's whole budget.
    one_attempt = CLIENT_OPTIONS["connection_timeout"] + CLIENT_OPTIONS["read_timeout"]
    assert one_attempt <= OPERATION_TIMEOUT_S
    assert CLIENT_OPTIONS["retry_backoff_max"] < OPERATION_TIMEOUT_S


def test_the_worst_case_of_create_conflict_read_and_settlement_fits_inside_the_lock() -> None:
    # The SDK checks the absolute timeout before each attempt (azure/cosmos/aio/
    # _retry_utility_async.py:133-136 and 276-279) and caps an attempt's connect timeout by it
    # (azure/cosmos/_retry_utility.py:386-398), but an attempt's read timeout is always the
    # client's (azure/cosmos/aio/_asynchronous_request.py:73-76): an attempt started just before
    # OPERATION_TIMEOUT_S could wait read_timeout more (35 s). The store's own deadline ends
    # every operation at OPERATION_TIMEOUT_S whatever its attempt does
    # (tests/integration/test_operation_deadline.py), so that is the worst case of one.
    worst_operation = OPERATION_TIMEOUT_S
    assert 2 * worst_operation + SETTLEMENT_TIMEOUT_S <= LOCK_S - LOCK_MARGIN_S


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    connection_timeout: float | None
    read_timeout: float | None

    @property
    def is_write(self) -> bool:  # create_item and transactional batches
        return self.method == "POST" and self.path.rstrip("/").endswith("/docs")

    @property
    def is_point_read(self) -> bool:
        return self.method == "GET" and "/docs/" in self.path


class RecordingTransport(FaultInjectingTransport):
    """What the SDK hands the azure-core transport, per request: headers and the per-request
    timeouts the SDK computed (``connection_timeout`` is capped by what is left of the
    operation's absolute timeout, azure/cosmos/_retry_utility.py:386-398)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[SeenRequest] = []

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        self.seen.append(
            SeenRequest(
                request.method.upper(),
                request.url.split("?", 1)[0],
                dict(request.headers),
                kwargs.get("connection_timeout"),
                kwargs.get("read_timeout"),
            )
        )
        return await super().send(request, **kwargs)


async def duplicate_delivered(host: LocalFunctionsHost, queue: PeekLockQueue) -> None:
    """An order, then the same order again after the duplicate-detection window: a create,
    then a conflicting create and its conflict read."""
    queue.send(message(order_body()))
    await host.run_until_idle()
    queue.clock.advance(queue.settings.duplicate_detection_window)  # type: ignore[attr-defined]
    queue.send(message(order_body()))
    await host.run_until_idle()


async def test_a_write_asks_cosmos_db_for_no_response_body(
    host: LocalFunctionsHost, queue: PeekLockQueue, compose_app: ComposeApp
) -> None:
    # no_response_on_write: the SDK sends "Prefer: return=minimal" on every document write
    # (azure/cosmos/_base.py:451-458); the consumer never reads a create's body.
    transport = RecordingTransport(connection_verify=False)
    compose_app(transport=transport)

    await duplicate_delivered(host, queue)

    writes = [seen for seen in transport.seen if seen.is_write]
    assert len(writes) == 2
    assert [seen.headers.get("Prefer") for seen in writes] == ["return=minimal"] * 2
    assert settlements(queue) == [("complete", True)] * 2


async def test_the_create_and_the_conflict_read_are_each_bounded_by_the_operation_timeout(
    host: LocalFunctionsHost, queue: PeekLockQueue, compose_app: ComposeApp
) -> None:
    # With a per-request connect timeout longer than OPERATION_TIMEOUT_S, what reaches the
    # transport is the operation's absolute timeout (what is left of it): proof that the
    # operation carries one. Without ``timeout=``, the request would carry the 30 s.
    slow_connect = OPERATION_TIMEOUT_S + 10
    transport = RecordingTransport(connection_verify=False)
    compose_app(transport=transport, connection_timeout=slow_connect)

    await duplicate_delivered(host, queue)

    operations = [seen for seen in transport.seen if seen.is_write or seen.is_point_read]
    assert [seen.method for seen in operations] == ["POST", "POST", "GET"]
    for seen in operations:
        assert seen.connection_timeout is not None
        assert 0 < seen.connection_timeout <= OPERATION_TIMEOUT_S
        assert seen.read_timeout == CLIENT_OPTIONS["read_timeout"]
    assert settlements(queue) == [("complete", True)] * 2


async def test_the_lifecycle_s_commits_are_bounded_by_the_operation_timeout(
    app_env: dict[str, str], container: ContainerProxy
) -> None:
    # As above, for ``CosmosOrderStore.commit``'s transactional batch (an order's change: its
    # marker, the patch, its event) and its single create, on the store directly.
    transport = RecordingTransport(connection_verify=False)
    settings = Settings.from_env(app_env)
    async with create_client(
        settings, transport=transport, connection_timeout=OPERATION_TIMEOUT_S + 10
    ) as client:
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        store = CosmosOrderStore(proxy)
        await store.commit(
            "ord-t1",
            [
                Create({"id": "ord-t1:m-1", "orderId": "ord-t1", "type": "inbox"}),
                Create({"id": "ord-t1", "orderId": "ord-t1", "type": "order"}),
            ],
        )
        # A commit of one create is a create_item: bounded the same way.
        await store.commit("ord-t1", [Create({"id": "ord-t1:m-2", "orderId": "ord-t1"})])

    writes = [seen for seen in transport.seen if seen.is_write]
    assert len(writes) == 2
    for seen in writes:
        assert seen.connection_timeout is not None
        assert 0 < seen.connection_timeout <= OPERATION_TIMEOUT_S
    assert len(await documents(container)) == 3


async def test_throttling_beyond_the_sdk_retries_reaches_the_consumer_once(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    compose_app: ComposeApp,
) -> None:
    # retry_total: the SDK answers a 429 itself retry_total times (retry-after 1 ms), then gives
    # the 429 to the consumer, which retries in-delivery: one consumer retry, one order.
    retries = CLIENT_OPTIONS["retry_total"]
    transport = FaultInjectingTransport(connection_verify=False)
    compose_app(transport=transport)
    rule = transport.add(
        FaultRule(
            FaultKind.STATUS,
            status=429,
            headers={"x-ms-retry-after-ms": "1"},
            times=retries + 1,
            **WRITES,
        )
    )
    queue.send(message(order_body()))

    with consumer_records() as records:
        await host.run_until_idle()

    assert rule.fired == retries + 1
    assert retried_attempts(records) == ["transient"]
    assert settlements(queue) == [("complete", True)]
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]
