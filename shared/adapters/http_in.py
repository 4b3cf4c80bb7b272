"""HTTP in (azure-functions): a ``func.HttpRequest`` of the orders API read into what the edge's
core takes, and its ``EdgeResponse`` written back as a ``func.HttpResponse``.

Owns the HTTP-only checks, each answered before the core runs, so before anything is read or
written, as an RFC 9457 problem document (``shared.edge.responses``):

- the body's media type: ``application/json``, with no ``charset`` or ``charset=utf-8`` (RFC
  8259, section 8.1: JSON exchanged between systems "MUST be encoded using UTF-8"); anything
  else, a missing Content-Type included, is 415 (RFC 9110, section 15.5.16);
- the body's size: at most ``MAX_BODY_BYTES`` (64 KiB), else 413 (RFC 9110, section 15.5.14).
  Why 64 KiB: the body becomes one queue message with the edge's fields (under 300 bytes more),
  the queue takes 256 KB per message (Standard tier), and the largest valid order (100 lines,
  ``shared.consumer.contract``) is a few KiB; the bound keeps a request's parsed body small
  whatever the Functions host lets through ("The HTTP request length is limited to 100 MB":
  learn.microsoft.com/azure/azure-functions/functions-bindings-http-webhook-trigger, "Limits");
- the body's syntax: UTF-8 JSON, else 400 (the core's ``invalid-order`` problem);
- the Idempotency-Key header: an RFC 8941 String (``shared.edge.requests.parse_sf_string``),
  else 400 (the core's ``invalid_key``); its content, or None when absent, goes to the core.

The client id, and its limit. The worker is not told which function key a caller presented (the
host checks the key and passes only the request: ``local.standins.http_host`` does the same), so
a key cannot name a client. The one identity a Functions app is handed is App Service
authentication's ("Easy Auth"): with it on, the platform authenticates the caller and sets
``X-MS-CLIENT-PRINCIPAL-ID``, and "external requests aren't allowed to set these headers, so
they're present only if set by App Service" (learn.microsoft.com/azure/app-service/
configure-authentication-user-identities, "Access user claims in app code"). So the client is
``principal:<that id>`` when the header is present, else the one fixed client ``function-key``.
The limit: without App Service authentication, every function-key holder is the same client
(they share one key namespace and can see and change each other's orders), and the header is the
caller's own words: whoever holds a key can claim any principal id. Per-client isolation
therefore needs App Service authentication on (or API Management in front, setting the header
itself); the Bicep does not turn it on yet, and whether the Flex Consumption plan offers it was
not checked here.

Every request is reported once (``answered``): the HTTP function's body runs inside it, so a
refusal here, the core's answer, GET's, a 503 for an edge that cannot be built and an exception
that escapes (500, the Functions host's answer) are all counted, each with the outcome its
``EdgeResponse`` names (``shared.edge.observer``).

Untrusted input: nothing of the request is logged here or echoed back (the problem documents are
the edge's own words); the order id of its path goes to the observer as the client's text, which
bounds and quotes it. Never decides anything about an order (``shared.edge``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import azure.functions as func

from shared.edge import responses
from shared.edge.observer import EdgeObserver, RequestOutcome, Route
from shared.edge.openapi import document_bytes
from shared.edge.requests import parse_sf_string
from shared.edge.responses import JSON, EdgeResponse

MAX_BODY_BYTES = 64 * 1024
PRINCIPAL_HEADER = "x-ms-client-principal-id"
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
FUNCTION_KEY_CLIENT = "function-key"
PRINCIPAL_PREFIX = "principal:"
ORDER_ID_ROUTE_PARAM = "orderId"
_PRINCIPAL_ID = re.compile(r"[\x21-\x7e]{1,100}")


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """What the core takes of one request (``shared.edge.core.OrdersEdge``)."""

    client_id: str
    idempotency_key: str | None
    if_match: str | None
    order_id: str
    body: Any


def client_id(request: func.HttpRequest) -> str | EdgeResponse:
    """The request's client (module docstring: the decision and its limit), or 403 for a
    principal id no provider gives."""
    principal: str | None = request.headers.get(PRINCIPAL_HEADER)
    if principal is None:
        return FUNCTION_KEY_CLIENT
    if _PRINCIPAL_ID.fullmatch(principal) is None:
        return responses.invalid_principal()
    return PRINCIPAL_PREFIX + principal


def read_order_request(request: func.HttpRequest) -> OrderRequest | EdgeResponse:
    """A POST of the orders API read for the core, or the problem that refuses it first."""
    client = client_id(request)
    if isinstance(client, EdgeResponse):
        return client
    if not _is_json(request.headers.get("Content-Type")):
        return responses.unsupported_media_type()
    raw = request.get_body()
    if len(raw) > MAX_BODY_BYTES:
        return responses.body_too_large(MAX_BODY_BYTES)
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return responses.invalid_order("The body must be JSON (UTF-8).")
    header = request.headers.get(IDEMPOTENCY_KEY_HEADER)
    key = None if header is None else parse_sf_string(header)
    if header is not None and key is None:
        return responses.invalid_key()
    return OrderRequest(
        client_id=client,
        idempotency_key=key,
        if_match=request.headers.get("If-Match"),
        order_id=request.route_params.get(ORDER_ID_ROUTE_PARAM, ""),
        body=body,
    )


async def answered(
    observer: EdgeObserver,
    route: Route,
    request: func.HttpRequest,
    answer: Callable[[], Awaitable[EdgeResponse]],
) -> func.HttpResponse:
    """``answer()`` on the wire, reported to ``observer`` (its outcome, status, the order it
    names, a replay's record age); an exception is reported ``failed`` (500: the Functions host
    answers an unhandled exception with it) and propagates."""
    with observer.handling(route) as observation:
        path_order_id: str | None = request.route_params.get(ORDER_ID_ROUTE_PARAM)
        try:
            response = await answer()
        except Exception as error:
            observation.answered(RequestOutcome.FAILED, 500, order_id=path_order_id, error=error)
            raise
        # A place names its order in its answer (the edge's own id); a change or GET in its path.
        named = (response.body or {}).get("orderId") if path_order_id is None else path_order_id
        observation.answered(
            response.outcome,
            response.status,
            order_id=named if isinstance(named, str) else None,
            record_age_s=response.record_age_s,
        )
        return to_http_response(response)


def to_http_response(response: EdgeResponse) -> func.HttpResponse:
    """The core's answer on the wire: its status, its headers (Content-Type among them), its
    JSON body (compact, UTF-8), or no body."""
    body = None
    if response.body is not None:
        body = json.dumps(response.body, separators=(",", ":"), ensure_ascii=False).encode()
    return func.HttpResponse(body, status_code=response.status, headers=dict(response.headers))


def openapi_response() -> func.HttpResponse:
    """The API's OpenAPI document (``shared.edge.openapi``), its bytes as checked in."""
    return func.HttpResponse(document_bytes(), status_code=200, headers={"Content-Type": JSON})


def _is_json(content_type: str | None) -> bool:
    """``application/json``, optionally with ``charset=utf-8`` (RFC 9110, section 8.3.1: type,
    subtype and parameter names are case-insensitive; a quoted value is the same value)."""
    if content_type is None:
        return False
    media_type, *parameters = (part.strip() for part in content_type.split(";"))
    if media_type.lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset" or value.strip().strip('"').lower() != "utf-8":
            return False
    return True
