"""The orders API end to end, as a client and an operator see it: a real HTTP client (aiohttp)
against the world's HTTP host and Microsoft's worker running the app's HTTP functions (the
composition root's edge on a requests container in the local Cosmos server, its real aio
``ServiceBusSender`` into the queue model), then the world's queue host running
``consume_order`` into the orders container, and GET reading what the consumer recorded.

What each test checks is what a user would: statuses, Location and ETag on the wire, the
messages on the queue (MessageId, Subject, content type, body), the documents in Cosmos DB."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from azure.servicebus._pyamqp.error import ErrorCondition
from multidict import CIMultiDict
from yarl import URL

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock, PeekedMessage
from local.standins.http_host import FUNCTIONS_KEY_HEADER
from shared.adapters.http_in import FUNCTION_KEY_CLIENT, MAX_BODY_BYTES, PRINCIPAL_HEADER
from shared.consumer.contract import ORDER_AMENDED, ORDER_CANCELLED
from shared.edge.requests import order_id_for, request_id
from shared.edge.responses import PROBLEM_JSON, ProblemType
from tests.edge.conftest import PAST_THE_WINDOW, amend_body, cancel_body, place_body
from tests.edge.test_queue_sender import queue_sender_on
from tests.relay.amqp_link import LinkNetwork

JSON = "application/json"


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with a requests container of the test's own."""
    name = f"requests-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("REQUESTS_CONTAINER", name)
    return {**app_env, "REQUESTS_CONTAINER": name}


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
) -> AsyncIterator[World]:
    """The stand-in around the app, composed on the manual clock, its queue sender the world's."""
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={"REQUESTS_CONTAINER": app_env["REQUESTS_CONTAINER"]},
    ) as started:
        started.compose()
        yield started
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        await database.delete_container(app_env["REQUESTS_CONTAINER"])
    assert started.host.stats.errors == [], "consume_order raised"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


