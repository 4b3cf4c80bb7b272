"""What needs a person reaches one, and nothing else does: parking marks only the attempt found
inconclusive; a lookup that says the provider performed an operation twice parks it at once; the
severity-1 count is made by whichever delivery marks a call; a duplicate of an applied version is
answered while a later call is parked; a version naming another payer once money moved is never
executed; an amount Cosmos DB could not store exactly never enters. Through the real azure-cosmos
SDK against the local Cosmos DB server and the app's provider adapter against the provider
stand-in (its ledger the referee), with a provider that honours no Idempotency-Key where that
is what makes an outcome unknown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from idempotent_consumer import (
    NEEDS_RECONCILIATION,
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    Write,
    decide_call,
)

from local.standins.broker import ManualClock
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from shared.payments.capture import PAYER_CHANGED
from shared.payments.consumer import payment_capture
from shared.payments.provider import Operation, PaymentRequest
from tests.payments.conftest import COSMOS_PAYMENTS_TIMEOUT_S, CosmosPayments
from tests.payments.events import event_id, payment_event

DECLINED_CUSTOMER = "customer-declined"
LATER = timedelta(seconds=5)  # between deliveries: past any attempt's window and bound here
STILL_PROCESSING_S = 3.0  # the provider holds these requests, "in progress" on a lookup


@pytest.fixture
def provider() -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn(
        honour_keys=False, declined_customers={DECLINED_CUSTOMER}
    ) as stand_in:
        yield stand_in


class Meanwhile:
    """The store, with ``hook`` run before its ``at_read``-th read: what another delivery did
    between two requests of this one."""

    def __init__(
        self, store: DocumentStore, at_read: int, hook: Callable[[], Awaitable[None]]
    ) -> None:
        self._store, self._at, self._hook, self._reads = store, at_read, hook, 0

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        self._reads += 1
        if self._reads == self._at:
            await self._hook()
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        await self._store.commit(partition_key, writes)


class Deliveries:
    def __init__(self, payments: CosmosPayments) -> None:
        self.payments = payments
        self.definition = payment_capture(
            payments.client,
            call_deadline_s=COSMOS_PAYMENTS_TIMEOUT_S,
            processing_bound_s=0.1,
            clock_skew_s=0.1,
        )
        self.clock = ManualClock(datetime(2026, 12, 5, 9, tzinfo=UTC))

    async def deliver(
        self, message: IncomingMessage, store: DocumentStore | None = None
    ) -> Decision:
        self.clock.advance(LATER)
        return await decide_call(
            self.definition,
            message,
            store or self.payments.store,
            marker_ttl_s=600,
            clock=self.clock,
        )

    async def inconclusive(self, message: IncomingMessage) -> None:
        """``message``'s call reaches the provider, which is still processing it long after
        our client gave up: its delivery ends transient, the call pending."""
        self.payments.provider.inject(
            FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=STILL_PROCESSING_S)
        )
        assert (await self.deliver(message)).outcome is Outcome.TRANSIENT


@pytest.fixture
def deliveries(cosmos_payments: CosmosPayments) -> Deliveries:
    return Deliveries(cosmos_payments)


def third(message: IncomingMessage) -> IncomingMessage:
    return replace(message, delivery_count=3)


async def test_parking_marks_only_the_attempt_found_inconclusive(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    """The review's history: v2's third delivery finds v1's call inconclusive; meanwhile v1's
    call completes and v3 begins its own; v2 must not park v3's fresh call."""
    await deliveries.inconclusive(payment_event("o-1", 1, 4200))
    stored = await cosmos_payments.read_state("o-1")
    v3_call = {
        **stored["pending"],
        "messageId": event_id("o-1", 3),
        "version": 3,
        "key": "another-key",
        "startedAt": "2026-12-05T09:00:09.000000Z",
    }

    async def v1_completed_and_v3_began() -> None:
        await cosmos_payments.container.upsert_item(
            {**stored, "version": 1, "capturedMinor": 4200, "pending": v3_call}
        )

    store = Meanwhile(cosmos_payments.store, at_read=2, hook=v1_completed_and_v3_began)
    decided = await deliveries.deliver(third(payment_event("o-1", 2, 5000)), store)

    assert decided.outcome is Outcome.TRANSIENT  # decided again on its redelivery
    assert "reconcile" not in (await cosmos_payments.read_state("o-1"))["pending"]


