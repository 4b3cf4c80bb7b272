"""The local host serves HTTP triggers through Microsoft's worker as the Functions host does: a
real HTTP client (aiohttp) against ``local.standins.http_host.LocalHttpHost`` in front of
``azure_functions_runtime`` loading tests/local/http_app/. Each answer below is what the worker's
``func.HttpRequest`` was given and what its ``func.HttpResponse`` became on the wire: route values,
query, headers, body, trace context in; status, headers, cookies, body out; a function key
checked before any invocation; 404 for a path or a method no route takes; 500 for a function that
raises."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from local.assembly.world import CosmosAccount, local_world
from local.standins.http_host import (
    DEFAULT_ROUTE_PREFIX,
    FUNCTIONS_KEY_HEADER,
    AnswerFault,
    HostKeys,
    LocalHttpHost,
    LostAnswer,
    parse_template,
    route_prefix_of,
)
from local.standins.worker import FunctionsWorker, HttpRequestData, HttpResponseData
from tests.local.test_worker import SERVICE_BUS_TRIGGER, write_app

APP = Path(__file__).resolve().parent / "http_app"
KEYS = HostKeys(
    master="master-key",
    host={"default": "host-key"},
    functions={"create_order": {"default": "create-order-key"}, "get_order": {"x": "other-key"}},
)
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
async def http() -> AsyncIterator[LocalHttpHost]:
    # A worker per test: the runtime's state is the process's, and any other worker started
    # meanwhile (a world) would replace this one's functions.
    worker = await FunctionsWorker.start(APP)
    try:
        async with LocalHttpHost(worker, keys=KEYS) as host:
            yield host
    finally:
        worker.close()


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_a_get_hands_the_worker_the_route_value_query_headers_and_the_callers_trace(
    http: LocalHttpHost, client: aiohttp.ClientSession
) -> None:
    url = http.function_url("orders/ord-1001?view=full&empty=&VIEW=lines")

    async with client.get(url, headers={"X-Note": "café", "traceparent": TRACEPARENT}) as answer:
        status, headers, seen = answer.status, answer.headers, await answer.json()

    assert status == 200
    assert headers["x-order-id"] == "ord-1001"  # a header the function set
    assert headers["Content-Type"] == "application/json"
    assert seen["function"] == "get_order"
    assert seen["orderId"] == "ord-1001"
    assert seen["method"] == "GET"
    assert seen["url"] == f"{http.url}/edge/orders/ord-1001?view=full&empty=&VIEW=lines"
    # One name ignoring case, its values joined; a parameter with an empty value left out.
    assert seen["query"] == {"view": "full,lines"}
    assert seen["note"] == "café"
    assert seen["body"] == ""  # no Content-Length: no body field, which the worker binds as b""
    trace_id, span_id = seen["traceparent"].split("-")[1:3]
    assert trace_id == CALLER_TRACE and span_id != "00f067aa0ba902b7"  # a new span of its trace


async def test_a_literal_segment_wins_over_a_parameter_whatever_the_order_of_the_functions(
    http: LocalHttpHost, client: aiohttp.ClientSession
) -> None:
    # latest_order is declared after get_order ("orders/{orderId}"), and still takes the path.
    async with client.get(http.function_url("orders/latest")) as answer:
        assert answer.status == 200
        assert (await answer.json()) == {"function": "latest_order"}


async def test_a_post_with_a_json_body_comes_back_with_the_functions_status_headers_and_cookie(
    http: LocalHttpHost, client: aiohttp.ClientSession
) -> None:
    order = {"orderId": "ord-1002", "lines": [{"sku": "SKU-1", "quantity": 2}]}

    async with client.post(
        http.function_url("orders"), json=order, headers={FUNCTIONS_KEY_HEADER: "host-key"}
    ) as answer:
        status, headers, body = answer.status, answer.headers, await answer.json()
        cookie = answer.cookies["session"]

    assert status == 201
    assert body == {"received": order}
    assert headers["Location"] == "/edge/orders/ord-1002"
    assert headers["Content-Type"] == "application/json"
    # The worker moves a Set-Cookie header into RpcHttp cookies; the host writes it back.
    assert cookie.value == "abc"
    assert cookie["path"] == "/orders"
    assert cookie["httponly"] is True


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({}, {}),  # no key
        ({FUNCTIONS_KEY_HEADER: "wrong"}, {}),
        ({}, {"code": "wrong"}),
        ({FUNCTIONS_KEY_HEADER: "other-key"}, {}),  # another function's key
        ({FUNCTIONS_KEY_HEADER: "wrong"}, {"code": "host-key"}),  # the header wins
        ({FUNCTIONS_KEY_HEADER: ""}, {"code": "host-key"}),  # even empty
    ],
)
async def test_a_function_level_function_without_its_key_is_401_before_any_invocation(
    http: LocalHttpHost,
    client: aiohttp.ClientSession,
    headers: dict[str, str],
    query: dict[str, str],
) -> None:
    invocations = http.stats.invocations

    async with client.post(
        http.function_url("orders"), json={"orderId": "x"}, headers=headers, params=query
    ) as answer:
        assert answer.status == 401
        assert await answer.read() == b""

    assert http.stats.invocations == invocations  # the worker was never asked


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({FUNCTIONS_KEY_HEADER: "host-key"}, {}),
        ({}, {"code": "host-key"}),
        ({}, {"code": "create-order-key"}),  # the function's own key
        ({}, {"CODE": "host-key"}),  # query names ignore case
        ({FUNCTIONS_KEY_HEADER: "master-key"}, {}),  # the master key grants admin: all
    ],
)
async def test_a_function_level_function_with_a_key_in_the_header_or_code_is_invoked(
    http: LocalHttpHost,
    client: aiohttp.ClientSession,
    headers: dict[str, str],
    query: dict[str, str],
) -> None:
    async with client.post(
        http.function_url("orders"), json={"orderId": "ord-7"}, headers=headers, params=query
    ) as answer:
        assert answer.status == 201
        assert (await answer.json()) == {"received": {"orderId": "ord-7"}}


@pytest.mark.parametrize(
    ("key", "status"),
    [("master-key", 204), ("host-key", 401), ("create-order-key", 401), ("", 401)],
)
async def test_an_admin_level_function_takes_the_master_key_alone(
    http: LocalHttpHost, client: aiohttp.ClientSession, key: str, status: int
) -> None:
    async with client.post(http.function_url("purge"), params={"code": key}) as answer:
        assert answer.status == status


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "edge/nowhere"),
        ("DELETE", "edge/orders/ord-1"),  # a method outside the route's: 404, not 405
        ("GET", "edge/orders"),  # POST only
        ("GET", "api/orders/ord-1"),  # host.json's prefix is edge, not the default api
        ("GET", "edge/stock/SKU1"),  # {sku:alpha} refuses a digit
        ("GET", "edge/orders/ord-1/extra"),
    ],
)
async def test_a_path_or_method_no_route_takes_is_404(
    http: LocalHttpHost, client: aiohttp.ClientSession, method: str, path: str
) -> None:
    invocations = http.stats.invocations

    async with client.request(method, f"{http.url}/{path}") as answer:
        assert answer.status == 404

    assert http.stats.invocations == invocations


async def test_a_body_reaches_the_function_as_bytes_only_with_a_content_length(
    http: LocalHttpHost, client: aiohttp.ClientSession
) -> None:
    payload = bytes(range(256))  # not UTF-8: the body travels as bytes (RawHttpBodyBytes)

    async def chunks() -> AsyncIterator[bytes]:
        yield payload[:100]
        yield payload[100:]

    async with client.put(http.function_url("echo"), data=payload) as sized:
        assert sized.status == 200
        assert await sized.read() == payload
    # Transfer-Encoding: chunked, no Content-Length: the host's ToRpcHttp sends no body.
    async with client.put(http.function_url("echo"), data=chunks()) as chunked:
        assert chunked.status == 200
        assert await chunked.read() == b""


async def test_a_str_return_is_plain_text_and_a_constraint_that_holds_matches(
    http: LocalHttpHost, client: aiohttp.ClientSession
) -> None:
    async with client.get(http.function_url("stock/abc")) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert await answer.text() == "stock of abc"


async def test_a_function_that_raises_is_500_with_the_workers_error_logged(
    http: LocalHttpHost, client: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    failed = http.stats.failed_invocations

    async with client.get(http.function_url("boom")) as answer:
        assert answer.status == 500
        assert await answer.read() == b""

    assert http.stats.failed_invocations == failed + 1
    assert http.stats.errors[-1] == "RuntimeError: the function failed"
    [logged] = [r for r in caplog.records if r.name == "local.standins.http_host"]
    assert logged.levelno == logging.ERROR
    assert "Executed 'Functions.boom' (Failed" in logged.getMessage()


async def test_the_worker_answers_an_http_functions_return_as_rpc_http(
    http: LocalHttpHost,
) -> None:
    result = await http.worker.invoke(
        "create_order",
        {
            "req": HttpRequestData(
                method="POST",
                url="http://localhost/edge/orders",
                headers={"content-type": "application/json"},
                query={},
                params={},
                body=json.dumps({"orderId": "ord-9"}).encode(),
            )
        },
    )

    assert result.succeeded, result.error
    assert isinstance(result.return_value, HttpResponseData)
    assert result.return_value.status_code == "201"
    assert result.return_value.body == b'{"received": {"orderId": "ord-9"}}'
    assert result.return_value.headers["Location"] == "/edge/orders/ord-9"
    assert [c.name for c in result.return_value.cookies] == ["session"]


def test_the_route_prefix_is_api_unless_host_json_sets_one(tmp_path: Path) -> None:
    assert route_prefix_of(tmp_path / "host.json") == DEFAULT_ROUTE_PREFIX == "api"
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0"}))
    assert route_prefix_of(tmp_path / "host.json") == "api"
    (tmp_path / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"http": {"routePrefix": ""}}})
    )
    assert route_prefix_of(tmp_path / "host.json") == ""
    assert route_prefix_of(APP / "host.json") == "edge"


@pytest.mark.parametrize(
    "template",
    ["orders/{id:regex(^o$)}", "orders/{id=ord-1}", "orders/{id}.{format}", "{*rest}/orders"],
)
def test_a_route_template_beyond_those_reproduced_is_refused_at_start(template: str) -> None:
    # Never served with a rule silently dropped: a default, a regex, two parameters in a segment,
    # a catch-all before the end.
    with pytest.raises(ValueError, match=r"not reproduced|must be the last segment"):
        parse_template(template)


async def test_the_world_serves_an_apps_http_functions_with_a_key_of_its_own(
    tmp_path: Path, cosmos_account: CosmosAccount, client: aiohttp.ClientSession
) -> None:
    app = write_app(
        tmp_path,
        SERVICE_BUS_TRIGGER,
        """
        async def consume_order(
            msg: servicebus.ServiceBusReceivedMessage,
            message_actions: servicebus.ServiceBusMessageActions,
        ) -> None:
            pass


        @app.route(route="ping", methods=["GET"])
        def ping(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("pong")
        """,
    )
    async with local_world(account=cosmos_account, app_directory=app) as world:
        assert world.http_url.startswith("http://127.0.0.1:")
        url = f"{world.http_url}/api/ping"  # no host.json routePrefix: the default, api
        async with client.get(url) as refused:
            assert refused.status == 401  # FunctionApp's default auth level is function
        async with client.get(url, headers={FUNCTIONS_KEY_HEADER: world.function_key}) as answer:
            assert answer.status == 200
            assert await answer.text() == "pong"

    with pytest.raises(aiohttp.ClientConnectionError):  # stopped with the world
        async with client.get(url):
            pass  # pragma: no cover - nothing listens any more


async def test_the_world_of_an_app_without_http_functions_has_no_http_host(
    tmp_path: Path, cosmos_account: CosmosAccount
) -> None:
    # The real app has HTTP functions (the orders API): a consumer-only app here.
    app = write_app(
        tmp_path,
        SERVICE_BUS_TRIGGER,
        """
        async def consume_order(
            msg: servicebus.ServiceBusReceivedMessage,
            message_actions: servicebus.ServiceBusMessageActions,
        ) -> None:
            pass
        """,
    )
    async with local_world(account=cosmos_account, app_directory=app) as world:
        assert world.http_host is None
        assert world.queue_sender is None and world.requests_container is None
        with pytest.raises(LookupError, match="no HTTP-triggered function"):
            _ = world.http_url


async def _raw_get(http: LocalHttpHost, path: str, header: bytes) -> tuple[bytes, bytes]:
    """A GET written byte by byte (an HTTP client encodes its headers; this one sends what it is
    given): the answer's status line and head, and whether the host closed the connection."""
    port = int(http.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        request_line = b"GET /edge/" + path.encode() + b" HTTP/1.1\r\n"
        writer.write(request_line + b"Host: 127.0.0.1\r\n" + header + b"\r\n\r\n")
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        rest = await asyncio.wait_for(reader.read(), timeout=5)  # EOF: the connection closed
        return head, rest
    finally:
        writer.close()


@pytest.mark.parametrize(
    "header",
    [
        b"X-Note: caf\xe9",  # Latin-1, not UTF-8
        b"X-Note: \x80\xff",
        b"X-Note: caf\xc3",  # a UTF-8 sequence cut short
    ],
)
async def test_a_header_value_that_is_not_utf8_is_400_and_the_connection_closed_as_kestrel_does(
    http: LocalHttpHost, header: bytes
) -> None:
    # Kestrel decodes a header value as ASCII, else as UTF-8 that throws on invalid bytes, and
    # answers 400 "Malformed request: invalid headers" before routing (http_host's docstring).
    invocations = http.stats.invocations

    head, rest = await _raw_get(http, "orders/ord-1001", header)

    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in head.lower()
    assert rest == b""  # no body, and the host closed the connection
    assert http.stats.invocations == invocations  # the worker was never asked
    assert http.stats.failed_invocations == 0


async def test_a_header_value_in_utf8_reaches_the_function_decoded(http: LocalHttpHost) -> None:
    header = "X-Note: café\r\nConnection: close".encode()  # so the body ends with the connection

    head, rest = await _raw_get(http, "orders/ord-1001", header)

    assert head.startswith(b"HTTP/1.1 200 ")
    assert json.loads(rest)["note"] == "café"


@pytest.mark.parametrize(
    ("path", "order_id"),
    [
        ("orders/bpy%5C%0A%C3%8F", "bpy\\\n\u00cf"),  # a backslash, a newline: data of the segment
        ("orders/a%2Fb", "a%2Fb"),  # %2F is never decoded, so never splits a segment
        ("orders/a%FFb%C3%28", "a%FFb%C3("),  # what is not UTF-8 stays as sent
        ("orders/x/%2E%2E/ord-1", "ord-1"),  # a dot segment is removed once decoded
    ],
)
async def test_a_path_reaches_the_route_as_kestrel_decodes_it(
    http: LocalHttpHost, path: str, order_id: str
) -> None:
    # Kestrel decodes the path but %2F, then removes dot segments (http_host's docstring); the
    # route value is that path's segment, not decoded again.
    head, rest = await _raw_get(http, path, b"Connection: close")

    assert head.startswith(b"HTTP/1.1 200 ")
    assert json.loads(rest)["orderId"] == order_id


async def test_a_path_with_an_encoded_nul_is_400_and_the_connection_closed_as_kestrel_does(
    http: LocalHttpHost,
) -> None:
    # UrlDecoder throws on %00 and Kestrel rejects the request target (http_host's docstring).
    invocations = http.stats.invocations

    head, rest = await _raw_get(http, "orders/a%00b", b"X-Note: nul")

    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in head.lower()
    assert rest == b""
    assert http.stats.invocations == invocations


@pytest.mark.parametrize(
    ("kind", "client_sees"),
    [
        (LostAnswer.DISCONNECT, aiohttp.ServerDisconnectedError),
        (LostAnswer.HOLD, TimeoutError),
        (LostAnswer.GATEWAY_TIMEOUT, 504),
    ],
)
async def test_an_answer_lost_after_the_invocation_is_recorded_and_the_next_one_is_heard(
    http: LocalHttpHost,
    client: aiohttp.ClientSession,
    kind: LostAnswer,
    client_sees: type[Exception] | int,
) -> None:
    # Only the request that matches loses its answer, once: the function ran all the same.
    http.answer_faults.append(
        AnswerFault(kind, lambda request: request.headers.get("x-attempt") == "1", hold_s=1.0)
    )
    invocations = http.stats.invocations
    url = http.function_url("orders")
    headers = {FUNCTIONS_KEY_HEADER: "host-key", "x-attempt": "1"}
    order = {"orderId": "ord-8"}

    heard: int | type[Exception]
    try:
        async with client.post(
            url, json=order, headers=headers, timeout=aiohttp.ClientTimeout(total=0.3)
        ) as first:
            heard = first.status
    except (aiohttp.ClientError, TimeoutError) as error:
        heard = type(error)
    async with client.post(url, json=order, headers={**headers, "x-attempt": "2"}) as second:
        assert second.status == 201  # the next request is answered

    assert heard == client_sees
    assert http.stats.invocations == invocations + 2  # the first one ran too
    [lost] = http.lost
    assert (lost.kind, lost.function, lost.status) == (kind, "create_order", 201)
    assert lost.headers["Location"] == "/edge/orders/ord-8"  # what the client never read
    assert json.loads(lost.body) == {"received": order}
