"""The kit names an operator's runbook only when the app gives it one: a full logical
partition (``CosmosDocumentStore(partition_full_runbook=...)``) and a parked call
(``CallingConsumerDefinition(reconciliation_runbook=...)``). Given, the description says where to
read; not given, it says nothing of a runbook, and never this repository's docs (a user's
operators must not be sent to pages they do not have).

Checked to fail: each test on the kit of before (every description named
``docs/operations.md``), and the parked test with the runbook left out of ``_parked``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import (
    MAX_DESCRIPTION_CHARS,
    NEEDS_RECONCILIATION,
    Call,
    CallingConsumerDefinition,
    Create,
    IncomingMessage,
    Looked,
    Outcome,
    PartitionFull,
    PatchOperation,
    decide_call,
)
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from local.standins.faults import FaultInjectingTransport, FaultKind, FaultRule
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings

RUNBOOK = "our wiki, Payments stuck for a person"
NOW = datetime(2026, 12, 5, 9, tzinfo=UTC)


def says_nothing_of_a_runbook(description: str) -> bool:
    return "docs/" not in description and "runbook" not in description and "(" not in description


@pytest.fixture
async def full_partition(
    app_env: dict[str, str], container: ContainerProxy
) -> AsyncIterator[tuple[ContainerProxy, FaultInjectingTransport]]:
    """The test's container through the real SDK, every create answered 403 sub-status 1014
    (the logical partition at its 20 GB)."""
    transport = FaultInjectingTransport()
    transport.add(
        FaultRule(FaultKind.STATUS, method="POST", path_suffix="/docs", status=403, sub_status=1014)
    )
    async with create_client(Settings.from_env(app_env), transport=transport) as client:
        database = client.get_database_client(app_env["COSMOS_DATABASE"])
        yield database.get_container_client(container.id), transport


@pytest.mark.parametrize("runbook", [RUNBOOK, None], ids=["given", "none"])
async def test_a_full_partition_names_the_runbook_its_store_was_given_and_no_other(
    full_partition: tuple[ContainerProxy, FaultInjectingTransport], runbook: str | None
) -> None:
    proxy, _ = full_partition
    store = CosmosDocumentStore(proxy, partition_full_runbook=runbook)

    with pytest.raises(PartitionFull) as raised:
        await store.commit("o-1", [Create({"id": "x", "orderId": "o-1"})])

    description = str(raised.value)
    assert description.startswith("Cosmos DB answered 403.1014")
    if runbook is None:
        assert description.endswith(": the logical partition is full")
        assert says_nothing_of_a_runbook(description.split(": the logical partition")[-1])
    else:
        assert description.endswith(f": the logical partition is full ({RUNBOOK})")
    assert "docs/operations.md" not in description


@dataclass(frozen=True, slots=True)
class Charge:
    """A message as ``decide_call`` handles it (the kit's ``Handled``)."""

    message_id: str
    message_type: str
    order_id: str
    version: int
    request_hash: str = "0" * 64
    hash_algorithm: str = "sha256"


class NeverCalled:
    """An effect whose call is parked already: nothing of it may run."""

    state_id = "state"
    honours_keys = True
    call_deadline_s = 5.0
    processing_bound_s = None
    clock_skew_s = 1.0
    park_after_deliveries = 3

    def new_state(self, message: Charge) -> dict[str, Any]:
        raise AssertionError("a parked call holds the state")

    def plan(self, message: Charge, state: Mapping[str, Any] | None) -> Call | None:
        raise AssertionError("a parked call holds the state")

    async def perform(self, call: Call) -> Mapping[str, Any]:
        raise AssertionError("a parked call is never made again")

    async def look_up(self, call: Call) -> Looked:
        raise AssertionError("a parked call is never looked up")

    def settled(
        self, state: Mapping[str, Any], call: Call, result: Mapping[str, Any]
    ) -> Sequence[PatchOperation]:
        raise AssertionError("a parked call holds the state")

    def measures(self, result: Mapping[str, Any]) -> Mapping[str, int]:
        return {}


def definition(runbook: str | None) -> CallingConsumerDefinition[Charge]:
    effect = NeverCalled()
    return CallingConsumerDefinition(
        name="charges",
        partition_field="orderId",
        parse=lambda incoming: Charge(str(incoming.message_id), "Charged", "o-1", 2),
        partition=lambda charge: charge.order_id,
        effect=lambda charge: effect,
        reconciliation_runbook=runbook,
    )


@pytest.mark.parametrize("runbook", [RUNBOOK, None], ids=["given", "none"])
async def test_a_message_behind_a_parked_call_names_the_definition_s_runbook_and_no_other(
    runbook: str | None,
) -> None:
    """Version 1's call is parked for an operator; version 2 is parked behind it, its
    dead-letter description naming the definition's runbook when it has one."""
    store = InMemoryDocumentStore()
    pending = {"messageId": "m-1", "key": "k-1", "operation": "capture", "reconcile": True}
    state = {"id": "state", "orderId": "o-1", "version": 1, "revision": 2, "pending": pending}
    await store.commit("o-1", [Create(state)])
    clock = ManualClock(NOW)

    decision = await decide_call(
        definition(runbook), IncomingMessage("m-2", b"{}"), store, marker_ttl_s=600, clock=clock
    )

    assert decision.outcome is Outcome.INVALID
    assert decision.deadletter_reason == NEEDS_RECONCILIATION
    description = decision.description or ""
    assert description.startswith("parked behind the call of 'm-1': call k-1 (capture)")
    assert len(description) <= MAX_DESCRIPTION_CHARS
    if runbook is None:
        assert description.endswith("its call is parked for reconciliation")
        assert says_nothing_of_a_runbook(description.split("needs an operator")[-1])
    else:
        assert description.endswith(f"its call is parked for reconciliation ({RUNBOOK})")
    assert "docs/operations.md" not in description
