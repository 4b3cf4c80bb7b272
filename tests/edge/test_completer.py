"""The request completer (``complete_requests``, a timer trigger) through Microsoft's worker: a
request whose commit landed but whose message was never sent (the queue refused the send, the
client was answered 503 and never retried) is sent by the completer, once, with the message as
recorded, and its record marked sent (its key's 24 h ttl set); the consumer then records it.
What is still within the edge's in-progress window is left alone, a send the queue refuses
leaves the record for the next run, and every run reports what it found.

The app runs as in the end-to-end tests (tests/edge/test_end_to_end.py): the composition root's
edge and completer on a requests container of the local Cosmos server, its real aio
``ServiceBusSender`` into the queue model (its duplicate detection included), a real HTTP client
against the world's HTTP host. The requests container is created here with the deployed
indexing policy (infra/requests-indexing.json): the local server, as Cosmos DB, refuses the
completer's ordered query without its composite index.

Each test fails on 39e4dd4, which had no completer (no ``complete_requests`` function: an
unsent record stayed unsent for ever and nothing reported it); each one's docstring names the
line it guards, whose removal it was seen failing on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient
from azure.servicebus._pyamqp.error import ErrorCondition
from idempotent_consumer import TransientStoreError, document_timestamp
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock
from local.standins.timer import TimerTriggerEmulator
from ops.init_cosmos import REQUESTS_INDEXING_POLICY
from shared.adapters.cosmos_requests import CosmosUnsentRequests
from shared.adapters.http_in import FUNCTION_KEY_CLIENT
from shared.adapters.servicebus_out import LOCK_WAIT_S, SEND_TIMEOUT_S
from shared.consumer.contract import ORDER_CANCELLED
from shared.edge import OrdersEdge, SendFailed
from shared.edge.completer import (
    MAX_PAGES_PER_RUN,
    MIN_AGE,
    CompleterPolicy,
    Page,
    RequestCompleter,
    RunEnd,
)
from shared.edge.requests import (
    IN_PROGRESS_WINDOW,
    KEY_EXPIRY_S,
    PARTITION_KEY_PATH,
    order_id_for,
    request_id,
)
from shared.telemetry.completer import CompleterTelemetry
from shared.triggers import COMPLETER_PERIOD_S, COMPLETER_SCHEDULE
from tests.edge.conftest import RecordingSender, Stopped, cancel_body, place_body
from tests.edge.test_end_to_end import Answer, call, order_documents
from tests.edge.test_queue_sender import queue_sender_on
from tests.relay.amqp_link import LinkNetwork


async def create_requests_container(app_env: dict[str, str], name: str) -> None:
    """The requests container as infra/app/cosmos.bicep deploys it: ``/orderId``, defaultTtl
    -1, the indexing policy of infra/requests-indexing.json."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = await client.create_database_if_not_exists(app_env["COSMOS_DATABASE"])
        await database.create_container_if_not_exists(
            name,
            partition_key=PartitionKey(path=PARTITION_KEY_PATH),
            indexing_policy=REQUESTS_INDEXING_POLICY,
            default_ttl=-1,
        )


async def delete_container(app_env: dict[str, str], name: str) -> None:
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        await client.get_database_client(app_env["COSMOS_DATABASE"]).delete_container(name)


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with a requests container of the test's own."""
    name = f"requests-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("REQUESTS_CONTAINER", name)
    return {**app_env, "REQUESTS_CONTAINER": name}


