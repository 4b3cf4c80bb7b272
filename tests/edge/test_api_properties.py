"""The orders API tested against its own OpenAPI document by schemathesis: the document as the
app serves it (``GET /api/openapi.json`` on the world's HTTP host), cases generated from it for
every operation, valid ones and ones that break it (a missing or malformed header, a body of the
wrong shape), each sent through the world's HTTP host and Microsoft's worker to the app's
functions (the composition root's edge on a requests container of the test's own, the world's
queue), with the function key. The changes are tried on generated order ids (404) and on an order
placed first (their 200, 409, 412 paths).

Each answer must be no server error, have a documented status, its documented media type and
headers, and a body valid against the documented schema. The cases are generated and sent by
``tests/edge/api_cases.py`` in a process of its own, so that they are the same whatever else
pytest runs (its docstring says why); a few examples per operation so the test takes well under a
minute."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import requests

from local.assembly.world import World
from local.standins.http_host import FUNCTIONS_KEY_HEADER
from shared.edge.openapi import document_bytes
from tests.edge import api_cases, test_end_to_end
from tests.edge.conftest import place_body

# The world, as the end-to-end tests compose it (a requests container of the test's own).
app_env = test_end_to_end.app_env
world = test_end_to_end.world

REPOSITORY = Path(__file__).resolve().parents[2]


async def test_the_app_serves_its_document_without_a_key(world: World) -> None:
    """The bytes checked in, as ``application/json``, to a caller with no function key."""
    answer = await asyncio.to_thread(
        requests.get, world.http.function_url("openapi.json"), timeout=30
    )
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.content == document_bytes()


async def test_the_api_answers_every_generated_case_as_its_document_says(world: World) -> None:
    auth = {FUNCTIONS_KEY_HEADER: world.function_key}
    placed = await asyncio.to_thread(
        requests.post,
        world.http.function_url("orders"),
        data=json.dumps(place_body()),
        headers={**auth, "Content-Type": "application/json", "Idempotency-Key": '"seed"'},
        timeout=30,
    )
    assert placed.status_code == 201, placed.text

    # The world's host answers on this loop while the cases' process runs.
    cases = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        api_cases.__name__,
        world.http.url,
        placed.json()["orderId"],
        cwd=REPOSITORY,
        env={**os.environ, api_cases.AUTH_VARIABLE: json.dumps(auth)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(cases.communicate(), timeout=600)
    assert cases.returncode == 0, err.decode(errors="replace")
    assert int(out.split()[-1]) >= 4 * 2 * 5  # every operation, both modes, several cases each


async def test_a_path_the_platform_cannot_decode_is_a_400_each_operation_documents(
    world: World,
) -> None:
    """An encoded NUL in the order id: the host's web server answers 400 with no body before the
    app runs (local/standins/http_host.py, as Kestrel does); a team reading the document finds
    that answer under each operation that takes an order id, said to carry no problem body."""
    document = json.loads(document_bytes())
    calls = {
        ("/orders/{orderId}", "get"): "orders/a%00b",
        ("/orders/{orderId}/amendments", "post"): "orders/a%00b/amendments",
        ("/orders/{orderId}/cancellations", "post"): "orders/a%00b/cancellations",
    }
    for (path, method), route in calls.items():
        answer = await asyncio.to_thread(
            requests.request,
            method,
            world.http.function_url(route),
            headers={FUNCTIONS_KEY_HEADER: world.function_key, "Idempotency-Key": '"nul"'},
            timeout=30,
        )
        assert (answer.status_code, answer.content) == (400, b""), (path, answer.text)
        documented = document["paths"][path][method]["responses"]["400"]
        if "$ref" in documented:
            documented = document["components"]["responses"][documented["$ref"].split("/")[-1]]
        assert "`%00`" in documented["description"] and "no body" in documented["description"]
