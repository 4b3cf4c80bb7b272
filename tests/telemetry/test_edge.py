"""The orders API's telemetry as an operator reads it: requests sent by a real HTTP client
(aiohttp) to the world's HTTP host and Microsoft's worker running the app's functions, the
composition root's ``EdgeTelemetry`` on SDK providers with in-memory exporters. Every request is
counted by route, outcome and status, the HTTP layer's refusals included; a replay records its
key's age; each request is one SERVER span; the outcomes an operator acts on are logged, a
client's text quoted."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import aiohttp
import azure.functions as func
import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from local.assembly.world import CosmosAccount, World, local_world
from local.standins.broker import ManualClock
from shared.adapters.http_in import MAX_BODY_BYTES, PRINCIPAL_HEADER, answered
from shared.edge.observer import RequestOutcome, Route
from shared.edge.responses import EdgeResponse
from shared.telemetry.edge import EdgeTelemetry
from shared.telemetry.names import (
    ATTR_EDGE_OUTCOME,
    ATTR_EDGE_RECORD_AGE,
    ATTR_EDGE_ROUTE,
    ATTR_EDGE_STATUS_CODE,
    EDGE_LOGGER_NAME,
    METRIC_EDGE_REPLAY_AGE,
    METRIC_EDGE_REQUESTS,
)
from tests.edge.conftest import amend_body, place_body
from tests.edge.test_end_to_end import JSON, call


class EdgeCapture:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = EdgeTelemetry(tracer_provider, MeterProvider(metric_readers=[self.reader]))

    def requests(self) -> Counter[tuple[str, str, int]]:
        """The counter's total per (route, outcome, status)."""
        return Counter(
            {
                (
                    str(attributes[ATTR_EDGE_ROUTE]),
                    str(attributes[ATTR_EDGE_OUTCOME]),
                    int(str(attributes[ATTR_EDGE_STATUS_CODE])),
                ): int(point.value)
                for attributes, point in self._points(METRIC_EDGE_REQUESTS)
            }
        )

    def replay_ages(self) -> list[HistogramDataPoint]:
        return [p for _, p in self._points(METRIC_EDGE_REPLAY_AGE)]

    def _points(self, name: str) -> list[tuple[dict[str, object], Any]]:
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, object], Any]] = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(
                            (dict(point.attributes or {}), point)
                            for point in metric.data.data_points
                        )
        return found

    def server_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.kind is SpanKind.SERVER]