async def test_a_lookup_that_found_the_operation_performed_twice_parks_it_at_once(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    accepted = payment_event("o-1", 1, 4200)
    cosmos_payments.provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    assert (await deliveries.deliver(accepted)).outcome is Outcome.TRANSIENT
    request = (await cosmos_payments.read_state("o-1"))["pending"]["request"]
    for _ in range(2):  # the provider performed it twice under one reference (no key honoured)
        await cosmos_payments.client.perform(
            PaymentRequest(
                Operation.CAPTURE,
                request["orderId"],
                request["reference"],
                request["reference"],
                request["customerId"],
                request["amountMinor"],
                request["currency"],
            )
        )

    parked = await deliveries.deliver(accepted)  # its first redelivery: no waiting helps

    assert (parked.outcome, parked.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    assert parked.measures == {"payments.reconciliation_needed": 1}
    assert "performed it 2 times" in (parked.description or "")
    state = await cosmos_payments.read_state("o-1")
    assert state["pending"]["reconcile"] is True and state["capturedMinor"] == 0


async def test_a_call_parked_by_a_later_event_is_counted_by_it(
    deliveries: Deliveries,
) -> None:
    await deliveries.inconclusive(payment_event("o-1", 1, 4200))

    parked = await deliveries.deliver(third(payment_event("o-1", 2, 5000)))

    assert (parked.outcome, parked.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    assert parked.measures == {"payments.reconciliation_needed": 1}
    behind = await deliveries.deliver(third(payment_event("o-1", 1, 4200)))
    assert behind.deadletter_reason == NEEDS_RECONCILIATION and behind.measures == {}


async def test_a_duplicate_of_an_applied_version_is_answered_while_a_later_call_is_parked(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    accepted = payment_event("o-1", 1, 4200)
    assert (await deliveries.deliver(accepted)).outcome is Outcome.PROCESSED
    amended = payment_event("o-1", 2, 5000)
    await deliveries.inconclusive(amended)
    assert (await deliveries.deliver(third(amended))).deadletter_reason == NEEDS_RECONCILIATION

    again = await deliveries.deliver(accepted)

    assert again.outcome is Outcome.DUPLICATE
    assert cosmos_payments.provider.net_captured("o-1") == 4200  # v2 still held by the provider


@pytest.mark.parametrize(
    ("customer", "currency", "changed"),
    [
        ("customer-2", "EUR", "customerId"),
        ("customer-1", "JPY", "currency"),
        ("customer-2", "JPY", "customerId and currency"),
    ],
    ids=["another-customer", "another-currency", "another-customer-and-currency"],
)
async def test_a_version_naming_another_payer_once_money_moved_goes_to_a_person(
    deliveries: Deliveries,
    cosmos_payments: CosmosPayments,
    customer: str,
    currency: str,
    changed: str,
) -> None:
    assert (await deliveries.deliver(payment_event("o-1", 1, 10_000))).outcome is (
        Outcome.PROCESSED
    )
    for total in (5_000, 16_000):  # a refund and a capture: neither on another account
        decided = await deliveries.deliver(
            payment_event("o-1", 2, total, customer_id=customer, currency=currency)
        )

        assert (decided.outcome, decided.deadletter_reason) == (Outcome.INVALID, PAYER_CHANGED)
        assert decided.measures == {"payments.payer_changed": 1}
        assert "customer-2" not in (decided.description or "")
        assert decided.description == (
            f"OrderAmended version 2 names another {changed} than the payment holding money for "
            "the order: a person decides (docs/operations.md, A payer changed after money moved)"
        )
    state = await cosmos_payments.read_state("o-1")
    assert (state["version"], state["capturedMinor"], state["customerId"]) == (
        1,
        10_000,
        "customer-1",
    )
    assert [entry.amount_minor for entry in cosmos_payments.provider.ledger] == [10_000]


async def test_before_money_moved_a_later_version_may_name_another_payer(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    declined = await deliveries.deliver(
        payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER)
    )
    assert declined.measures == {"payments.declined": 1}

    paid = await deliveries.deliver(payment_event("o-1", 2, 4200, customer_id="customer-2"))

    assert paid.outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in cosmos_payments.provider.ledger] == [4200]
    assert (await cosmos_payments.read_state("o-1"))["customerId"] == "customer-2"


async def test_a_total_cosmos_db_could_not_store_exactly_is_refused_and_writes_nothing(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    refused = await deliveries.deliver(payment_event("o-1", 1, 2**53 + 1))

    assert (refused.outcome, refused.deadletter_reason) == (Outcome.INVALID, "InvalidPayload")
    assert cosmos_payments.provider.ledger == ()
    largest = await deliveries.deliver(payment_event("o-2", 1, 10**15))
    assert largest.outcome is Outcome.PROCESSED
    assert (await cosmos_payments.read_state("o-2"))["capturedMinor"] == 10**15


async def test_an_attempt_the_provider_refused_before_processing_is_withdrawn_not_waited_for(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    """A 429 performed nothing (the provider says so): without keys and with no processing
    bound, keeping its in-progress record would park a call that never happened."""
    deliveries.definition = payment_capture(
        cosmos_payments.client, call_deadline_s=COSMOS_PAYMENTS_TIMEOUT_S, clock_skew_s=0.1
    )
    accepted = payment_event("o-1", 1, 4200)
    cosmos_payments.provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=429))

    throttled = await deliveries.deliver(accepted)

    assert throttled.outcome is Outcome.TRANSIENT
    assert (await cosmos_payments.read_state("o-1"))["pending"] is None  # withdrawn
    assert (await deliveries.deliver(third(accepted))).outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in cosmos_payments.provider.ledger] == [4200]


async def test_a_duplicate_of_an_applied_version_never_waits_for_a_later_call(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    """A later version's call in progress and inconclusive: a copy of the applied version, on
    its third delivery, is a duplicate at once; it neither looks the call up nor parks it."""
    accepted = payment_event("o-1", 1, 4200)
    assert (await deliveries.deliver(accepted)).outcome is Outcome.PROCESSED
    await deliveries.inconclusive(payment_event("o-1", 2, 5000))

    again = await deliveries.deliver(third(accepted))

    assert (again.outcome, again.measures) == (Outcome.DUPLICATE, {})
    assert "reconcile" not in (await cosmos_payments.read_state("o-1"))["pending"]


async def test_a_call_another_delivery_parked_meanwhile_is_parked_behind_and_counted_once(
    deliveries: Deliveries, cosmos_payments: CosmosPayments
) -> None:
    """v2's third delivery finds v1's call inconclusive; before it marks the call, another
    delivery has: v2 is parked behind it, says why, and neither marks nor counts it again (the
    severity-1 count is the marking delivery's)."""
    await deliveries.inconclusive(payment_event("o-1", 1, 4200))
    stored = await cosmos_payments.read_state("o-1")
    marked = {**stored["pending"], "reconcile": True}

    async def another_delivery_marked_it() -> None:
        await cosmos_payments.container.upsert_item({**stored, "pending": marked})

    store = Meanwhile(cosmos_payments.store, at_read=2, hook=another_delivery_marked_it)
    parked = await deliveries.deliver(third(payment_event("o-1", 2, 5000)), store)

    assert (parked.outcome, parked.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    assert parked.measures == {}
    call = f"call {marked['key']} ({marked['operation']})"
    assert (parked.description or "").startswith(
        f"parked behind the call of {event_id('o-1', 1)!r}: {call} needs an operator: "
        f"call {marked['key']} ("
    )
    assert "may or may not have happened: the other side is still in progress" in (
        parked.description or ""
    )
    after = await cosmos_payments.read_state("o-1")
    assert (after["pending"], after["revision"]) == (marked, stored["revision"])  # unwritten


@pytest.mark.parametrize("meanwhile", ["completed", "state-removed"])
async def test_a_call_resolved_before_it_is_marked_is_decided_again_not_parked(
    deliveries: Deliveries, cosmos_payments: CosmosPayments, meanwhile: str
) -> None:
    """v2's third delivery finds v1's call inconclusive; before it marks the call, v1's call
    completed (or an operator removed the payment's state): nothing is parked, v2 is decided
    again on its redelivery."""
    await deliveries.inconclusive(payment_event("o-1", 1, 4200))
    stored = await cosmos_payments.read_state("o-1")

    async def resolved() -> None:
        if meanwhile == "completed":
            completed = {**stored, "version": 1, "capturedMinor": 4200, "pending": None}
            await cosmos_payments.container.upsert_item(completed)
        else:
            await cosmos_payments.container.delete_item("payment", partition_key="o-1")

    store = Meanwhile(cosmos_payments.store, at_read=2, hook=resolved)
    decided = await deliveries.deliver(third(payment_event("o-1", 2, 5000)), store)

    assert (decided.outcome, decided.deadletter_reason) == (Outcome.TRANSIENT, None)
    if meanwhile == "completed":
        assert (await cosmos_payments.read_state("o-1"))["pending"] is None
