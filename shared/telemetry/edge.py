"""The orders API's instrumentation, its observer port implemented (``shared.edge.observer.
EdgeObserver``): one SERVER span per request, a counter of requests by route, outcome and
status, a histogram of the key's record age at replay, and log records for the outcomes an
operator acts on. The names are ``shared.telemetry.names``'s (the orders API's section).

The span is named ``<method> <route>`` (``POST /api/orders/{orderId}/amendments``: the HTTP
semantic conventions' server span, ``http.route`` the function's route template under the
host's prefix), current while the request is handled, so the Cosmos DB and Service Bus SDK
spans become its children. Its status is ERROR for a 5xx only: a 4xx is the client's (the
conventions' rule for server spans). The exporter drops ``http.*`` from ``customDimensions``
(docs/telemetry.md): the route, outcome and status are set again under ``orders.edge.*``, the
names the queries read.

Metric attributes are bounded by construction: the route (4), the outcome
(``RequestOutcome``, 15) and the status (a dozen codes). An order id, a client id or a key in
one would be one time series per order.

A request's own values (an order id from its path) appear in a log message only quoted
(``%r``), and bounded: a client can neither forge a line nor reach a terminal. A key or a
client id is never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from idempotent_consumer import bound
from idempotent_consumer.telemetry import qualified_name, set_error_type
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from shared.edge.observer import RequestOutcome, Route
from shared.edge.responses import ORDERS_PATH, ROUTE_PREFIX
from shared.telemetry.names import (
    ATTR_EDGE_OUTCOME,
    ATTR_EDGE_RECORD_AGE,
    ATTR_EDGE_ROUTE,
    ATTR_EDGE_STATUS_CODE,
    ATTR_HTTP_METHOD,
    ATTR_HTTP_ROUTE,
    ATTR_HTTP_STATUS_CODE,
    ATTR_KEPT_ERROR_TYPE,
    ATTR_ORDER_ID,
    EDGE_INSTRUMENTATION_SCOPE,
    EDGE_LOGGER_NAME,
    METRIC_EDGE_REPLAY_AGE,
    METRIC_EDGE_REQUESTS,
)

# Each route's method and template, as function_app.py declares them, under the host's prefix.
_ROUTES = {
    Route.PLACE: ("POST", f"{ROUTE_PREFIX}{ORDERS_PATH}"),
    Route.AMEND: ("POST", f"{ROUTE_PREFIX}{ORDERS_PATH}/{{orderId}}/amendments"),
    Route.CANCEL: ("POST", f"{ROUTE_PREFIX}{ORDERS_PATH}/{{orderId}}/cancellations"),
    Route.GET: ("GET", f"{ROUTE_PREFIX}{ORDERS_PATH}/{{orderId}}"),
}
# Seconds; a key's record lives 24 hours after its answer (shared.edge.requests.KEY_EXPIRY).
_REPLAY_AGE_BUCKETS_S = (1, 5, 30, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
# The contract's longest orderId; a path's is the client's text, bounded before it is shown.
_MAX_ORDER_ID_CHARS = 64
# What an operator acts on is logged; the rest is counted only (orders.edge.requests). A
# client's own conflicts are INFO (exported with their sampled trace); the API failing its
# clients is WARNING, and a bug ERROR: always exported.
_LOG_LEVEL_BY_OUTCOME = {
    RequestOutcome.IN_PROGRESS: logging.INFO,
    RequestOutcome.KEY_REUSED: logging.INFO,
    RequestOutcome.ORDER_EXISTS: logging.INFO,
    RequestOutcome.CONTENTION: logging.WARNING,
    RequestOutcome.NOT_SENT: logging.WARNING,
    RequestOutcome.UNAVAILABLE: logging.WARNING,
    RequestOutcome.FAILED: logging.ERROR,
}

edge_logger = logging.getLogger(EDGE_LOGGER_NAME)


class EdgeTelemetry:
    """The orders API's telemetry. Instruments are created once, here; providers default to
    the global ones (``configure_exporters``), tests inject SDK providers."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(EDGE_INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(EDGE_INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        self._requests = meter.create_counter(
            METRIC_EDGE_REQUESTS,
            unit="{request}",
            description="Orders API requests answered, by route, outcome and status",
        )
        self._replay_age = meter.create_histogram(
            METRIC_EDGE_REPLAY_AGE,
            unit="s",
            description="Age of the key's record (now - startedAt) when a request is replayed",
            explicit_bucket_boundaries_advisory=_REPLAY_AGE_BUCKETS_S,
        )

    @staticmethod
    def span_name(route: Route) -> str:
        method, template = _ROUTES[route]
        return f"{method} {template}"

    @contextmanager
    def handling(self, route: Route) -> Iterator[_Request]:
        """The request's span, current until the answer (``EdgeObserver.handling``)."""
        method, template = _ROUTES[route]
        with self._tracer.start_as_current_span(
            f"{method} {template}",
            kind=SpanKind.SERVER,
            attributes={
                ATTR_HTTP_METHOD: method,
                ATTR_HTTP_ROUTE: template,
                ATTR_EDGE_ROUTE: route.value,
            },
            # The answer says how it ended (``answered``), an escaping error included.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield _Request(self, route, span)

    def _answered(
        self,
        route: Route,
        span: Span,
        outcome: RequestOutcome,
        status: int,
        order_id: str | None,
        record_age_s: float | None,
        error: BaseException | None,
    ) -> None:
        shown_order_id = None if order_id is None else bound(order_id, _MAX_ORDER_ID_CHARS)
        span.set_attribute(ATTR_HTTP_STATUS_CODE, status)
        span.set_attribute(ATTR_EDGE_STATUS_CODE, status)
        span.set_attribute(ATTR_EDGE_OUTCOME, outcome.value)
        if shown_order_id is not None:
            span.set_attribute(ATTR_ORDER_ID, shown_order_id)
        if record_age_s is not None:
            span.set_attribute(ATTR_EDGE_RECORD_AGE, record_age_s)
        error_type: str | None = None
        if error is not None:
            error_type = qualified_name(type(error))
            span.record_exception(error)
        if status >= 500:
            # The conventions' error.type of a 5xx with no exception: the status code.
            set_error_type(span, error_type or str(status), ATTR_KEPT_ERROR_TYPE)
            span.set_status(Status(StatusCode.ERROR, f"{status} {outcome.value}"))

        dimensions: dict[str, Any] = {
            ATTR_EDGE_ROUTE: route.value,
            ATTR_EDGE_OUTCOME: outcome.value,
            ATTR_EDGE_STATUS_CODE: status,
        }
        self._requests.add(1, dimensions)
        if record_age_s is not None:
            self._replay_age.record(max(0.0, record_age_s), {ATTR_EDGE_ROUTE: route.value})

        level = _LOG_LEVEL_BY_OUTCOME.get(outcome)
        if level is None:
            return
        edge_logger.log(
            level,
            "orders API %s of order %r: %s (%d)",
            route.value,
            shown_order_id,
            outcome.value,
            status,
            exc_info=error,
            extra={
                **dimensions,
                **({} if shown_order_id is None else {"order_id": shown_order_id}),
                **({} if error_type is None else {"error_type": error_type}),
            },
        )


class _Request:
    """One request's observation (``shared.edge.observer.RequestObservation``)."""

    def __init__(self, telemetry: EdgeTelemetry, route: Route, span: Span) -> None:
        self._telemetry = telemetry
        self._route = route
        self._span = span

    def answered(
        self,
        outcome: RequestOutcome,
        status: int,
        *,
        order_id: str | None = None,
        record_age_s: float | None = None,
        error: BaseException | None = None,
    ) -> None:
        self._telemetry._answered(
            self._route, self._span, outcome, status, order_id, record_age_s, error
        )
