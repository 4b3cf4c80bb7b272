"""The orders API's OpenAPI document (``shared/edge/openapi.json``) as CI holds it: a valid
OpenAPI 3.1 document (openapi-spec-validator), with exactly the app's HTTP routes as Microsoft's
worker indexes them (each operation named after its function), and every answer the edge can
give per operation (``shared.edge.responses``, the core's successes) documented with its status,
its headers and, for a problem, its ``type``, each problem document valid against the document's
``Problem`` schema."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from openapi_schema_validator import validate as validate_instance
from openapi_spec_validator import validate

from local.standins.http_host import route_prefix_of
from local.standins.worker import REPO_ROOT, FunctionsWorker
from shared.edge import responses
from shared.edge.observer import RequestOutcome
from shared.edge.openapi import DOCUMENT_PATH, document_bytes
from shared.edge.responses import PROBLEM_JSON, EdgeResponse

ORDER_ID = "ord-1"


def document() -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(document_bytes())
    return parsed


def resolved(doc: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node``, or the component its local ``$ref`` names."""
    while "$ref" in node:
        *_, kind, name = str(node["$ref"]).split("/")
        node = doc["components"][kind][name]
    return node


def test_the_document_is_a_valid_openapi_3_1_document() -> None:
    spec = json.loads(DOCUMENT_PATH.read_text(encoding="utf-8"))
    assert spec["openapi"].startswith("3.1.")
    validate(spec)  # raises OpenAPIValidationError, naming the offending part


def test_the_validator_refuses_a_broken_document() -> None:
    """The check above can fail: a response without its required description is refused."""
    spec = document()
    del spec["paths"]["/orders"]["post"]["responses"]["201"]["description"]
    with pytest.raises(Exception, match="description"):
        validate(spec)


async def test_the_documented_operations_are_exactly_the_apps_http_routes() -> None:
    """Each ``httpTrigger`` of function_app.py, by route (under the host's route prefix, the
    document's server) and method, is one operation whose ``operationId`` is the function's
    name; the document has no other; only the document itself takes no key."""
    worker = await FunctionsWorker.start()
    try:
        triggers = {name: f.trigger for name, f in worker.functions.items()}
    finally:
        worker.close()
    routes = {
        (f"/{trigger['route']}", method.lower()): (name, trigger["authLevel"])
        for name, trigger in triggers.items()
        if trigger["type"] == "httpTrigger"
        for method in trigger["methods"]
    }
    doc = document()
    documented = {
        (path, method): (
            operation["operationId"],
            "ANONYMOUS" if operation.get("security", doc["security"]) == [] else "FUNCTION",
        )
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if method != "parameters"
    }
    assert documented == routes
    assert [server["url"] for server in doc["servers"]] == [
        f"/{route_prefix_of(REPO_ROOT / 'host.json')}"
    ]
    schemes = doc["components"]["securitySchemes"]
    assert {(s["in"], s["name"]) for s in schemes.values()} == {
        ("header", "x-functions-key"),
        ("query", "code"),
    }


# Every answer each operation can give: the edge's problems (shared.edge.responses, called as
# the core, the view and the HTTP layer call them) and its successes (shared.edge.core).
_HTTP_LAYER: list[Callable[[], EdgeResponse]] = [
    responses.invalid_principal,
    responses.unsupported_media_type,
    lambda: responses.body_too_large(65536),
]
_KEYED: list[Callable[[], EdgeResponse]] = [
    *_HTTP_LAYER,
    responses.missing_key,
    responses.invalid_key,
    responses.key_reused,
    lambda: responses.outstanding(3),
    lambda: responses.invalid_order("lines: at least 1 item"),
    lambda: responses.unavailable(1),
    lambda: responses.not_yet_sent(10),
]
_CHANGE: list[Callable[[], EdgeResponse]] = [
    *_KEYED,
    responses.invalid_precondition,
    responses.not_found,
    lambda: responses.cancelled(ORDER_ID, 3),
    lambda: responses.version_mismatch(ORDER_ID, 2),
    lambda: responses.contention(5, 1),
]
CREATED, FOUND = RequestOutcome.CREATED, RequestOutcome.FOUND
_ACCEPTED_HEADERS = {"Location": f"/api/orders/{ORDER_ID}", "ETag": '"2"'}
ANSWERS: dict[tuple[str, str], list[Callable[[], EdgeResponse]]] = {
    ("/orders", "post"): [
        *_KEYED,
        lambda: responses.order_exists(ORDER_ID),
        lambda: EdgeResponse(
            201, {"Content-Type": "application/json", **_ACCEPTED_HEADERS}, outcome=CREATED
        ),
    ],
    ("/orders/{orderId}/amendments", "post"): [
        *_CHANGE,
        lambda: EdgeResponse(
            200, {"Content-Type": "application/json", **_ACCEPTED_HEADERS}, outcome=CREATED
        ),
    ],
    ("/orders/{orderId}/cancellations", "post"): [
        *_CHANGE,
        lambda: EdgeResponse(
            200, {"Content-Type": "application/json", **_ACCEPTED_HEADERS}, outcome=CREATED
        ),
    ],
    ("/orders/{orderId}", "get"): [
        responses.invalid_principal,
        responses.not_found,
        lambda: responses.unavailable(1),
        lambda: EdgeResponse(
            200, {"Content-Type": "application/json", "ETag": '"2"'}, outcome=FOUND
        ),
    ],
}


def test_every_problem_the_edge_can_give_is_among_the_answers_checked() -> None:
    """A problem added to shared.edge.responses must be placed in ``ANSWERS`` (and so in the
    document) before this passes: each public builder of an ``EdgeResponse``, called with
    example arguments, gives a (status, type) that some operation's answers give."""
    examples: dict[str, object] = {"int": 1, "str": ORDER_ID}
    given = set()
    for name, builder in inspect.getmembers(responses, inspect.isfunction):
        signature = inspect.signature(builder)
        if (
            name.startswith("_")
            or name == "problem"
            or signature.return_annotation != ("EdgeResponse")
        ):
            continue
        answer = builder(*(examples[str(p.annotation)] for p in signature.parameters.values()))
        given.add((answer.status, answer.body["type"]))
    checked = {
        (answer.status, answer.body["type"])
        for answers in ANSWERS.values()
        for answer in (build() for build in answers)
        if answer.is_problem and answer.body is not None
    }
    assert len(given) >= 11
    assert given <= checked, given - checked


@pytest.mark.parametrize(("path", "method"), list(ANSWERS))
def test_each_answer_of_an_operation_is_documented(path: str, method: str) -> None:
    """Its status is a documented response; each header it sends is declared there (a
    ``required`` one always sent); its media type is the documented one; a problem's body is
    valid against the ``Problem`` schema (its ``type`` among the documented ones)."""
    doc = document()
    documented = doc["paths"][path][method]["responses"]
    problem_schema = doc["components"]["schemas"]["Problem"]
    for answer in (build() for build in ANSWERS[(path, method)]):
        assert str(answer.status) in documented, (path, method, answer.status)
        response = resolved(doc, documented[str(answer.status)])
        declared = {
            name: resolved(doc, header) for name, header in response.get("headers", {}).items()
        }
        sent = {name for name in answer.headers if name != "Content-Type"}
        assert sent <= set(declared), (path, method, answer.status, sent)
        assert {n for n, h in declared.items() if h.get("required")} <= sent
        assert [answer.headers["Content-Type"]] == list(response["content"])
        if answer.is_problem:
            assert answer.headers["Content-Type"] == PROBLEM_JSON
            validate_instance(answer.body, problem_schema)  # OpenAPI 3.1's dialect