class Captured:
    """The completer's telemetry on an in-memory metric reader (the OpenTelemetry SDK's)."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.telemetry = CompleterTelemetry(meter_provider=MeterProvider([self.reader]))

    def points(self, name: str) -> list[NumberDataPoint | HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        found: list[NumberDataPoint | HistogramDataPoint] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "orders.edge.completer"
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(
                            p
                            for p in metric.data.data_points
                            if isinstance(p, NumberDataPoint | HistogramDataPoint)
                        )
        return found

    def total(self, name: str) -> float:
        return sum(getattr(p, "value", 0) for p in self.points(name))

    def runs(self) -> list[tuple[float, float, int, str]]:
        """Per run end: the found sum, the oldest age max, the run count, the end."""
        ages = {_end(p): p for p in self.points("orders.edge.completer.unsent_age")}
        found = {_end(p): p for p in self.points("orders.edge.completer.found")}
        return sorted(
            (
                getattr(found[end], "sum", -1),
                getattr(ages[end], "max", -1),
                getattr(ages[end], "count", -1),
                end,
            )
            for end in ages
        )


def _end(point: NumberDataPoint | HistogramDataPoint) -> str:
    return str((point.attributes or {}).get("orders.edge.completer_end"))


@pytest.fixture
def captured() -> Captured:
    return Captured()


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
    captured: Captured,
) -> AsyncIterator[World]:
    """The stand-in around the app, composed on the manual clock with the test's completer
    telemetry; its requests container created first, with the deployed indexing policy (the
    world keeps a container it finds)."""
    await create_requests_container(app_env, app_env["REQUESTS_CONTAINER"])
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={"REQUESTS_CONTAINER": app_env["REQUESTS_CONTAINER"]},
    ) as started:
        started.compose(completer_telemetry=captured.telemetry)
        yield started
    await delete_container(app_env, app_env["REQUESTS_CONTAINER"])
    assert started.host.stats.errors == [], "consume_order raised"


@pytest.fixture
def completer(world: World) -> TimerTriggerEmulator:
    """The host's timer trigger of ``complete_requests``: ``await completer.tick()``."""
    return world.completer


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def refused_by_the_queue(
    world: World, http: aiohttp.ClientSession, captured: Captured, path: str, body: Any, key: str
) -> Answer:
    """The request under ``key``, while the queue refuses every send (a retryable condition,
    after the SDK's own retries): committed, answered 503, its message never sent. The app is
    composed again on the world's sender afterwards (the queue is back); the client never
    retries."""
    network = LinkNetwork(reject_with=ErrorCondition.InternalError)
    failing = queue_sender_on(network, retry_backoff_factor=0.001)
    world.compose(queue_sender=failing, completer_telemetry=captured.telemetry)
    try:
        answer = await call(http, world, "POST", path, body, key=key)
    finally:
        await failing.close()
    world.compose(completer_telemetry=captured.telemetry)
    assert answer.status == 503
    return answer


async def stored_record(world: World, order_id: str, key: str) -> dict[str, Any]:
    record: dict[str, Any] = await world.requests.read_item(
        request_id(FUNCTION_KEY_CLIENT, key), order_id
    )
    return record


def test_the_completer_is_a_timer_trigger_every_minute(completer: TimerTriggerEmulator) -> None:
    """Its binding as the host reads it: every minute, its schedule kept in the host's storage
    (a restart does not skip a run), never on every scale-out."""
    assert completer.function.name == "complete_requests"
    assert completer.schedule == COMPLETER_SCHEDULE == "0 * * * * *"
    assert COMPLETER_PERIOD_S == 60
    assert completer.function.trigger["useMonitor"] is True
    assert completer.function.trigger["runOnStartup"] is False
    # Past the edge's in-progress window (a retry within it is answered 409) and the minute a
    # committing instance may still spend sending (the queue sender's lock wait and timeout).
    longest_send = timedelta(seconds=LOCK_WAIT_S + SEND_TIMEOUT_S + 1)  # + the asyncio grace
    assert IN_PROGRESS_WINDOW + longest_send <= MIN_AGE


