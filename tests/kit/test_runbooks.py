"""The kit names an operator's runbook only when the app gives it one: a full logical
partition (``CosmosDocumentStore(partition_full_runbook=...)``) and a parked call
(``CallingConsumerDefinition(reconciliation_runbook=...)``). Given, the description says where to
read; not given, it says nothing of a runbook, and never this repository's docs (a user's
operators must not be sent to pages they do not have).

A parked call is counted under the definition's ``reconciliation_measure`` (the kit's
``reconciliation_needed`` by default), never this app's ``payments.`` measure.

Checked to fail: each test on the kit of before (every description named
``docs/operations.md``); the two runbook-given parked tests with the runbook left out of
``_parked``; the two measure tests with the kit's measure fixed at ``payments.``.
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
    Decision,
    Found,
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

    named = "" if runbook is None else f" ({RUNBOOK})"
    assert str(raised.value) == (
        f"Cosmos DB answered 403.1014: (403) injected fault: status 403: the logical partition "
        f"is full{named}"
    )
    # An alert handler that catches the error reads the runbook off it, not out of its text.
    assert raised.value.runbook == runbook


@dataclass(frozen=True, slots=True)
class Charge:
    """A message as ``decide_call`` handles it (the kit's ``Handled``)."""

    message_id: str
    message_type: str
    order_id: str
    version: int
    request_hash: str = "0" * 64
    hash_algorithm: str = "sha256"


class PerformedTwice:
    """An effect whose other side says it performed the pending call twice: parked at once.
    Nothing else of it may run."""

    state_id = "state"
    honours_keys = True
    call_deadline_s = 5.0
    processing_bound_s = None
    clock_skew_s = 1.0
    park_after_deliveries = 3

    def new_state(self, message: Charge) -> dict[str, Any]:
        raise AssertionError("a pending call holds the state")

    def plan(self, message: Charge, state: Mapping[str, Any] | None) -> Call | None:
        raise AssertionError("a pending call holds the state")

    async def perform(self, call: Call) -> Mapping[str, Any]:
        raise AssertionError("a call performed twice is never made again")

    async def look_up(self, call: Call) -> Looked:
        return Found({"status": "captured"}, repeats=1)

    def settled(
        self, state: Mapping[str, Any], call: Call, result: Mapping[str, Any]
    ) -> Sequence[PatchOperation]:
        raise AssertionError("a call performed twice is never completed")

    def measures(self, result: Mapping[str, Any]) -> Mapping[str, int]:
        return {}


def charges(**parking: Any) -> CallingConsumerDefinition[Charge]:
    """A calling consumer of version-2 charges of o-1; ``parking``: its reconciliation_*."""
    effect = PerformedTwice()
    return CallingConsumerDefinition(
        name="charges",
        partition_field="orderId",
        parse=lambda incoming: Charge(str(incoming.message_id), "Charged", "o-1", 2),
        partition=lambda charge: charge.order_id,
        effect=lambda charge: effect,
        **parking,
    )


async def parked(definition: CallingConsumerDefinition[Charge], pending_of: str) -> Decision:
    """Message m-2 delivered while the state of o-1 (version 1) has ``pending_of``'s call
    pending, version 2's: m-2's own call (found performed twice), or m-1's, parked already."""
    store = InMemoryDocumentStore()
    pending = {
        "messageId": pending_of,
        "messageType": "Charged",
        "about": "o-1",
        "version": 2,
        "requestHash": "0" * 64,
        "operation": "capture",
        "key": "k-1",
        "request": {"amount": 5},
        "startedAt": "2026-12-05T08:59:00.000000Z",
        "overBy": "2026-12-05T08:59:10.000000Z",
        "reconcile": pending_of != "m-2",
    }
    state = {"id": "state", "orderId": "o-1", "version": 1, "revision": 2, "pending": pending}
    await store.commit("o-1", [Create(state)])
    incoming = IncomingMessage("m-2", b"{}")
    return await decide_call(definition, incoming, store, marker_ttl_s=600, clock=ManualClock(NOW))


def parked_description(decision: Decision) -> str:
    assert decision.outcome is Outcome.INVALID
    assert decision.deadletter_reason == NEEDS_RECONCILIATION
    description = decision.description or ""
    assert len(description) <= MAX_DESCRIPTION_CHARS
    assert "docs/operations.md" not in description
    return description


async def test_a_parked_call_names_the_definition_s_runbook_and_counts_its_measure() -> None:
    decision = await parked(
        charges(reconciliation_runbook=RUNBOOK, reconciliation_measure="charges.parked"),
        pending_of="m-2",
    )

    description = parked_description(decision)
    assert description == (
        "parked: call k-1 (capture) needs an operator: call k-1 (capture): the other side "
        f"performed it 2 times ({RUNBOOK})"
    )
    assert decision.measures == {"charges.parked": 1}


async def test_a_parked_call_of_a_definition_without_a_runbook_names_none() -> None:
    decision = await parked(charges(), pending_of="m-2")

    description = parked_description(decision)
    assert description == (
        "parked: call k-1 (capture) needs an operator: call k-1 (capture): the other side "
        "performed it 2 times"
    )
    assert decision.measures == {"reconciliation_needed": 1}


@pytest.mark.parametrize("runbook", [RUNBOOK, None], ids=["given", "none"])
async def test_a_message_behind_a_parked_call_names_the_definition_s_runbook_and_no_other(
    runbook: str | None,
) -> None:
    """Version 2's call, of m-1, is parked for an operator: m-2 is parked behind it, its
    dead-letter description naming the definition's runbook when it has one; not counted
    again (the delivery that marked the call counted it)."""
    decision = await parked(charges(reconciliation_runbook=runbook), pending_of="m-1")

    description = parked_description(decision)
    named = "" if runbook is None else f" ({RUNBOOK})"
    assert description == (
        "parked behind the call of 'm-1': call k-1 (capture) needs an operator: its call is "
        f"parked for reconciliation{named}"
    )
    assert decision.measures == {}
