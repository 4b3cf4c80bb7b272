"""What the public edge answers: ``EdgeResponse``, its paths, and every RFC 9457 problem
document it gives, each as a function of the edge's own values only.

A problem document has ``type``, ``title``, ``status`` and ``detail`` (RFC 9457, section 3.1);
its media type is ``application/problem+json`` (section 6.1). The ``detail`` is the edge's own
words, bounded, and never carries a value of the request (a customer id, a key, a reason): what
a client sent is not echoed back into a response, a log or a page.

The key errors share one ``type`` (the draft's examples do: draft-ietf-httpapi-idempotency-
key-header-06, section 2.7, "body containing a link pointing to relevant documentation"); a
client tells them apart by their status (400 missing or invalid, 409 outstanding, 422 reused
with another payload), as with any resource following the draft.

Each answer names its outcome (``shared.edge.observer.RequestOutcome``), the one place a
status is classified for the request's report.

Pure: no Azure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from idempotent_consumer import bound

from shared.edge.observer import RequestOutcome

PROBLEM_JSON = "application/problem+json"
JSON = "application/json"
# The API's documentation of its problem types (the OpenAPI document will link the same).
PROBLEM_BASE = "https://orders.example/problems/"
MAX_DETAIL_CHARS = 512


class ProblemType:
    IDEMPOTENCY_KEY = PROBLEM_BASE + "idempotency-key"
    INVALID_ORDER = PROBLEM_BASE + "invalid-order"
    ORDER_NOT_FOUND = PROBLEM_BASE + "order-not-found"
    ORDER_CANCELLED = PROBLEM_BASE + "order-cancelled"
    ORDER_EXISTS = PROBLEM_BASE + "order-exists"
    VERSION_MISMATCH = PROBLEM_BASE + "version-mismatch"
    INVALID_PRECONDITION = PROBLEM_BASE + "invalid-precondition"
    UNAVAILABLE = PROBLEM_BASE + "unavailable"
    UNSUPPORTED_MEDIA_TYPE = PROBLEM_BASE + "unsupported-media-type"
    BODY_TOO_LARGE = PROBLEM_BASE + "body-too-large"
    INVALID_PRINCIPAL = PROBLEM_BASE + "invalid-principal"


@dataclass(frozen=True, slots=True)
class EdgeResponse:
    """An HTTP answer, transport-free: the status, its headers (``Location``, ``ETag``,
    ``Content-Type``, ``Retry-After``) and its JSON body (an order's state, or a problem); and,
    never sent, how it answered (``outcome``, named where the answer is made) and, for a
    replay, its record's age (``shared.edge.observer``: what the request reports)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None
    # Not compared: two answers are equal when the client sees the same (a replay equals the
    # answer it replays).
    outcome: RequestOutcome = field(kw_only=True, compare=False)
    record_age_s: float | None = field(default=None, kw_only=True, compare=False)

    @property
    def is_problem(self) -> bool:
        return self.headers.get("Content-Type") == PROBLEM_JSON


def problem(
    status: int,
    type_: str,
    title: str,
    detail: str,
    *,
    outcome: RequestOutcome,
    headers: Mapping[str, str] | None = None,
) -> EdgeResponse:
    """An RFC 9457 problem document; ``detail`` bounded to ``MAX_DETAIL_CHARS``."""
    return EdgeResponse(
        status,
        {"Content-Type": PROBLEM_JSON, **(headers or {})},
        {
            "type": type_,
            "title": title,
            "status": status,
            "detail": bound(detail, MAX_DETAIL_CHARS),
        },
        outcome=outcome,
    )


def etag(version: int) -> str:
    """An order version as a strong entity tag (RFC 9110, section 8.8.3): ``"<version>"``."""
    return f'"{version}"'


ORDERS_PATH = "/orders"  # under the API's base (the OpenAPI document's server URL)
# The Functions host serves HTTP functions under its route prefix: ``api`` unless host.json's
# extensions.http.routePrefix says otherwise (learn.microsoft.com/azure/azure-functions/
# functions-bindings-http-webhook#hostjson-settings); this app's host.json sets none.
ROUTE_PREFIX = "/api"


def order_location(order_id: str) -> str:
    """An order's URL path on the host, its ``Location``: ``/api/orders/<orderId>``, the
    ``GET`` route (an absolute path, so it resolves the same against any request's URL, RFC
    9110 section 10.2.2)."""
    return f"{ROUTE_PREFIX}{ORDERS_PATH}/{order_id}"


def change_path(order_id: str, change: str) -> str:
    """The path of a change's request under the API's base, as its fingerprint covers it:
    ``/orders/<orderId>/amendments`` or ``/cancellations``."""
    return f"{ORDERS_PATH}/{order_id}/{change}"


def _key_problem(
    status: int, outcome: RequestOutcome, title: str, detail: str, **headers: str
) -> EdgeResponse:
    return problem(
        status, ProblemType.IDEMPOTENCY_KEY, title, detail, outcome=outcome, headers=headers
    )


def missing_key() -> EdgeResponse:
    return _key_problem(
        400,
        RequestOutcome.INVALID,
        "Idempotency-Key is missing",
        "This operation requires an Idempotency-Key header.",
    )


def invalid_key() -> EdgeResponse:
    return _key_problem(
        400,
        RequestOutcome.INVALID,
        "Idempotency-Key is invalid",
        "An Idempotency-Key is a String of 1 to 255 visible ASCII characters.",
    )


def key_reused() -> EdgeResponse:
    return _key_problem(
        422,
        RequestOutcome.KEY_REUSED,
        "Idempotency-Key is already used",
        "This Idempotency-Key was used with another request payload; a key must not be "
        "reused across different payloads.",
    )


def outstanding(retry_after_s: int) -> EdgeResponse:
    return _key_problem(
        409,
        RequestOutcome.IN_PROGRESS,
        "A request is outstanding for this Idempotency-Key",
        "A request with the same Idempotency-Key is being processed; retry later.",
        **{"Retry-After": str(max(retry_after_s, 1))},
    )


def invalid_order(detail: str) -> EdgeResponse:
    """``detail``: the edge's or the contract's words (field paths and rules), no values."""
    return problem(
        400,
        ProblemType.INVALID_ORDER,
        "The order is not valid",
        detail,
        outcome=RequestOutcome.INVALID,
    )


def invalid_precondition() -> EdgeResponse:
    return problem(
        400,
        ProblemType.INVALID_PRECONDITION,
        "If-Match is invalid",
        'If-Match takes the order\'s ETag, "<version>", or *.',
        outcome=RequestOutcome.INVALID,
    )


def not_found() -> EdgeResponse:
    return problem(
        404,
        ProblemType.ORDER_NOT_FOUND,
        "No such order",
        "This client has no order of this id.",
        outcome=RequestOutcome.NOT_FOUND,
    )


def cancelled(order_id: str, version: int) -> EdgeResponse:
    return problem(
        409,
        ProblemType.ORDER_CANCELLED,
        "The order is cancelled",
        f"The order was cancelled at version {version}; a cancelled order changes no more.",
        outcome=RequestOutcome.CANCELLED,
        headers={"Location": order_location(order_id), "ETag": etag(version)},
    )


def version_mismatch(order_id: str, version: int) -> EdgeResponse:
    return problem(
        412,
        ProblemType.VERSION_MISMATCH,
        "The order has another version",
        f"If-Match does not name the order's current version, {version}.",
        outcome=RequestOutcome.VERSION_MISMATCH,
        headers={"Location": order_location(order_id), "ETag": etag(version)},
    )


def order_exists(order_id: str) -> EdgeResponse:
    return problem(
        409,
        ProblemType.ORDER_EXISTS,
        "The order exists",
        "The order this Idempotency-Key names was placed, and the key's record has expired "
        "(keys are kept 24 hours after the answer); use a new key for a new order.",
        outcome=RequestOutcome.ORDER_EXISTS,
        headers={"Location": order_location(order_id)},
    )


def unavailable(retry_after_s: int) -> EdgeResponse:
    return problem(
        503,
        ProblemType.UNAVAILABLE,
        "The service is unavailable",
        "The request could not be completed now; retry with the same Idempotency-Key.",
        outcome=RequestOutcome.UNAVAILABLE,
        headers={"Retry-After": str(retry_after_s)},
    )


def contention(attempts: int, retry_after_s: int) -> EdgeResponse:
    return problem(
        503,
        ProblemType.UNAVAILABLE,
        "The order is changing too often",
        f"Concurrent changes of this order won {attempts} times in a row; retry with the "
        "same Idempotency-Key.",
        outcome=RequestOutcome.CONTENTION,
        headers={"Retry-After": str(retry_after_s)},
    )


def not_yet_sent(retry_after_s: int) -> EdgeResponse:
    return problem(
        503,
        ProblemType.UNAVAILABLE,
        "The order is recorded but not yet sent",
        "The request was recorded; retry with the same Idempotency-Key to complete it.",
        outcome=RequestOutcome.NOT_SENT,
        headers={"Retry-After": str(retry_after_s)},
    )


def unsupported_media_type() -> EdgeResponse:
    """415 (RFC 9110, section 15.5.16): a body that is not ``application/json`` (UTF-8)."""
    return problem(
        415,
        ProblemType.UNSUPPORTED_MEDIA_TYPE,
        "Unsupported media type",
        "The body must be application/json, UTF-8.",
        outcome=RequestOutcome.INVALID,
    )


def body_too_large(max_bytes: int) -> EdgeResponse:
    """413 (RFC 9110, section 15.5.14): a body over the API's bound."""
    return problem(
        413,
        ProblemType.BODY_TOO_LARGE,
        "The body is too large",
        f"A request body may be at most {max_bytes} bytes.",
        outcome=RequestOutcome.INVALID,
    )


def invalid_principal() -> EdgeResponse:
    """403: an authenticated principal id that no authentication provider gives."""
    return problem(
        403,
        ProblemType.INVALID_PRINCIPAL,
        "The client principal is not valid",
        "The authenticated principal's id must be 1 to 100 visible ASCII characters.",
        outcome=RequestOutcome.FORBIDDEN,
    )
