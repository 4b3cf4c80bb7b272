"""A slow store never makes a call twice: the kit's windows (``shared.kit.external``, "Time is a
premise") held against the store's answers delayed at the azure-core transport, under the real
azure-cosmos SDK and the local Cosmos DB server, with the provider stand-in's ledger the referee,
in both key modes.

The history the review reproduced: delivery A writes its in-progress record, the store commits it
but answers late (a throttled write the SDK retried, a slow store: here 1.2 s, four times the
provider client's timeout); a copy B of the same event arrives meanwhile, finds the attempt and
waits until it is provably over, then looks the reference up, finds nothing and makes the call.
When A hears back, its window has passed: it must not send. Before the windows, A's call left
then too, and a provider that honours no key held twice the order's total.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from idempotent_consumer import (
    SYSTEM_CLOCK,
    CallingConsumerDefinition,
    Decision,
    IncomingMessage,
    Outcome,
    ValidEvent,
    decide_call,
)

from local.standins.faults import WRITES, FaultKind, FaultRule
from local.standins.payment_provider import PaymentProviderStandIn
from shared.payments.consumer import payment_capture
from tests.payments.conftest import COSMOS_PAYMENTS_TIMEOUT_S as CLIENT_TIMEOUT_S
from tests.payments.conftest import CosmosPayments
from tests.payments.events import payment_event

PROCESSING_BOUND_S = 0.1
CLOCK_SKEW_S = 0.1
STORE_LATE_S = 1.2  # the in-progress record's answer: four client timeouts late


@pytest.fixture(params=[True, False], ids=["keys-honoured", "keys-ignored"])
def provider(request: pytest.FixtureRequest) -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn(honour_keys=request.param) as stand_in:
        yield stand_in


def consumer(
    cosmos_payments: CosmosPayments, processing_bound_s: float | None
) -> CallingConsumerDefinition[ValidEvent]:
    return payment_capture(
        cosmos_payments.client,
        call_deadline_s=CLIENT_TIMEOUT_S,
        processing_bound_s=processing_bound_s,
        clock_skew_s=CLOCK_SKEW_S,
    )


async def decide(
    cosmos_payments: CosmosPayments,
    definition: CallingConsumerDefinition[ValidEvent],
    sent: IncomingMessage,
) -> Decision:
    return await decide_call(
        definition, sent, cosmos_payments.store, marker_ttl_s=600, clock=SYSTEM_CLOCK
    )


async def copies_until_done(
    cosmos_payments: CosmosPayments,
    definition: CallingConsumerDefinition[ValidEvent],
    sent: IncomingMessage,
) -> list[Outcome]:
    """Copy B, retried every 0.1 s as its delivery's retry policy would, until it is done."""
    outcomes: list[Outcome] = []
    for _ in range(60):
        outcome = (await decide(cosmos_payments, definition, sent)).outcome
        outcomes.append(outcome)
        if outcome in (Outcome.PROCESSED, Outcome.DUPLICATE):
            return outcomes
        await asyncio.sleep(0.1)
    raise AssertionError(f"copy B never finished: {outcomes}")


async def a_slow_first_delivery_and_a_copy(
    cosmos_payments: CosmosPayments, processing_bound_s: float | None
) -> tuple[Decision, list[Outcome], Decision]:
    definition = consumer(cosmos_payments, processing_bound_s)
    accepted = payment_event("o-1", 1, 4200)
    # The in-progress record is the first write: committed at once, answered late.
    cosmos_payments.transport.add(
        FaultRule(FaultKind.SLOW_RESPONSE, **WRITES, delay_s=STORE_LATE_S, read_timeout_s=10)
    )
    first = asyncio.create_task(decide(cosmos_payments, definition, accepted))
    for _ in range(50):  # until the record is in the store (its answer is still on its way)
        await asyncio.sleep(0.05)
        try:
            if (await cosmos_payments.read_state("o-1")).get("pending"):
                break
        except Exception:  # noqa: BLE001 - not written yet
            continue
    copy = await copies_until_done(cosmos_payments, definition, accepted)
    a = await first
    again = await decide(cosmos_payments, definition, accepted)  # A's redelivery
    return a, copy, again


async def test_a_copy_arriving_while_the_in_progress_write_answers_late_charges_once(
    cosmos_payments: CosmosPayments,
) -> None:
    a, copy, again = await a_slow_first_delivery_and_a_copy(cosmos_payments, PROCESSING_BOUND_S)

    assert cosmos_payments.provider.net_captured("o-1") == 4200
    assert [entry.amount_minor for entry in cosmos_payments.provider.ledger] == [4200]
    # A heard back after its window: it sent nothing and decided again later.
    assert a.outcome in (Outcome.TRANSIENT, Outcome.DUPLICATE)
    assert copy[-1] is Outcome.PROCESSED and again.outcome is Outcome.DUPLICATE
    state = await cosmos_payments.read_state("o-1")
    assert (state["capturedMinor"], state["version"], state["pending"]) == (4200, 1, None)


async def test_without_a_processing_bound_a_withdrawn_attempt_is_made_once(
    cosmos_payments: CosmosPayments,
) -> None:
    """No bound stated: an attempt that may have been sent is never made again without keys.
    This one never left (its sender withdrew it, the window having passed), so the copy makes
    it once the record is withdrawn."""
    a, copy, again = await a_slow_first_delivery_and_a_copy(cosmos_payments, None)

    assert [entry.amount_minor for entry in cosmos_payments.provider.ledger] == [4200]
    assert a.outcome is Outcome.TRANSIENT  # withdrawn unsent
    assert copy[-1] is Outcome.PROCESSED and again.outcome is Outcome.DUPLICATE
    if not cosmos_payments.provider.honour_keys:
        # Before the withdrawal the copy could not tell: it waited, never called.
        assert Outcome.TRANSIENT in copy
