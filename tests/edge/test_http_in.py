"""The orders API's HTTP reading (``shared.adapters.http_in``) on the worker's own
``func.HttpRequest`` objects: what reaches the core, and what is refused before it."""

from __future__ import annotations

import json

import azure.functions as func
import pytest

from shared.adapters.http_in import (
    FUNCTION_KEY_CLIENT,
    MAX_BODY_BYTES,
    OrderRequest,
    read_order_request,
    to_http_response,
)
from shared.edge import EdgeResponse
from shared.edge.observer import RequestOutcome
from shared.edge.responses import PROBLEM_JSON, ProblemType


def request(headers: dict[str, str], body: bytes = b"{}") -> func.HttpRequest:
    return func.HttpRequest(
        "POST",
        "http://localhost/api/orders/ord-1/amendments",
        headers=headers,
        route_params={"orderId": "ord-1"},
        body=body,
    )


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "Application/JSON; charset=UTF-8", 'application/json;charset="utf-8"'],
)
def test_json_in_utf_8_reaches_the_core_with_the_key_s_string_content(content_type: str) -> None:
    read = read_order_request(
        request(
            {
                "Content-Type": content_type,
                "Idempotency-Key": '"a\\"b\\\\c"',  # an RFC 8941 String with its two escapes
                "If-Match": '"2"',
            },
            b'{"reason": "caf\xc3\xa9"}',
        )
    )

    assert read == OrderRequest(FUNCTION_KEY_CLIENT, 'a"b\\c', '"2"', "ord-1", {"reason": "café"})


INVALID, FORBIDDEN = RequestOutcome.INVALID, RequestOutcome.FORBIDDEN


@pytest.mark.parametrize(
    ("headers", "status", "problem", "outcome"),
    [
        (
            {"Content-Type": "application/json; charset=utf-16"},
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            INVALID,
        ),
        ({"Content-Type": "application/merge-patch+json"}, 415, "UNSUPPORTED_MEDIA_TYPE", INVALID),
        ({}, 415, "UNSUPPORTED_MEDIA_TYPE", INVALID),
        (
            {"Content-Type": "application/json", "Idempotency-Key": '"k"; p=1'},
            400,
            "IDEMPOTENCY_KEY",
            INVALID,
        ),
        (
            {"Content-Type": "application/json", "x-ms-client-principal-id": "a b"},
            403,
            "INVALID_PRINCIPAL",
            FORBIDDEN,
        ),
    ],
)
def test_a_request_refused_before_the_core(
    headers: dict[str, str], status: int, problem: str, outcome: RequestOutcome
) -> None:
    """Refused with the outcome its report counts (``shared.edge.observer``)."""
    read = read_order_request(request(headers))

    assert isinstance(read, EdgeResponse)
    assert read.status == status and read.is_problem
    assert read.body is not None and read.body["type"] == getattr(ProblemType, problem)
    assert read.outcome is outcome


def test_a_body_that_is_not_utf_8_or_too_large_is_refused_as_invalid() -> None:
    json_type = {"Content-Type": "application/json"}
    not_utf_8 = read_order_request(request(json_type, b'{"a": "\xff"}'))
    too_large = read_order_request(request(json_type, b" " * (MAX_BODY_BYTES + 1)))

    assert isinstance(not_utf_8, EdgeResponse) and isinstance(too_large, EdgeResponse)
    assert (not_utf_8.status, not_utf_8.outcome) == (400, INVALID)
    assert (too_large.status, too_large.outcome) == (413, INVALID)


def test_the_response_on_the_wire_keeps_its_headers_and_compact_json() -> None:
    response = to_http_response(
        EdgeResponse(
            412,
            {"Content-Type": PROBLEM_JSON, "ETag": '"2"'},
            {"title": "é"},
            outcome=RequestOutcome.VERSION_MISMATCH,
        )
    )

    assert response.status_code == 412
    assert response.headers["Content-Type"] == PROBLEM_JSON
    assert response.headers["ETag"] == '"2"'
    assert json.loads(response.get_body()) == {"title": "é"}