async def test_a_cancellation_the_queue_refused_is_sent_once_by_the_completer_and_recorded(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
    container: ContainerProxy,
) -> None:
    """The silent stop this closes: the cancellation is committed (the head says cancelled, so
    the edge refuses any further change), the client is answered 503 and never retries. The
    completer sends its message as recorded (MessageId ``<order>:v2``, Subject, body bytes),
    marks the record (sent, the key's ttl), and the consumer cancels the order. A second run
    sends nothing. Fails without ``send_then_mark`` in ``RequestCompleter._complete`` (nothing
    sent) and without its mark (``mark_sent`` in ``shared.edge.delivery``: the second run sends
    again)."""
    placed = await call(http, world, "POST", "orders", place_body(), key="place-1")
    order_id = placed.body["orderId"]
    await world.host.run_until_idle()
    await refused_by_the_queue(
        world, http, captured, f"orders/{order_id}/cancellations", cancel_body(), "cancel-1"
    )
    record = await stored_record(world, order_id, "cancel-1")
    assert (record["sent"], record["ttl"]) == (False, -1)
    # The edge refuses what follows a committed cancellation: only the completer can deliver it.
    again = await call(http, world, "POST", f"orders/{order_id}/amendments", place_body(), key="a")
    assert again.status == 409
    clock.advance(MIN_AGE)

    first = await completer.tick()

    assert first.succeeded, first.error
    [message] = [m.message for m in world.queue.peek()]
    assert message.message_id == f"{order_id}:v2"
    assert message.subject == ORDER_CANCELLED
    assert message.body == record["messageBody"].encode()  # the bytes as recorded
    marked = await stored_record(world, order_id, "cancel-1")
    assert (marked["sent"], marked["ttl"]) == (True, KEY_EXPIRY_S)
    await world.host.run_until_idle()
    [order] = await order_documents(container, order_id)
    assert (order["status"], order["orderVersion"]) == ("cancelled", 2)

    clock.advance(timedelta(seconds=COMPLETER_PERIOD_S))
    second = await completer.tick()

    assert second.succeeded, second.error
    assert world.queue.stats.sent == 2  # the place and the cancellation, each once
    assert world.queue.stats.completed == 2 and world.queue.stats.dead_lettered == 0
    assert captured.total("orders.edge.completer.sent") == 1
    # Two runs reported: one found the cancellation 90 s old, the other nothing.
    [drained] = captured.runs()
    assert drained == (1, MIN_AGE.total_seconds(), 2, "drained")


class StopsAtTheSend:
    """The ``MessageSender`` of an instance that stops as it is about to send: nothing after the
    commit runs (the edge's ``_deliver`` catches only ``SendFailed``)."""

    async def send(self, message_id: str, subject: str, body: bytes) -> None:
        raise Stopped("between the commit and the send")


