"""Each crash window of the two-phase record, with the provider that honours the Idempotency-Key
and with one that honours none: where the delivery stops, what is stored then, and that the
redelivery ends with the money moved exactly once (the stand-in's ledger) and the event recorded
once. docs/guarantees.md cites these tests by name.

A stop is made at the lowest boundary each window has: the store's request (the kit's in-memory
store, held to Cosmos DB's batch by tests/contracts), the provider's answer (the stand-in's
faults over real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from idempotent_consumer import Decision, IncomingMessage, Outcome, TransientStoreError, decide_call
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.payments.consumer import payment_capture
from tests.payments.events import payment_event

CLIENT_TIMEOUT_S = 0.3
# The provider's stated processing bound and the clock skew margin: short, like the timeout.
PROCESSING_BOUND_S = 0.1
CLOCK_SKEW_S = 0.1
HOLD_S = 0.6


@pytest.fixture(params=[True, False], ids=["keys-honoured", "keys-ignored"])
def provider(request: pytest.FixtureRequest) -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn(honour_keys=request.param) as stand_in:
        yield stand_in


@pytest.fixture
async def consumer(provider: PaymentProviderStandIn) -> AsyncIterator[Consumer]:
    async with HttpPaymentProvider(
        provider.url,
        provider.api_key,
        honours_idempotency_keys=provider.honour_keys,
        timeout_s=CLIENT_TIMEOUT_S,
    ) as client:
        yield Consumer(client)


class Consumer:
    """The payment consumer over the in-memory store, one second between deliveries."""

    def __init__(self, client: HttpPaymentProvider) -> None:
        self.definition = payment_capture(
            client,
            call_deadline_s=CLIENT_TIMEOUT_S,
            processing_bound_s=PROCESSING_BOUND_S,
            clock_skew_s=CLOCK_SKEW_S,
        )
        self.store = InMemoryDocumentStore()
        self.clock = ManualClock(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))

    async def deliver(self, message: IncomingMessage) -> Decision:
        self.clock.advance(timedelta(seconds=1))
        return await decide_call(
            self.definition, message, self.store, marker_ttl_s=600, clock=self.clock
        )

    def pending(self, order_id: str) -> object:
        return self.store.documents[(order_id, "payment")]["pending"]


ACCEPTED = payment_event("o-1", 1, 4200)


def moved_once(provider: PaymentProviderStandIn) -> None:
    assert provider.net_captured("o-1") == 4200
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_stop_before_the_in_progress_record_starts_afresh(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    # A first delivery of version 1 creates its in-progress record unread: its first request.
    consumer.store.fail_next = [TransientStoreError("stopped before the record")]
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.TRANSIENT
    assert ("o-1", "payment") not in consumer.store.documents and provider.ledger == ()
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    moved_once(provider)


async def test_stop_after_the_in_progress_record_before_the_call_reaches_the_provider(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.TRANSIENT
    assert consumer.pending("o-1") and provider.ledger == ()
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    moved_once(provider)


async def test_stop_after_the_provider_committed_before_its_answer(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.TRANSIENT
    await asyncio.sleep(HOLD_S)
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    moved_once(provider)


async def test_stop_after_the_answer_before_the_completed_record(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    consumer.store.fail_next = [None, TransientStoreError("stopped before completing")]
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.TRANSIENT
    assert consumer.pending("o-1")
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    moved_once(provider)


async def test_stop_after_the_completed_record_before_the_settlement(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    calls = sum(provider.requests_received.values())
    # The settlement was lost: the broker redelivers the completed event.
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.DUPLICATE
    assert sum(provider.requests_received.values()) == calls  # not even a lookup
    moved_once(provider)


async def test_a_lock_expiry_during_the_call_lets_a_second_delivery_run_alongside(
    consumer: Consumer, provider: PaymentProviderStandIn
) -> None:
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=HOLD_S / 2))
    first = asyncio.create_task(consumer.deliver(ACCEPTED))
    await asyncio.sleep(0.05)  # the lock expired: the broker delivers it again
    second = await consumer.deliver(ACCEPTED)
    outcomes = {(await first).outcome, second.outcome}
    for _ in range(5):
        if outcomes <= {Outcome.PROCESSED, Outcome.DUPLICATE}:
            break
        await asyncio.sleep(HOLD_S)
        outcomes = {(await consumer.deliver(ACCEPTED)).outcome}
    assert outcomes <= {Outcome.PROCESSED, Outcome.DUPLICATE}
    moved_once(provider)