@pytest.fixture
def app_env(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The app settings with a requests container of the test's own."""
    name = f"requests-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("REQUESTS_CONTAINER", name)
    return {**app_env, "REQUESTS_CONTAINER": name}


@pytest.fixture
def edge_capture() -> EdgeCapture:
    return EdgeCapture()


@pytest.fixture
async def world(
    cosmos_account: CosmosAccount,
    app_env: dict[str, str],
    clock: ManualClock,
    container: ContainerProxy,
    fresh_runtime: None,
    edge_capture: EdgeCapture,
) -> AsyncIterator[World]:
    """The stand-in around the app, its orders API reporting to the test's telemetry."""
    async with local_world(
        account=cosmos_account,
        container=app_env["COSMOS_CONTAINER"],
        clock=clock,
        env={"REQUESTS_CONTAINER": app_env["REQUESTS_CONTAINER"]},
    ) as started:
        started.compose(edge_telemetry=edge_capture.telemetry)
        yield started
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        await database.delete_container(app_env["REQUESTS_CONTAINER"])


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_every_request_is_counted_by_route_outcome_and_status_refusals_included(
    world: World, http: aiohttp.ClientSession, clock: ManualClock, edge_capture: EdgeCapture
) -> None:
    placed = await call(http, world, "POST", "orders", place_body(), key="k-1")
    order_id = placed.body["orderId"]
    clock.advance(timedelta(minutes=2))
    await call(http, world, "POST", "orders", place_body(), key="k-1")  # replayed, 120 s
    await call(http, world, "POST", "orders", place_body(currency="USD"), key="k-1")
    amend = f"orders/{order_id}/amendments"
    await call(http, world, "POST", amend, amend_body(), key="k-2", if_match='"5"')
    await call(http, world, "POST", "orders/ord-nobody/cancellations", {"reason": "x"}, key="k-3")
    # Refused by the HTTP layer, before the core.
    await call(http, world, "POST", "orders", place_body(), key="k-4", content_type="text/plain")
    await call(http, world, "POST", "orders", key="k-5", raw=b" " * (MAX_BODY_BYTES + 1))
    await call(http, world, "POST", "orders", key="k-6", raw=b"{not json")
    await call(http, world, "POST", "orders", place_body(), key="k-7", content_type=None)
    async with http.get(
        world.http.function_url(f"orders/{order_id}"),
        headers={"x-functions-key": world.function_key, PRINCIPAL_HEADER: "has space"},
    ) as forbidden:
        assert forbidden.status == 403
    await call(http, world, "GET", f"orders/{order_id}")  # before the consumer: 404
    await world.host.run_until_idle()
    assert (await call(http, world, "GET", f"orders/{order_id}")).status == 200

    assert edge_capture.requests() == {
        ("place", "created", 201): 1,
        ("place", "replayed", 201): 1,
        ("place", "key_reused", 422): 1,
        ("amend", "version_mismatch", 412): 1,
        ("cancel", "not_found", 404): 1,
        ("place", "invalid", 415): 2,
        ("place", "invalid", 413): 1,
        ("place", "invalid", 400): 1,
        ("get", "forbidden", 403): 1,
        ("get", "not_found", 404): 1,
        ("get", "found", 200): 1,
    }
    [age] = edge_capture.replay_ages()
    assert (age.count, age.sum, age.attributes) == (1, 120.0, {ATTR_EDGE_ROUTE: "place"})


async def test_each_request_is_one_server_span_named_by_its_route_a_replay_with_its_age(
    world: World,
    http: aiohttp.ClientSession,
    clock: ManualClock,
    edge_capture: EdgeCapture,
    cosmos_spans: InMemorySpanExporter,
) -> None:
    placed = await call(http, world, "POST", "orders", place_body(), key="k-1")
    clock.advance(timedelta(seconds=42))
    await call(http, world, "POST", "orders", place_body(), key="k-1")
    order_id = placed.body["orderId"]
    await call(http, world, "POST", f"orders/{order_id}/amendments", amend_body(), key="k-2")

    created, replayed, amended = edge_capture.server_spans()

    assert [s.name for s in (created, replayed, amended)] == [
        "POST /api/orders",
        "POST /api/orders",
        "POST /api/orders/{orderId}/amendments",
    ]
    assert created.attributes is not None and replayed.attributes is not None
    assert {k: created.attributes[k] for k in ("http.route", "http.response.status_code")} == {
        "http.route": "/api/orders",
        "http.response.status_code": 201,
    }
    assert (created.attributes[ATTR_EDGE_OUTCOME], created.attributes["orders.order_id"]) == (
        "created",
        order_id,
    )
    assert ATTR_EDGE_RECORD_AGE not in created.attributes
    assert replayed.attributes[ATTR_EDGE_OUTCOME] == "replayed"
    assert replayed.attributes[ATTR_EDGE_RECORD_AGE] == 42.0
    assert amended.attributes is not None and amended.attributes[ATTR_EDGE_ROUTE] == "amend"
    assert all(s.status.status_code is StatusCode.UNSET for s in (created, replayed, amended))
    # The store's calls are the request's: the Cosmos DB SDK's spans are its children.
    parents = {
        span.parent.span_id
        for span in cosmos_spans.get_finished_spans()
        if span.name.startswith("ContainerProxy.") and span.parent is not None
    }
    assert {s.context.span_id for s in (created, replayed, amended) if s.context} <= parents


async def test_an_edge_that_cannot_be_built_is_a_5xx_error_span_counted_and_logged(
    world: World,
    http: aiohttp.ClientSession,
    edge_capture: EdgeCapture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world.compose(
        env={**world.env, "REQUESTS_CONTAINER": "not/a/name"},
        edge_telemetry=edge_capture.telemetry,
    )

    with caplog.at_level(logging.INFO, logger=EDGE_LOGGER_NAME):
        answer = await call(http, world, "POST", "orders", place_body(), key="k-1")

    assert answer.status == 503
    assert edge_capture.requests() == {("place", "unavailable", 503): 1}
    [span] = edge_capture.server_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["orders.error_type"] == "503"
    levels = [(r.levelno, r.__dict__.get(ATTR_EDGE_OUTCOME)) for r in caplog.records]
    # The setting named (critical), then the request's answer (warning).
    assert levels == [(logging.CRITICAL, None), (logging.WARNING, "unavailable")]


def _request(order_id: str) -> func.HttpRequest:
    return func.HttpRequest(
        "POST",
        "http://localhost/api/orders/x/cancellations",
        headers={"Content-Type": JSON},
        route_params={"orderId": order_id},
        body=b"{}",
    )


async def test_an_exception_is_reported_failed_500_and_propagates(
    edge_capture: EdgeCapture, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> EdgeResponse:
        raise KeyError("a bug")

    with (
        caplog.at_level(logging.INFO, logger=EDGE_LOGGER_NAME),
        pytest.raises(KeyError),
    ):
        await answered(edge_capture.telemetry, Route.CANCEL, _request("ord-1"), broken)

    assert edge_capture.requests() == {("cancel", "failed", 500): 1}
    [span] = edge_capture.server_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["orders.error_type"] == "KeyError"
    assert [event.name for event in span.events] == ["exception"]
    [record] = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None


async def test_a_path_s_order_id_is_logged_quoted_and_bounded(
    edge_capture: EdgeCapture, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "ord-1\r\nERROR forged line \x1b[31m" + "x" * 500

    async def in_progress() -> EdgeResponse:
        from shared.edge import responses

        return responses.outstanding(1)

    with caplog.at_level(logging.INFO, logger=EDGE_LOGGER_NAME):
        await answered(edge_capture.telemetry, Route.CANCEL, _request(forged), in_progress)

    [record] = caplog.records
    line = record.getMessage()
    assert "\r" not in line and "\n" not in line and "\x1b" not in line
    assert line.startswith("orders API cancel of order 'ord-1\\r\\nERROR forged line \\x1b[31m")
    assert len(record.__dict__["order_id"]) == 64
    assert record.__dict__[ATTR_EDGE_OUTCOME] == RequestOutcome.IN_PROGRESS.value