class Answer:
    """A response as the client read it (header names without case, as HTTP has them)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: Any) -> None:
        self.status, self.headers, self.body = status, CIMultiDict(headers), body


async def call(
    http: aiohttp.ClientSession,
    world: World,
    method: str,
    path: str,
    body: Any = None,
    *,
    key: str | None = None,
    if_match: str | None = None,
    content_type: str | None = JSON,
    function_key: bool = True,
    raw: bytes | None = None,
) -> Answer:
    headers: dict[str, str] = {}
    if function_key:
        headers[FUNCTIONS_KEY_HEADER] = world.function_key
    if key is not None:
        headers["Idempotency-Key"] = f'"{key}"'  # an RFC 8941 String
    if if_match is not None:
        headers["If-Match"] = if_match
    if content_type is not None:
        headers["Content-Type"] = content_type
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    url = world.http.function_url(path)
    async with http.request(method, url, data=data, headers=headers) as response:
        text = await response.read()
        parsed = json.loads(text) if text else None
        return Answer(response.status, response.headers, parsed)


def on_queue(world: World) -> list[PeekedMessage]:
    return world.queue.peek()


async def order_documents(container: ContainerProxy, order_id: str) -> list[dict[str, Any]]:
    query = "SELECT * FROM c WHERE c.type = 'order' AND c.orderId = @id"
    return [
        item
        async for item in container.query_items(
            query, parameters=[{"name": "@id", "value": order_id}], partition_key=order_id
        )
    ]


async def test_a_place_is_201_one_message_and_after_the_consumer_get_shows_the_order(
    world: World, http: aiohttp.ClientSession, container: ContainerProxy, clock: ManualClock
) -> None:
    placed = await call(http, world, "POST", "orders", place_body(), key="key-1")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "key-1")

    assert placed.status == 201
    assert placed.headers["Location"] == f"/api/orders/{order_id}"
    assert placed.headers["ETag"] == '"1"'
    assert placed.headers["Content-Type"] == JSON
    assert placed.body == {"orderId": order_id, "orderVersion": 1, "status": "placed"}
    [message] = on_queue(world)
    assert message.message.message_id == order_id  # the OrderPlaced contract
    assert message.message.subject is None  # no Subject: OrderPlaced (the contract)
    assert message.message.content_type == JSON
    sent = json.loads(message.message.body)
    assert sent["orderId"] == order_id and sent["lines"] == place_body()["lines"]
    stored = await world.requests.read_item(request_id(FUNCTION_KEY_CLIENT, "key-1"), order_id)
    assert stored["messageBody"].encode() == message.message.body  # the bytes as stored
    # The world's requests container is the edge's: records expire by their own ttl only.
    assert (await world.requests.read())["defaultTtl"] == -1

    # Before the consumer: the order is not recorded yet.
    assert (await call(http, world, "GET", f"orders/{order_id}")).status == 404
    await world.host.run_until_idle()
    # Following the Location the place answered: the GET route on the host, as a client would.
    async with http.get(
        URL(world.http_url).join(URL(placed.headers["Location"])),
        headers={FUNCTIONS_KEY_HEADER: world.function_key},
    ) as followed:
        assert followed.status == 200
        assert followed.headers["ETag"] == '"1"'
    shown = await call(http, world, "GET", f"orders/{order_id}")

    assert shown.status == 200
    assert shown.headers["ETag"] == '"1"'
    assert shown.body["status"] == "accepted"
    assert shown.body["orderVersion"] == 1
    assert shown.body["lines"] == place_body()["lines"]
    assert "requestHash" not in shown.body  # the consumer's bookkeeping is not shown
    assert len(await order_documents(container, order_id)) == 1


async def test_a_retry_after_a_lost_response_is_the_same_answer_and_one_order(
    world: World, http: aiohttp.ClientSession, container: ContainerProxy, clock: ManualClock
) -> None:
    first = await call(http, world, "POST", "orders", place_body(), key="key-2")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "key-2")
    # The client never saw the answer and retries: the same answer, nothing new sent.
    retried = await call(http, world, "POST", "orders", place_body(), key="key-2")

    assert (retried.status, retried.headers["ETag"], retried.body) == (
        first.status,
        first.headers["ETag"],
        first.body,
    )
    assert retried.headers["Location"] == first.headers["Location"]
    assert [m.message.message_id for m in on_queue(world)] == [order_id]

    # The instance that took the first stopped after the send, before its sent mark: a later
    # retry sends the same message again, and the queue's duplicate detection drops the copy.
    record_id = request_id(FUNCTION_KEY_CLIENT, "key-2")
    record = await world.requests.read_item(record_id, order_id)
    await world.requests.replace_item(record_id, {**record, "sent": False})
    clock.advance(PAST_THE_WINDOW)
    again = await call(http, world, "POST", "orders", place_body(), key="key-2")

    assert (again.status, again.body) == (first.status, first.body)
    assert world.queue.stats.dropped_duplicates == 1
    assert [m.message.message_id for m in on_queue(world)] == [order_id]
    await world.host.run_until_idle()
    assert len(await order_documents(container, order_id)) == 1
    assert world.queue.stats.completed == 1 and world.queue.stats.dead_lettered == 0


async def test_an_amendment_then_a_cancellation_are_versions_2_and_3_and_the_consumer_shows_them(
    world: World, http: aiohttp.ClientSession, container: ContainerProxy
) -> None:
    placed = await call(http, world, "POST", "orders", place_body(), key="key-3")
    order_id = placed.body["orderId"]
    amended = await call(
        http,
        world,
        "POST",
        f"orders/{order_id}/amendments",
        amend_body(quantity=7),
        key="amend-1",
        if_match='"1"',
    )

    assert amended.status == 200
    assert amended.headers["ETag"] == '"2"'
    assert amended.headers["Location"] == f"/api/orders/{order_id}"
    assert [(m.message.message_id, m.message.subject) for m in on_queue(world)] == [
        (order_id, None),
        (f"{order_id}:v2", ORDER_AMENDED),
    ]
    await world.host.run_until_idle()
    shown = await call(http, world, "GET", f"orders/{order_id}")
    assert shown.headers["ETag"] == '"2"' and shown.body["lines"][0]["quantity"] == 7

    cancelled = await call(
        http,
        world,
        "POST",
        f"orders/{order_id}/cancellations",
        cancel_body(),
        key="cancel-1",
        if_match=shown.headers["ETag"],
    )

    assert cancelled.status == 200 and cancelled.headers["ETag"] == '"3"'
    subjects = [(m.message.message_id, m.message.subject) for m in on_queue(world)]
    assert subjects[-1] == (f"{order_id}:v3", ORDER_CANCELLED)
    await world.host.run_until_idle()
    shown = await call(http, world, "GET", f"orders/{order_id}")
    assert shown.status == 200
    assert shown.headers["ETag"] == '"3"'
    assert shown.body["status"] == "cancelled"
    [order] = await order_documents(container, order_id)
    assert order["orderVersion"] == 3 and order["lastMessageId"] == f"{order_id}:v3"
    assert world.queue.stats.completed == 3 and world.queue.stats.dead_lettered == 0


async def test_a_stale_if_match_is_412_and_sends_nothing(
    world: World, http: aiohttp.ClientSession
) -> None:
    placed = await call(http, world, "POST", "orders", place_body(), key="key-4")
    order_id = placed.body["orderId"]
    await call(
        http, world, "POST", f"orders/{order_id}/amendments", amend_body(), key="a-1"
    )  # now at 2

    stale = await call(
        http,
        world,
        "POST",
        f"orders/{order_id}/amendments",
        amend_body(quantity=9),
        key="a-2",
        if_match='"1"',
    )

    assert stale.status == 412
    assert stale.headers["Content-Type"] == PROBLEM_JSON
    assert stale.headers["ETag"] == '"2"'
    assert stale.body["type"] == ProblemType.VERSION_MISMATCH
    assert len(on_queue(world)) == 2  # the place and the first amendment only


@pytest.mark.parametrize(
    ("case", "status", "problem"),
    [
        ("no-idempotency-key", 400, ProblemType.IDEMPOTENCY_KEY),
        ("unquoted-idempotency-key", 400, ProblemType.IDEMPOTENCY_KEY),
        ("no-function-key", 401, None),
        ("text-plain", 415, ProblemType.UNSUPPORTED_MEDIA_TYPE),
        ("latin-1", 415, ProblemType.UNSUPPORTED_MEDIA_TYPE),
        ("too-large", 413, ProblemType.BODY_TOO_LARGE),
        ("not-json", 400, ProblemType.INVALID_ORDER),
    ],
)
async def test_a_refused_request_writes_nothing_and_sends_nothing(
    world: World, http: aiohttp.ClientSession, case: str, status: int, problem: str | None
) -> None:
    headers = {FUNCTIONS_KEY_HEADER: world.function_key, "Content-Type": JSON}
    headers["Idempotency-Key"] = '"key-5"'
    data = json.dumps(place_body()).encode()
    if case == "no-idempotency-key":
        del headers["Idempotency-Key"]
    elif case == "unquoted-idempotency-key":
        headers["Idempotency-Key"] = "key-5"  # a Token, not the String the draft requires
    elif case == "no-function-key":
        del headers[FUNCTIONS_KEY_HEADER]
    elif case == "text-plain":
        headers["Content-Type"] = "text/plain"
    elif case == "latin-1":
        headers["Content-Type"] = "application/json; charset=iso-8859-1"
    elif case == "too-large":
        data = json.dumps({**place_body(), "pad": "x" * MAX_BODY_BYTES}).encode()
    elif case == "not-json":
        data = b'{"customerId": '

    url = world.http.function_url("orders")
    async with http.post(url, data=data, headers=headers) as response:
        text = await response.read()
        answer = Answer(response.status, response.headers, json.loads(text or b"null"))

    assert answer.status == status
    if problem is not None:
        assert answer.headers["Content-Type"] == PROBLEM_JSON
        assert answer.body["type"] == problem and answer.body["status"] == status
    assert on_queue(world) == []
    assert [item async for item in world.requests.read_all_items()] == []


async def test_a_send_the_queue_refused_for_now_is_503_and_a_retry_of_the_key_sends_it(
    world: World, http: aiohttp.ClientSession, clock: ManualClock
) -> None:
    # The queue rejects every send with a retryable condition (after the SDK's own retries).
    network = LinkNetwork(reject_with=ErrorCondition.InternalError)
    failing = queue_sender_on(network, retry_backoff_factor=0.001)
    world.compose(queue_sender=failing)

    refused = await call(http, world, "POST", "orders", place_body(), key="key-6")
    order_id = order_id_for(FUNCTION_KEY_CLIENT, "key-6")

    assert refused.status == 503
    assert refused.headers["Content-Type"] == PROBLEM_JSON
    assert int(refused.headers["Retry-After"]) >= 1
    assert on_queue(world) == []
    record = await world.requests.read_item(request_id(FUNCTION_KEY_CLIENT, "key-6"), order_id)
    assert record["sent"] is False and record["ttl"] == -1  # the intent kept, never expiring

    world.compose()  # the queue is back (the world's sender)
    clock.advance(PAST_THE_WINDOW)
    retried = await call(http, world, "POST", "orders", place_body(), key="key-6")

    assert retried.status == 201 and retried.headers["Location"] == f"/api/orders/{order_id}"
    assert [m.message.message_id for m in on_queue(world)] == [order_id]
    await failing.close()


async def test_each_authenticated_principal_is_a_client_of_its_own(
    world: World, http: aiohttp.ClientSession
) -> None:
    """With App Service authentication on, the platform sets the principal's id: the same key
    from two principals is two orders, and one principal's order is 404 to the other."""

    async def place(principal: str) -> Answer:
        headers = {
            FUNCTIONS_KEY_HEADER: world.function_key,
            "Content-Type": JSON,
            "Idempotency-Key": '"same-key"',
            PRINCIPAL_HEADER: principal,
        }
        url = world.http.function_url("orders")
        async with http.post(url, data=json.dumps(place_body()), headers=headers) as response:
            return Answer(response.status, response.headers, await response.json())

    alice, bob = await place("alice-oid"), await place("bob-oid")

    assert alice.status == bob.status == 201
    assert alice.body["orderId"] == order_id_for("principal:alice-oid", "same-key")
    assert alice.body["orderId"] != bob.body["orderId"]
    await world.host.run_until_idle()
    headers = {FUNCTIONS_KEY_HEADER: world.function_key, PRINCIPAL_HEADER: "bob-oid"}
    url = world.http.function_url(f"orders/{alice.body['orderId']}")
    async with http.get(url, headers=headers) as response:
        assert response.status == 404
    headers[PRINCIPAL_HEADER] = "alice-oid"
    async with http.get(url, headers=headers) as response:
        assert response.status == 200


async def test_an_edge_that_cannot_be_built_is_503_and_a_critical_log_naming_the_setting(
    world: World, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    world.compose(env={**world.env, "REQUESTS_CONTAINER": "not/a/name"})

    with caplog.at_level(logging.CRITICAL, logger="orders.edge"):
        answer = await call(http, world, "POST", "orders", place_body(), key="key-7")

    assert answer.status == 503 and answer.headers["Content-Type"] == PROBLEM_JSON
    assert int(answer.headers["Retry-After"]) >= 1
    [record] = [r for r in caplog.records if r.name == "orders.edge"]
    assert record.levelno == logging.CRITICAL and record.__dict__["setting"] == "REQUESTS_CONTAINER"
    assert on_queue(world) == []