async def test_a_place_whose_instance_stopped_after_its_commit_is_sent_by_the_completer(
    world: World,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The other way a record is left unsent: its instance stopped between the commit and the
    send (the edge's core on the world's requests container, its sender stopping the
    instance), and the client never retried. The completer sends the OrderPlaced (no Subject,
    MessageId the order id) and logs it, the ids quoted. Fails without ``send_then_mark`` in
    ``RequestCompleter._complete``."""
    stopping = OrdersEdge(CosmosDocumentStore(world.requests), StopsAtTheSend(), clock)
    with pytest.raises(Stopped):
        await stopping.place("client-b", "key-stopped", place_body())
    order_id = order_id_for("client-b", "key-stopped")
    clock.advance(MIN_AGE)

    with caplog.at_level(logging.INFO, logger="orders.edge.completer"):
        result = await completer.tick()

    assert result.succeeded, result.error
    [message] = [m.message for m in world.queue.peek()]
    assert (message.message_id, message.subject) == (order_id, None)  # the OrderPlaced contract
    record = await world.requests.read_item(request_id("client-b", "key-stopped"), order_id)
    assert (record["sent"], record["ttl"]) == (True, KEY_EXPIRY_S)
    [sent_log] = [r for r in caplog.records if r.levelno == logging.INFO]
    assert sent_log.getMessage().startswith(f"message {order_id!r} of order {order_id!r} sent")
    [run_log] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert run_log.__dict__["unsent_requests"] == 1
    assert run_log.__dict__["completer_end"] == "drained"


async def test_a_record_within_its_window_is_left_to_its_instance(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
) -> None:
    """A record younger than ``MIN_AGE`` may still be sent by the instance that committed it:
    the completer leaves it, then sends it once it is due. Fails with the policy's age dropped
    (``CompleterPolicy.cutoff`` returning now: the first run sends it)."""
    await refused_by_the_queue(world, http, captured, "orders", place_body(), "place-2")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "place-2")
    clock.advance(MIN_AGE - timedelta(seconds=1))

    early = await completer.tick()

    assert early.succeeded, early.error
    assert world.queue.peek() == []
    assert (await stored_record(world, order_id, "place-2"))["sent"] is False

    clock.advance(timedelta(seconds=1))
    due = await completer.tick()

    assert due.succeeded, due.error
    assert [m.message.message_id for m in world.queue.peek()] == [order_id]
    assert (await stored_record(world, order_id, "place-2"))["sent"] is True
    assert captured.runs() == [(1, MIN_AGE.total_seconds(), 2, "drained")]


async def test_a_send_the_queue_refuses_ends_the_run_and_leaves_the_records_for_the_next(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
) -> None:
    """The queue still refuses when the completer runs: the run fails (the host logs it) at
    its first send, the records stay unsent (ttl -1), the failure is counted and the run
    reported ``failed`` with both records found; the next run, the queue back, sends both.
    Fails with the run going on past the refused send (two failures counted: each further
    send would wait its own timeout on the same bad link), and with ``SendFailed`` taken as
    sent (the run succeeds)."""
    await refused_by_the_queue(world, http, captured, "orders", place_body(), "place-3")
    clock.advance(timedelta(seconds=1))
    await refused_by_the_queue(world, http, captured, "orders", place_body(), "place-3b")
    order_ids = [order_id_for(FUNCTION_KEY_CLIENT, key) for key in ("place-3", "place-3b")]
    clock.advance(MIN_AGE + timedelta(seconds=30))
    network = LinkNetwork(reject_with=ErrorCondition.InternalError)
    failing = queue_sender_on(network, retry_backoff_factor=0.001)
    world.compose(queue_sender=failing, completer_telemetry=captured.telemetry)

    refused = await completer.tick()

    await failing.close()
    assert not refused.succeeded
    assert str(refused.error).startswith("CompletionIncomplete")
    assert world.queue.peek() == []
    for order_id, key in zip(order_ids, ("place-3", "place-3b"), strict=True):
        assert (await stored_record(world, order_id, key))["ttl"] == -1  # kept, unsent
    [failed] = captured.points("orders.edge.completer.failed")
    assert (getattr(failed, "value", None), failed.attributes) == (
        1,
        {"orders.error_type": "ServiceBusError"},
    )

    world.compose(completer_telemetry=captured.telemetry)  # the queue is back
    clock.advance(timedelta(seconds=COMPLETER_PERIOD_S))
    retried = await completer.tick()

    assert retried.succeeded, retried.error
    assert [m.message.message_id for m in world.queue.peek()] == order_ids  # oldest first
    for order_id, key in zip(order_ids, ("place-3", "place-3b"), strict=True):
        assert (await stored_record(world, order_id, key))["sent"] is True
    assert captured.runs() == [
        (2, MIN_AGE.total_seconds() + 31, 1, "failed"),
        (2, MIN_AGE.total_seconds() + 31 + COMPLETER_PERIOD_S, 1, "drained"),
    ]


async def test_an_unreadable_record_is_reported_and_does_not_hold_back_the_next(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
) -> None:
    """An older record the completer cannot send (here, not of the edge's shape: no message
    body) is counted failed and fails the run, and the younger one behind it is sent all the
    same. Fails with the run stopping at the first record it cannot send."""
    await world.requests.create_item(
        {
            "id": "request:client-x:broken",
            "orderId": "ord-broken",
            "type": "edge-request",
            "sent": False,
            "startedAt": document_timestamp(clock.now() - timedelta(hours=1)),
        }
    )
    await refused_by_the_queue(world, http, captured, "orders", place_body(), "place-4")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "place-4")
    clock.advance(MIN_AGE)

    result = await completer.tick()

    assert not result.succeeded and str(result.error).startswith("CompletionIncomplete")
    assert [m.message.message_id for m in world.queue.peek()] == [order_id]
    assert captured.total("orders.edge.completer.sent") == 1
    assert captured.total("orders.edge.completer.failed") == 1
    assert captured.runs() == [(2, 3600 + MIN_AGE.total_seconds(), 1, "failed")]


async def test_a_client_retrying_while_the_completer_runs_gets_one_message_through(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    completer: TimerTriggerEmulator,
    captured: Captured,
) -> None:
    """The client retries the key at the moment the completer runs: both may send the same
    MessageId; the queue accepts it once (duplicate detection) and the client is answered its
    first response. Fails with the completer sending another MessageId than the record's."""
    await refused_by_the_queue(world, http, captured, "orders", place_body(), "place-5")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "place-5")
    clock.advance(MIN_AGE)

    ran, retried = await asyncio.gather(
        completer.tick(), call(http, world, "POST", "orders", place_body(), key="place-5")
    )

    assert ran.succeeded, ran.error
    assert retried.status == 201 and retried.body["orderId"] == order_id
    assert world.queue.stats.accepted == 1
    assert [m.message.message_id for m in world.queue.peek()] == [order_id]
    assert (await stored_record(world, order_id, "place-5"))["sent"] is True


