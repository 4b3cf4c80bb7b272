"""The orders API's generated cases for ``tests/edge/test_api_properties.py``, run in a process of
their own: ``python -m tests.edge.api_cases ORIGIN ORDER_ID``, the function key's header and value
in the environment (``API_CASES_AUTH``, a JSON object); it prints the number of cases sent, and
fails with schemathesis' report of the first answer that breaks the document.

Why a process of its own: Hypothesis draws some strings and numbers from a pool of the literals
of every "local" module in ``sys.modules`` (neither stdlib, nor site-packages, nor a test file)
when it generates a case (hypothesis/internal/conjecture/providers.py ``_get_local_constants``
and ``_maybe_draw_constant``; internal/constants_ast.py ``is_local_module_file``; hypothesis
6.170). In pytest's process that pool is whatever every collected test had imported, so the
derandomized cases changed with the files run together (``tests/edge`` whole drew an order id
that the file alone never did). Here the pool is the literals of the app's HTTP edge, imported
below on purpose, and the cases are the same whatever pytest runs around them.

Each case has an Idempotency-Key of its own (a ``map_headers`` hook: a valid generated key is
replaced by a fresh one, so a case is a new request, not a replay of another's; an invalid one is
kept, it is what the case tests). Deterministic: hypothesis derandomized, no example database.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode, HookContext
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import shared.adapters.http_in
import shared.edge

# The modules whose literals Hypothesis may draw from (the module docstring): the app's edge.
CONSTANTS_FROM = (shared.adapters.http_in, shared.edge)
AUTH_VARIABLE = "API_CASES_AUTH"
MAX_EXAMPLES = 15  # per operation and generation mode
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
_VALID_KEY = re.compile(r'"([\x21\x23-\x5b\x5d-\x7e]|\\["\\]){1,255}"')
_CHANGES = ("/orders/{orderId}/amendments", "/orders/{orderId}/cancellations")


def run_generated_cases(origin: str, auth: dict[str, str], order_id: str) -> int:
    """Every operation's cases, both modes, sent to ``origin``; the changes also on ``order_id``
    (an order placed first: their 200, 409, 412 paths). The number of cases sent."""
    schema = schemathesis.openapi.from_url(f"{origin}/api/openapi.json")
    keys = itertools.count()

    @schema.hook
    def map_headers(context: HookContext, headers: dict[str, Any] | None) -> dict[str, Any] | None:
        if headers and _VALID_KEY.fullmatch(str(headers.get("Idempotency-Key", ""))):
            headers["Idempotency-Key"] = f'"property-case-{next(keys)}"'
        return headers

    @schema.hook
    def filter_headers(context: HookContext, headers: dict[str, Any] | None) -> bool:
        # ASCII header values only: the local HTTP host answers a value with a byte above 0x7F
        # (RFC 9110's obs-text) with a 500 of its own (it cannot hand the worker such a value,
        # local/standins/http_host.py), where Kestrel's answer is not modelled: a gap of the
        # stand-in, not of the app, and so not what this test is about.
        return all(str(value).isascii() for value in (headers or {}).values())

    sent = 0
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the document loads whole
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)
            if operation.path in _CHANGES:
                placed_order = operation.as_strategy(
                    generation_mode=mode, path_parameters={"orderId": order_id}
                )
                strategy = st.one_of(strategy, placed_order)

            @settings(
                max_examples=MAX_EXAMPLES,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy)
            def answered_as_documented(case: Case[Any]) -> None:
                nonlocal sent
                sent += 1
                case.call_and_validate(
                    base_url=f"{origin}/api", headers=auth, checks=CHECKS, timeout=30
                )

            answered_as_documented()
    return sent


if __name__ == "__main__":
    origin, order_id = sys.argv[1:]
    print(run_generated_cases(origin, json.loads(os.environ[AUTH_VARIABLE]), order_id))
