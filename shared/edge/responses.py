"""What the public edge answers: ``EdgeResponse``, and its RFC 9457 problem documents.

A problem document has ``type``, ``title``, ``status`` and ``detail`` (RFC 9457, section 3.1);
its media type is ``application/problem+json`` (section 6.1). The ``detail`` is the edge's own
words, bounded, and never carries a value of the request (a customer id, a key, a reason): what
a client sent is not echoed back into a response, a log or a page.

The key errors share one ``type`` (the draft's examples do: draft-ietf-httpapi-idempotency-
key-header-06, section 2.7, "body containing a link pointing to relevant documentation"); a
client tells them apart by their status (400 missing or invalid, 409 outstanding, 422 reused
with another payload), as with any resource following the draft.

Pure: no Azure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.kit.errors import bound

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


@dataclass(frozen=True, slots=True)
class EdgeResponse:
    """An HTTP answer, transport-free: the status, its headers (``Location``, ``ETag``,
    ``Content-Type``, ``Retry-After``) and its JSON body (an order's state, or a problem)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] | None = None

    @property
    def is_problem(self) -> bool:
        return self.headers.get("Content-Type") == PROBLEM_JSON


def problem(
    status: int,
    type_: str,
    title: str,
    detail: str,
    *,
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
    )


def etag(version: int) -> str:
    """An order version as a strong entity tag (RFC 9110, section 8.8.3): ``"<version>"``."""
    return f'"{version}"'
