"""Smoke test of benchmark target 1: Cosmos DB requests per outcome, counted at the azure-core
transport, through the real function, the real SDK and the local Cosmos server.

Only the counts are asserted here; timing targets are checked by ``python -m bench``.
"""

from __future__ import annotations

import pytest
from azure.cosmos.aio import ContainerProxy

from bench.request_counts import count_outcomes
from bench.standin import StandIn
from bench.transport import CountingTransport
from local.broker import PeekLockQueue
from local.host import LocalFunctionsHost
from shared import runtime
from shared.config import Settings
from shared.cosmos_store import create_client


@pytest.mark.parametrize("outbox", [True, False], ids=["batch", "create_item"])
async def test_requests_per_outcome_are_1_2_2_0(
    outbox: bool,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    app_env: dict[str, str],
) -> None:
    settings = Settings.from_env({**app_env, "OUTBOX_ENABLED": str(outbox).lower()})
    transport = CountingTransport(connection_verify=False)
    client = create_client(settings, transport=transport)
    runtime.configure(
        {**app_env, "OUTBOX_ENABLED": str(outbox).lower()}, cosmos_options={"transport": transport}
    )
    standin = StandIn(app_env, settings, transport, client, container, queue, host)

    result = await count_outcomes(standin)

    outcomes = result["outcomes"]
    assert {name: outcome["documents"] for name, outcome in outcomes.items()} == {
        "new": 1,
        "duplicate": 2,
        "mismatch": 2,
        "invalid": 0,
    }
    # Once the client is warm, a message costs no metadata request either.
    assert all(outcome["total"] == outcome["documents"] for outcome in outcomes.values())
    assert outcomes["new"]["kinds"] == ({"batch": 1, "write": 1} if outbox else {"write": 1})
    assert outcomes["duplicate"]["kinds"] == outcomes["mismatch"]["kinds"]
    assert outcomes["duplicate"]["settlement"] == "complete"
    assert (outcomes["mismatch"]["settlement"], outcomes["mismatch"]["reason"]) == (
        "dead_letter",
        "HashMismatch",
    )
    assert (outcomes["invalid"]["settlement"], outcomes["invalid"]["reason"]) == (
        "dead_letter",
        "InvalidPayload",
    )