async def test_a_bad_setting_fails_the_run_naming_it(
    world: World, completer: TimerTriggerEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A completer that cannot be built fails its run with a critical log naming the setting
    (and then reports nothing: the silent alert's case). Fails without the critical log of
    ``Runtime.complete_requests``."""
    world.compose(env={**world.env, "REQUESTS_CONTAINER": "not/a/name"})

    with caplog.at_level("CRITICAL", logger="orders.edge"):
        result = await completer.tick()

    assert not result.succeeded
    assert str(result.error).startswith("ConfigurationError: REQUESTS_CONTAINER")
    [critical] = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert critical.__dict__["setting"] == "REQUESTS_CONTAINER"


# ---- the store's query, held to the rule ---------------------------------------------------------

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def record_document(name: str, age_s: float, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"request:c:{name}",
        "orderId": f"ord-{name}",
        "type": "edge-request",
        "sent": False,
        "startedAt": document_timestamp(NOW - timedelta(seconds=age_s)),
        **fields,
    }


CANDIDATES = [
    record_document("old-unsent", 3600),
    record_document("just-due", MIN_AGE.total_seconds()),  # exactly the minimum age: due
    record_document("young-unsent", MIN_AGE.total_seconds() - 0.001),
    record_document("old-sent", 3600, sent=True),
    record_document("sent-unknown", 3600, sent=None),
    record_document("not-a-request", 3600, type="edge-head"),
    {"id": "head", "orderId": "ord-old-unsent", "type": "edge-head", "orderVersion": 1},
    record_document("oldest-unsent", 86400),
]


@pytest.fixture
async def requests_container(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    name = app_env["REQUESTS_CONTAINER"]
    await create_requests_container(app_env, name)
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        yield client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(name)
    await delete_container(app_env, name)


@pytest.mark.parametrize("page_size", [100, 2], ids=["one page", "more than a page"])
async def test_the_store_s_query_finds_exactly_what_the_rule_calls_unsent(
    requests_container: ContainerProxy, page_size: int
) -> None:
    """Against the local Cosmos server, with the deployed indexing policy. Fails on the policy
    of 39e4dd4 (nothing indexed: the server refuses the ORDER BY of several fields, as Cosmos
    DB does) and with the policy's age dropped (``cutoff`` returning now)."""
    for document in CANDIDATES:
        await requests_container.create_item(document)
    policy = CompleterPolicy(page_size=page_size)
    expected = {d["id"] for d in CANDIDATES if policy.is_unsent(d, NOW)}
    assert expected == {"request:c:old-unsent", "request:c:just-due", "request:c:oldest-unsent"}

    scanner = CosmosUnsentRequests(requests_container)
    pages = [page async for page in scanner.unsent(policy.cutoff(NOW), page_size)]

    found = [d["id"] for page in pages for d in page]
    assert sorted(found) == sorted(expected)
    assert [len(page) for page in pages] == ([3] if page_size == 100 else [2, 1])
    assert found == ["request:c:oldest-unsent", "request:c:old-unsent", "request:c:just-due"]


# ---- the core over its ports' doubles: the page limit, a failed mark ---------------------------


class ListedUnsent:
    """The ``UnsentRequests`` port over the in-memory store's documents: the adapter's query
    (held to the rule above) as a filter and a sort, in pages."""

    def __init__(self, store: InMemoryDocumentStore) -> None:
        self.store = store

    async def unsent(self, started_at_or_before: datetime, page_size: int) -> AsyncIterator[Page]:
        cutoff = document_timestamp(started_at_or_before)
        matching = sorted(
            (
                dict(d)
                for d in self.store.documents.values()
                if d.get("type") == "edge-request"
                and d.get("sent") is False
                and d["startedAt"] <= cutoff
            ),
            key=lambda d: str(d["startedAt"]),
        )
        for start in range(0, len(matching), page_size):
            yield matching[start : start + page_size]


async def unsent_places(store: InMemoryDocumentStore, clock: ManualClock, count: int) -> list[str]:
    """``count`` places committed a second apart whose sends the queue refused: their order
    ids, oldest first."""
    refusing = RecordingSender(fail_next=[SendFailed("the queue is down")] * count)
    edge = OrdersEdge(store, refusing, clock)
    ids = []
    for index in range(count):
        answer = await edge.place("client-c", f"key-{index:03}", place_body())
        assert answer.status == 503
        ids.append(order_id_for("client-c", f"key-{index:03}"))
        clock.advance(timedelta(seconds=1))
    return ids


async def test_a_run_stops_at_its_page_limit_and_the_next_run_takes_the_rest(
    memory_store: InMemoryDocumentStore, clock: ManualClock, captured: Captured
) -> None:
    """Pages of 2: a run sends at most ``MAX_PAGES_PER_RUN`` pages (20 records), oldest first,
    and says it stopped at its limit; the next run sends the 5 left and says it drained. Fails
    with the page limit dropped (one run sends all 25)."""
    ids = await unsent_places(memory_store, clock, 25)
    clock.advance(MIN_AGE)
    sender = RecordingSender()
    completer = RequestCompleter(
        ListedUnsent(memory_store),
        memory_store,
        sender,
        captured.telemetry,
        clock=clock,
        policy=CompleterPolicy(page_size=2),
    )

    first = await completer.run()
    second = await completer.run()

    assert (first.end, second.end) == (RunEnd.PAGE_LIMIT, RunEnd.DRAINED)
    limit = 2 * MAX_PAGES_PER_RUN
    assert sender.message_ids() == ids  # each once, oldest first
    assert (first.sent, second.sent) == (ids[:limit], ids[limit:])
    assert (first.found, second.found) == (limit, 5)


async def test_a_mark_that_fails_is_logged_and_the_next_run_sends_the_same_message_again(
    memory_store: InMemoryDocumentStore,
    clock: ManualClock,
    captured: Captured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The message is sent but its sent mark is refused: the run succeeds (the request is
    done), a warning says so, and the next run sends the same MessageId once more (the queue's
    duplicate detection and the consumer absorb it) and marks it. Fails with the mark's error
    raised by ``send_then_mark`` (the run fails)."""
    [order_id] = await unsent_places(memory_store, clock, 1)
    clock.advance(MIN_AGE)
    memory_store.fail_next = [TransientStoreError("the store is throttling")]
    sender = RecordingSender()
    completer = RequestCompleter(
        ListedUnsent(memory_store), memory_store, sender, captured.telemetry, clock=clock
    )

    with caplog.at_level(logging.WARNING, logger="orders.edge.completer"):
        first = await completer.run()
    second = await completer.run()

    assert (first.end, second.end) == (RunEnd.DRAINED, RunEnd.DRAINED)
    assert sender.message_ids() == [order_id, order_id]
    record = await memory_store.read(order_id, request_id("client-c", "key-000"))
    assert record is not None and (record["sent"], record["ttl"]) == (True, KEY_EXPIRY_S)
    assert any("sent mark" in r.getMessage() for r in caplog.records)
