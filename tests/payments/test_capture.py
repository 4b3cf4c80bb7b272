"""The payment capture consumer (``shared.payments`` on ``shared.kit.external``) through the
real provider adapter (aiohttp) against the provider stand-in over HTTP, over the kit's
in-memory store. The stand-in's ledger (the money that moved) is the referee of every test."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from idempotent_consumer import (
    HASH_ALGORITHM,
    NEEDS_RECONCILIATION,
    ConditionFailed,
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    TransientStoreError,
    Write,
    decide_call,
    marker_id,
    release_call,
)
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from shared.adapters.payment_profile import REFUND_EXCEEDS_CAPTURED
from shared.adapters.payment_provider import CAPTURES_PATH, OPERATIONS_PATH, HttpPaymentProvider
from shared.payments.consumer import payment_capture
from shared.payments.contract import parse_event
from shared.payments.provider import Operation
from tests.payments.events import event_id, payment_event

CLIENT_TIMEOUT_S = 0.3
# The provider's stated processing bound and the clock skew margin: short, like the timeout.
PROCESSING_BOUND_S = 0.1
CLOCK_SKEW_S = 0.1
HOLD_S = 0.6
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
DECLINED_CUSTOMER = "customer-declined"


@pytest.fixture
def provider() -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn(declined_customers={DECLINED_CUSTOMER}) as stand_in:
        yield stand_in


@pytest.fixture
async def client(provider: PaymentProviderStandIn) -> AsyncIterator[HttpPaymentProvider]:
    async with HttpPaymentProvider(
        provider.url, provider.api_key, timeout_s=CLIENT_TIMEOUT_S
    ) as adapter:
        yield adapter


class Payments:
    """The consumer on a store, a provider client and a clock the test moves."""

    def __init__(self, client: HttpPaymentProvider, *, honours_keys: bool = True) -> None:
        self.client = client
        client.honours_idempotency_keys = honours_keys
        self.definition = payment_capture(
            client,
            call_deadline_s=CLIENT_TIMEOUT_S,
            processing_bound_s=PROCESSING_BOUND_S,
            clock_skew_s=CLOCK_SKEW_S,
        )
        self.store = InMemoryDocumentStore()
        self.clock = ManualClock(NOW)

    async def handle(self, message: IncomingMessage) -> Decision:
        """A delivery one second after the last one."""
        self.clock.advance(timedelta(seconds=1))
        return await self.decide(message)

    async def decide(
        self, message: IncomingMessage, store: DocumentStore | None = None, **options: Any
    ) -> Decision:
        """A delivery now, on ``store`` (this consumer's by default)."""
        return await decide_call(
            self.definition,
            message,
            self.store if store is None else store,
            marker_ttl_s=600,
            clock=self.clock,
            **options,
        )

    async def decide_while_processed(
        self, message: IncomingMessage, other: IncomingMessage
    ) -> Decision:
        """``message`` decided now while ``other`` is handled, and processed, between this
        delivery's read and its first commit (another delivery acting meanwhile)."""

        async def the_other_delivery() -> None:
            assert (await self.handle(other)).outcome is Outcome.PROCESSED

        return await self.decide(message, CommitsAfter(self.store, the_other_delivery))

    async def stopped_after_the_call(self, message: IncomingMessage) -> Decision:
        """``message`` delivered a second after the last: its call begun and made, then the
        delivery stopped before its completed record (the completing batch fails)."""
        self.store.fail_next = [None, TransientStoreError("stopped")]  # begin, then complete
        return await self.handle(message)

    def state(self, order_id: str) -> dict[str, object]:
        return self.store.documents[(order_id, "payment")]


@pytest.fixture
def payments(client: HttpPaymentProvider) -> Payments:
    return Payments(client)


async def test_an_accepted_order_is_captured_once_whatever_the_redeliveries(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    accepted = payment_event("o-1", 1, 4200)
    first = await payments.handle(accepted)
    again = await payments.handle(accepted)
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert provider.net_captured("o-1") == 4200
    assert len(provider.ledger) == 1


async def test_a_processed_event_s_marker_expires_after_the_configured_retention(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The marker is what makes a redelivery a duplicate; it is kept for the retention the app
    # configures (``marker_ttl_s``, 600 s here), Cosmos DB's per-item ttl, and not forever. It
    # says how the event was handled, as the operator's history shows it (ops/history.py).
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED
    marker = payments.store.documents[
        ("o-1", marker_id(payments.definition.name, event_id("o-1", 1)))
    ]
    assert (marker["ttl"], marker["outcome"]) == (600, "processed")
    assert provider.net_captured("o-1") == 4200


async def test_amendments_capture_or_refund_the_difference_and_a_cancellation_refunds_all(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    await payments.handle(payment_event("o-1", 1, 4200))
    await payments.handle(payment_event("o-1", 2, 5000))
    assert provider.net_captured("o-1") == 5000
    await payments.handle(payment_event("o-1", 3, 1000))
    assert provider.net_captured("o-1") == 1000
    await payments.handle(payment_event("o-1", 4, None))
    assert provider.net_captured("o-1") == 0
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800, 4000, 1000]


async def test_a_change_of_one_minor_unit_captures_or_refunds_that_unit(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    await payments.handle(payment_event("o-1", 1, 4200))
    await payments.handle(payment_event("o-1", 2, 4201))
    assert provider.net_captured("o-1") == 4201
    await payments.handle(payment_event("o-1", 3, 4200))
    assert provider.net_captured("o-1") == 4200
    assert [(entry.operation, entry.amount_minor) for entry in provider.ledger] == [
        (Operation.CAPTURE, 4200),
        (Operation.CAPTURE, 1),
        (Operation.REFUND, 1),
    ]


async def test_an_acceptance_s_first_delivery_begins_its_call_unread_and_a_redelivery_reads(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The floor: the in-progress record created (the check that no state exists), the call,
    # the completed batch; no read of a state that cannot be there yet.
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED
    assert payments.store.requests == ["create", "batch"]
    payments.store.requests.clear()
    # Its redelivery reads first (the state is likely there): the read, the refused marker and
    # the marker's read; no refused create before them.
    again = await payments.handle(replace(accepted, delivery_count=2))
    assert again.outcome is Outcome.DUPLICATE
    assert payments.store.requests == ["read", "create", "read"]
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_an_acceptance_without_a_delivery_count_is_a_first_delivery_begun_unread(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # A message whose AMQP header is absent has no delivery count (``to_incoming``): it is
    # taken for a first delivery, at the floor's two writes and no read.
    accepted = replace(payment_event("o-1", 1, 4200), delivery_count=None)
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED
    assert payments.store.requests == ["create", "batch"]
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_a_late_acceptance_s_unread_create_is_refused_and_it_is_stale_without_a_call(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    await payments.handle(payment_event("o-1", 2, None))
    payments.store.requests.clear()
    late = await payments.handle(payment_event("o-1", 1, 4200))
    # The create refused (a state exists), then read: a version below it, its marker alone.
    assert payments.store.requests == ["create", "read", "create"]
    assert late.outcome is Outcome.STALE and provider.ledger == ()


async def test_a_cancellation_before_the_acceptance_moves_no_money(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    cancelled = await payments.handle(payment_event("o-1", 2, None))
    late = await payments.handle(payment_event("o-1", 1, 4200))
    assert (cancelled.outcome, late.outcome) == (Outcome.PROCESSED, Outcome.STALE)
    assert provider.ledger == ()


async def test_a_timeout_after_the_provider_committed_is_resumed_with_the_same_key(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    first = await payments.handle(accepted)
    assert first.outcome is Outcome.TRANSIENT  # the outcome is unknown: retried, then abandoned
    pending = payments.state("o-1")["pending"]
    assert isinstance(pending, dict) and pending["key"]
    await asyncio.sleep(HOLD_S)
    again = await payments.handle(replace(accepted, delivery_count=2))
    assert again.outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1
    assert {entry.idempotency_key for entry in provider.ledger} == {pending["key"]}


class CommitsAfter:
    """The store, with ``meanwhile`` run once before its first commit: another delivery acting
    between this one's read and its write; with ``then``, right after that commit instead:
    between this one's first write (a claim) and its next step (the send)."""

    def __init__(
        self, store: DocumentStore, meanwhile: Callable[[], Awaitable[None]], *, then: bool = False
    ) -> None:
        self._store, self._meanwhile, self._then = store, meanwhile, then
        self._ran = False

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        if self._ran:
            await self._store.commit(partition_key, writes)
            return
        self._ran = True
        if self._then:
            await self._store.commit(partition_key, writes)
        await self._meanwhile()
        if not self._then:
            await self._store.commit(partition_key, writes)


class RefusedEveryTime:
    """The store, with every write refused by its condition: another writer moved the state
    between each of this delivery's reads and its write."""

    def __init__(self, store: DocumentStore) -> None:
        self._store = store

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        raise ConditionFailed(0, "payment")


async def never_sent(payments: Payments, provider: PaymentProviderStandIn) -> IncomingMessage:
    """An acceptance whose first delivery recorded its call, which the provider answered 503
    before processing it: the call is left in progress, and no money moved."""
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    assert payments.state("o-1")["pending"] and provider.ledger == ()
    return replace(accepted, delivery_count=2)


def pending_key(payments: Payments) -> str:
    pending = payments.state("o-1")["pending"]
    assert isinstance(pending, dict)
    return str(pending["key"])


async def test_a_call_never_sent_is_resumed_at_one_lookup_one_claim_one_send_one_completion(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Keys honoured: the redelivery reads the call in progress, the provider has none, so it
    # claims the call (the state's revision moved) and sends it under its key, then completes
    # from the state it claimed: no second round (bench target 10's 1r+2w+2c).
    redelivered = await never_sent(payments, provider)
    payments.store.requests.clear()
    before = provider.requests_received

    again = await payments.handle(redelivered)

    assert again.outcome is Outcome.PROCESSED
    assert payments.store.requests == ["read", "batch", "batch"]
    assert provider.requests_received - before == Counter(
        {f"GET {OPERATIONS_PATH}": 1, f"POST {CAPTURES_PATH}": 1}
    )
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_a_resumed_call_the_provider_refuses_before_processing_is_withdrawn_at_once(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The resumed send answered 429: the provider performed nothing, so the claimed call is
    # withdrawn (not left for the next delivery to look up again) and the delivery is retried;
    # the next one makes it afresh under the same key.
    redelivered = await never_sent(payments, provider)
    key = pending_key(payments)
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=429))

    throttled = await payments.handle(redelivered)

    assert throttled.outcome is Outcome.TRANSIENT
    assert throttled.description is not None
    assert throttled.description.startswith(f"TransientStoreError: provider, capture {key}: ")
    assert payments.state("o-1")["pending"] is None
    assert [entry.amount_minor for entry in provider.ledger] == []
    assert (await payments.handle(replace(redelivered, delivery_count=3))).outcome is (
        Outcome.PROCESSED
    )
    assert [(entry.amount_minor, entry.idempotency_key) for entry in provider.ledger] == [
        (4200, key)
    ]


async def test_of_two_deliveries_resuming_one_call_the_later_claim_is_refused_and_says_so(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Both read the call in progress and both find nothing at the provider; the other one
    # claims, sends and completes it before this one's claim, which the moved revision
    # refuses: this delivery sends nothing and says why.
    redelivered = await never_sent(payments, provider)
    key = pending_key(payments)

    refused = await payments.decide_while_processed(redelivered, redelivered)

    assert refused.outcome is Outcome.TRANSIENT
    assert refused.description == (
        f"TransientStoreError: call {key}: the state moved while its call was being resumed"
    )
    assert [entry.amount_minor for entry in provider.ledger] == [4200]
    assert (await payments.handle(redelivered)).outcome is Outcome.DUPLICATE


async def test_a_delivery_whose_state_moves_under_every_attempt_gives_up_saying_so(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Each round reads the state and plans its call, and each begin is refused: after the
    # kit's four rounds the delivery is retried later, saying why, and no money moved.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED
    amended = payment_event("o-1", 2, 5000)
    payments.store.requests.clear()

    raced = await payments.decide(amended, RefusedEveryTime(payments.store))

    assert raced.outcome is Outcome.TRANSIENT
    assert raced.description == (
        f"TransientStoreError: OrderAmended {amended.message_id!r}: the state of 'o-1' changed "
        "under 4 attempts"
    )
    assert payments.store.requests == ["read"] * 4
    assert [entry.amount_minor for entry in provider.ledger] == [4200]
    assert payments.state("o-1")["version"] == 1


async def test_an_amendment_that_moves_no_money_still_takes_its_version(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # No call, but the payment is now at version 2 (what the operator's tool shows, and what
    # makes an older version stale), with the event's marker.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED
    unchanged = payment_event("o-1", 2, 4200)
    assert (await payments.handle(unchanged)).outcome is Outcome.PROCESSED
    assert (payments.state("o-1")["version"], payments.state("o-1")["capturedMinor"]) == (2, 4200)
    assert (await payments.handle(unchanged)).outcome is Outcome.DUPLICATE
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_an_amendment_that_moves_no_money_yields_to_a_later_one_that_moved_the_state(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Version 2 changes nothing the provider holds; between its read and its write version 3
    # captures 800 more. Its write is conditional on the revision it read, so it is refused,
    # and read again version 2 is stale: the order stays at version 3 and its 5000.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED
    unchanged = await payments.decide_while_processed(
        payment_event("o-1", 2, 4200), payment_event("o-1", 3, 5000)
    )

    assert unchanged.outcome is Outcome.STALE
    assert (payments.state("o-1")["version"], payments.state("o-1")["capturedMinor"]) == (3, 5000)
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]
    assert provider.net_captured("o-1") == 5000


async def test_an_amendment_read_before_a_later_one_moved_no_money_is_stale_and_moves_none(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Version 2 (5000) reads the payment at version 1; before its write, version 3 (back to
    # 4200) moves the payment to version 3 without a call. That move takes the revision up, so
    # version 2's begin, conditional on the revision it read, is refused, and read again it is
    # stale: no 800 captured for a version the order has left.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED

    earlier = await payments.decide_while_processed(
        payment_event("o-1", 2, 5000), payment_event("o-1", 3, 4200)
    )

    assert earlier.outcome is Outcome.STALE
    assert (payments.state("o-1")["version"], payments.state("o-1")["capturedMinor"]) == (3, 4200)
    assert [entry.amount_minor for entry in provider.ledger] == [4200]
    assert (await payments.handle(payment_event("o-1", 4, 5000))).outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 5000


async def test_a_delivery_never_takes_over_a_call_begun_after_its_read(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Version 4 (6000) reads the payment at version 1. Before its write, version 2 moves it
    # without a call and version 3 (4400) begins its 200, which the provider refuses before
    # processing (503). Every write takes the revision up, never back to the value version 4
    # read, so its begin is refused; read again, it finishes version 3's call first: each
    # version's own call, in order.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED

    async def two_later_versions() -> None:
        assert (await payments.handle(payment_event("o-1", 2, 4200))).outcome is (Outcome.PROCESSED)
        provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
        assert (await payments.handle(payment_event("o-1", 3, 4400))).outcome is (Outcome.TRANSIENT)

    latest = await payments.decide(
        payment_event("o-1", 4, 6000), CommitsAfter(payments.store, two_later_versions)
    )

    assert latest.outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 200, 1600]
    assert provider.net_captured("o-1") == 6000


async def test_a_delivery_that_read_before_another_completed_its_call_never_begins_it_again(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Two deliveries of version 2 read the state; the other begins, sends and completes the
    # call first. Its completion moves the revision up, never back to the value read, so this
    # one's begin, conditional on that value, is refused, and read again version 2 is done: no
    # call begun again and left pending on the order, and version 3 moves its own money.
    assert (await payments.handle(payment_event("o-1", 1, 4200))).outcome is Outcome.PROCESSED
    amended = payment_event("o-1", 2, 5000)

    again = await payments.decide_while_processed(replace(amended, delivery_count=2), amended)

    assert again.outcome is Outcome.DUPLICATE
    assert payments.state("o-1")["pending"] is None
    assert (await payments.handle(payment_event("o-1", 3, 6000))).outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800, 1000]
    assert provider.net_captured("o-1") == 6000


async def test_of_two_deliveries_finishing_one_call_the_later_completion_is_a_duplicate(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Both find the call made (its answer was lost after the provider committed); the other
    # completes it first. This one's completing batch is refused (the event's marker exists):
    # read again, the event is a duplicate, not a second processing of it.
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    await asyncio.sleep(HOLD_S)
    redelivered = replace(accepted, delivery_count=2)

    later = await payments.decide_while_processed(redelivered, redelivered)

    assert later.outcome is Outcome.DUPLICATE
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


class HeldBeforeCommit:
    """The store, its first commit held until ``gate`` opens; ``reached`` is set once the
    delivery is there (it has read and decided what to write)."""

    def __init__(self, store: DocumentStore) -> None:
        self._store = store
        self.reached, self.gate = asyncio.Event(), asyncio.Event()

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        if not self.reached.is_set():
            self.reached.set()
            await self.gate.wait()
        await self._store.commit(partition_key, writes)


async def test_a_completion_from_a_state_read_before_a_claim_and_a_withdrawal_is_refused(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Completing a call is conditional on the revision read, as every write of the kit's is.
    # Delivery 2 claims the call left in progress; before its send, delivery 3 claims it too,
    # delivery 4 reads that claim and finds nothing at the provider, and delivery 3's send is
    # refused before processing (429), so it withdraws the call. Then delivery 2's send
    # captures, and its completion, from the revision it claimed, is refused: read again, it
    # makes the call afresh under its key (the provider replays it) and completes. Delivery 4's
    # claim comes last and is refused. Unconditional, the completion would have written the
    # revision back to delivery 3's claim, delivery 4's claim would land on the completed
    # payment, and the call, pending again and completed already, would hold every later
    # version of the order.
    redelivered = await never_sent(payments, provider)
    key = pending_key(payments)
    fourth = HeldBeforeCommit(payments.store)
    reading: list[asyncio.Task[Decision]] = []

    async def fourth_reads_the_third_s_claim() -> None:
        reading.append(
            asyncio.create_task(payments.decide(replace(redelivered, delivery_count=4), fourth))
        )
        await fourth.reached.wait()
        provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=429))

    async def third_claims_and_withdraws() -> None:
        third = await payments.decide(
            replace(redelivered, delivery_count=3),
            CommitsAfter(payments.store, fourth_reads_the_third_s_claim, then=True),
        )
        assert third.outcome is Outcome.TRANSIENT

    second = await payments.decide(
        redelivered, CommitsAfter(payments.store, third_claims_and_withdraws, then=True)
    )
    fourth.gate.set()
    last = await reading[0]

    assert second.outcome is Outcome.PROCESSED
    assert last.outcome is Outcome.TRANSIENT
    assert last.description == (
        f"TransientStoreError: call {key}: the state moved while its call was being resumed"
    )
    assert payments.state("o-1")["pending"] is None
    assert (await payments.handle(payment_event("o-1", 2, 5000))).outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]
    assert provider.net_captured("o-1") == 5000


async def test_a_lookup_that_cannot_reach_the_provider_is_retried_and_keeps_the_call(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # A lookup performs nothing, so its errors never withdraw the call it looks up: the pending
    # call stays (its answer was lost: the money moved) and a later delivery finishes it.
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    pending = payments.state("o-1")["pending"]
    with socket.socket() as closed:  # a port nobody listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    async with HttpPaymentProvider(
        f"http://127.0.0.1:{port}", "key", timeout_s=CLIENT_TIMEOUT_S
    ) as unreachable:
        cut_off = Payments(unreachable)
        cut_off.store, cut_off.clock = payments.store, payments.clock
        looked_up = await cut_off.handle(replace(accepted, delivery_count=2))

    assert looked_up.outcome is Outcome.TRANSIENT
    assert payments.state("o-1")["pending"] == pending
    await asyncio.sleep(HOLD_S)
    again = await payments.handle(replace(accepted, delivery_count=3))
    assert again.outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_a_stop_between_the_call_and_the_completed_record_is_finished_by_the_redelivery(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # begin (a first delivery of version 1 creates it unread), (call), then the completing
    # batch fails: a crash after the call.
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.stopped_after_the_call(accepted)).outcome is Outcome.TRANSIENT
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED
    assert (await payments.handle(accepted)).outcome is Outcome.DUPLICATE
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_the_next_version_finishes_a_call_left_in_progress_before_its_own(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    await payments.stopped_after_the_call(payment_event("o-1", 1, 4200))  # not recorded
    amended = await payments.handle(payment_event("o-1", 2, 5000))
    assert amended.outcome is Outcome.PROCESSED
    late = await payments.handle(payment_event("o-1", 1, 4200))
    assert late.outcome is Outcome.DUPLICATE  # completed on its behalf
    assert provider.net_captured("o-1") == 5000
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]


async def test_a_call_finished_on_a_message_s_behalf_marks_it_with_its_record_s_algorithm(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The marker written when a call completes is its message's, as its in-progress record
    # names it: a record of a newer deployment (another fingerprint) leaves that deployment a
    # marker it can compare; one written before records named theirs is the kit's own.
    newer = "sha256/canonical-v2"
    for order_id, algorithm in (("o-1", newer), ("o-2", None)):
        await payments.stopped_after_the_call(payment_event(order_id, 1, 4200))
        pending = payments.state(order_id)["pending"]
        assert isinstance(pending, dict)
        if algorithm is None:
            del pending["hashAlgorithm"]
        else:
            pending["hashAlgorithm"] = algorithm
        amended = await payments.handle(payment_event(order_id, 2, 5000))
        assert amended.outcome is Outcome.PROCESSED

    def marker(order_id: str) -> dict[str, object]:
        return payments.store.documents[
            (order_id, marker_id(payments.definition.name, event_id(order_id, 1)))
        ]

    assert marker("o-1")["hashAlgorithm"] == newer
    assert (marker("o-1")["messageType"], marker("o-1")["orderVersion"]) == ("OrderAccepted", 1)
    assert marker("o-2")["hashAlgorithm"] == HASH_ALGORITHM
    late = await payments.handle(payment_event("o-1", 1, 4200))
    assert late.outcome is Outcome.SYSTEMIC  # left to the deployment that knows its hash
    assert (await payments.handle(payment_event("o-2", 1, 4200))).outcome is Outcome.DUPLICATE
    assert provider.net_captured("o-1") == provider.net_captured("o-2") == 5000
    assert len(provider.ledger) == 4


async def test_a_state_whose_version_is_not_an_integer_is_held_and_moves_no_money(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # A boolean is an int to Python, never a version: nothing is decided from it.
    await payments.handle(payment_event("o-1", 1, 4200))
    payments.state("o-1")["version"] = True

    amended = await payments.handle(payment_event("o-1", 2, 5000))

    assert amended.outcome is Outcome.UNEXPECTED
    assert amended.description == "ValueError: state 'payment' has no integer 'version'"
    assert payments.state("o-1")["pending"] is None
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_an_in_progress_record_confirmed_as_its_send_window_ends_is_withdrawn_unsent(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The store answered the in-progress write exactly one call deadline after the start was
    # read (the sender's monotonic clock): the window is over, so nothing is sent, the record
    # is withdrawn, and the redelivery makes the call afresh under the same key.
    readings = iter([0.0, CLIENT_TIMEOUT_S])
    accepted = payment_event("o-1", 1, 4200)

    late = await payments.decide(accepted, monotonic=lambda: next(readings))

    assert late.outcome is Outcome.TRANSIENT
    assert provider.net_captured("o-1") == 0
    assert payments.state("o-1")["pending"] is None
    again = await payments.handle(replace(accepted, delivery_count=2))
    assert again.outcome is Outcome.PROCESSED
    (entry,) = provider.ledger
    assert late.description == (
        f"TransientStoreError: call {entry.idempotency_key}: its in-progress record was "
        f"confirmed after its send window ({CLIENT_TIMEOUT_S:g} s, the store answered late): "
        "withdrawn unsent"
    )


async def test_an_operator_s_release_clears_the_call_read_and_refuses_once_the_state_moved(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # ``release_call``, as the operator's tool calls it (ops/payments.py): True when the
    # pending call it read is cleared, False when the state moved since its read.
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    read = dict(payments.state("o-1"))
    assert read["pending"]
    effect = payments.definition.effect(parse_event(accepted))

    released = await release_call(payments.store, "o-1", effect, read)
    stale = await release_call(payments.store, "o-1", effect, read)

    assert (released, stale) == (True, False)
    assert payments.state("o-1")["pending"] is None
    revision = read["revision"]
    assert isinstance(revision, int)
    assert payments.state("o-1")["revision"] == revision + 1
    assert provider.net_captured("o-1") == 0


async def test_an_operator_s_release_is_refused_once_a_redelivery_completed_the_call_it_read(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The operator reads a call in progress; before the release, the redelivery finds the call
    # made and completes it. The completion moves the revision on, so the release, conditional
    # on the revision read, is refused: the operator is told the state moved, not that a call
    # which moved money will be made again.
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    read = dict(payments.state("o-1"))
    assert read["pending"]
    await asyncio.sleep(HOLD_S)
    assert (await payments.handle(replace(accepted, delivery_count=2))).outcome is (
        Outcome.PROCESSED
    )
    effect = payments.definition.effect(parse_event(accepted))

    assert await release_call(payments.store, "o-1", effect, read) is False
    assert payments.state("o-1")["pending"] is None
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_concurrent_deliveries_of_one_event_capture_once(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=0.1))
    accepted = payment_event("o-1", 1, 4200)
    decisions = await asyncio.gather(*(payments.handle(accepted) for _ in range(3)))
    for _ in range(5):
        if all(d.outcome in (Outcome.PROCESSED, Outcome.DUPLICATE) for d in decisions):
            break
        await asyncio.sleep(0.2)
        decisions = [await payments.handle(accepted)]
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_a_declined_card_is_a_business_outcome_recorded_and_completed(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    declined = await payments.handle(payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER))
    assert declined.outcome is Outcome.PROCESSED
    assert declined.measures == {"payments.declined": 1}
    assert payments.state("o-1")["lastOutcome"] == "declined"
    assert provider.ledger == ()


async def test_a_capture_moves_the_event_s_currency_and_its_record_keeps_the_provider_s_result(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The record ``call:<key>`` (docs/operations.md) is how an operator finds the provider's own
    # operation of a call: its id, the amount and what the provider said.
    await payments.handle(payment_event("o-1", 1, 4200, currency="JPY"))
    (entry,) = provider.ledger
    assert (entry.order_id, entry.amount_minor, entry.currency) == ("o-1", 4200, "JPY")

    record = payments.store.documents[("o-1", f"call:{entry.idempotency_key}")]

    assert record["result"] == {
        "status": "succeeded",
        "providerId": entry.provider_id,
        "amountMinor": 4200,
        "detail": f"capture 4200 JPY ({entry.provider_id})",
    }
    # What it was, for whom and when: the handling delivery's clock read 1 s after NOW.
    accepted = payment_event("o-1", 1, 4200, currency="JPY")
    assert {name: record[name] for name in ("type", "orderId", "messageId", "version")} == {
        "type": "call",
        "orderId": "o-1",
        "messageId": accepted.message_id,
        "version": 1,
    }
    assert (record["operation"], record["key"]) == ("capture", entry.idempotency_key)
    assert (record["startedAt"], record["completedAt"]) == (
        "2026-12-01T10:00:01.000000Z",
        "2026-12-01T10:00:01.000000Z",
    )


async def test_a_refused_refund_is_recorded_and_counted_once_and_a_capture_is_not_counted(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The provider refuses the refund as exceeding what it holds (say, refunded out of band):
    # a business outcome, recorded and counted as refused once; the capture before it moved
    # money and counts neither a refusal nor a decline.
    accepted = await payments.handle(payment_event("o-1", 1, 4200))
    assert (accepted.outcome, accepted.measures) == (Outcome.PROCESSED, {})
    exceeds = {"type": REFUND_EXCEEDS_CAPTURED, "title": "Refund exceeds captured"}
    provider.inject(
        FaultRule(Fault.ERROR_BEFORE_COMMIT, Operation.REFUND, status=422, problem=exceeds)
    )

    amended = await payments.handle(payment_event("o-1", 2, 1000))

    assert (amended.outcome, amended.measures) == (Outcome.PROCESSED, {"payments.refused": 1})
    assert payments.state("o-1")["lastOutcome"] == "refused"
    assert payments.state("o-1")["capturedMinor"] == 4200
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_a_change_s_call_is_counted_from_what_the_provider_holds_not_the_last_total(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Why a change reads the payment's state (docs/benchmarks.md, issue 35): no event carries
    # what the provider holds. Version 1 was declined (nothing held), so version 2 captures its
    # whole total; a call counted from the last version's total (800) would leave 4,200 short.
    await payments.handle(payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER))
    amended = await payments.handle(payment_event("o-1", 2, 5000, customer_id="customer-2"))
    assert amended.outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [5000]
    assert provider.net_captured("o-1") == 5000


# -- a provider that honours no Idempotency-Key ----------------------------------------------


async def test_without_keys_a_lost_answer_is_looked_up_not_repeated(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    await asyncio.sleep(HOLD_S)
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_without_keys_a_call_that_never_committed_is_made_once_its_deadline_passed(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    assert provider.ledger == ()
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED  # 1 s later
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_without_keys_a_delivery_inside_the_last_attempt_s_window_waits_for_what_remains(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # A redelivery at the same moment as the attempt's start (the test's clock not moved): the
    # attempt is over on our side at its overBy (start + 2 x 0.3 s) + the skew margin (0.1 s),
    # so the delivery is transient, asks for the 0.7 s that remain, and says what it found.
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    pending = payments.state("o-1")["pending"]
    assert isinstance(pending, dict)

    waiting = await payments.decide(replace(accepted, delivery_count=2))

    assert waiting.outcome is Outcome.TRANSIENT
    assert waiting.description == (
        f"TransientStoreError: call {pending['key']}: InProgress at the other side before its "
        "last attempt can be over there"
    )
    assert waiting.retry_after_s == pytest.approx(2 * CLIENT_TIMEOUT_S + CLOCK_SKEW_S)
    assert payments.state("o-1")["pending"] == pending
    await asyncio.sleep(HOLD_S)
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_without_keys_a_delivery_as_the_last_attempt_ends_here_waits_out_the_bound(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # A redelivery exactly when the attempt is over on our side (its overBy + the skew margin):
    # what remains is the provider's processing bound, so it asks for those 0.1 s, not none.
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    pending = payments.state("o-1")["pending"]
    assert isinstance(pending, dict)
    payments.clock.advance(timedelta(seconds=2 * CLIENT_TIMEOUT_S + CLOCK_SKEW_S))

    waiting = await payments.decide(replace(accepted, delivery_count=2))

    assert waiting.outcome is Outcome.TRANSIENT
    assert waiting.description == (
        f"TransientStoreError: call {pending['key']}: InProgress at the other side before its "
        "last attempt can be over there"
    )
    assert waiting.retry_after_s == pytest.approx(PROCESSING_BOUND_S)
    await asyncio.sleep(HOLD_S)
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def never_sent_without_keys(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> tuple[Payments, IncomingMessage]:
    """Without keys: an acceptance whose call the provider answered 503 before processing it,
    left in progress; its redelivery one second later (past the attempt's window, its skew
    margin and the provider's bound) finds nothing at the provider and makes it again."""
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    return payments, await never_sent(payments, provider)


async def test_without_keys_of_two_deliveries_making_a_call_again_the_later_is_refused(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # Both find the attempt over and nothing at the provider; the other one claims the new
    # attempt, sends and completes it before this one's claim, which the moved revision
    # refuses: this delivery sends nothing and says why.
    payments, redelivered = await never_sent_without_keys(client, provider)
    key = pending_key(payments)
    payments.clock.advance(timedelta(seconds=1))

    refused = await payments.decide_while_processed(redelivered, redelivered)

    assert refused.outcome is Outcome.TRANSIENT
    assert refused.description == (
        f"TransientStoreError: call {key}: another delivery is making it again"
    )
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_without_keys_a_new_attempt_claimed_as_its_send_window_ends_is_withdrawn_unsent(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # The claim of the new attempt was confirmed one call deadline after its start was read
    # (the sender's monotonic clock): nothing is sent, the claim is withdrawn, and the next
    # delivery makes the call.
    payments, redelivered = await never_sent_without_keys(client, provider)
    key = pending_key(payments)
    payments.clock.advance(timedelta(seconds=1))
    readings = iter([0.0, CLIENT_TIMEOUT_S])

    late = await payments.decide(redelivered, monotonic=lambda: next(readings))

    assert late.outcome is Outcome.TRANSIENT
    assert late.description == (
        f"TransientStoreError: call {key}: its in-progress record was confirmed after its send "
        f"window ({CLIENT_TIMEOUT_S:g} s, the store answered late): withdrawn unsent"
    )
    assert payments.state("o-1")["pending"] is None
    assert [entry.amount_minor for entry in provider.ledger] == []
    again = await payments.handle(replace(redelivered, delivery_count=3))
    assert again.outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_without_keys_a_new_attempt_the_provider_refuses_before_processing_is_withdrawn(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # The new attempt answered 429: the provider performed nothing, so it is withdrawn at once
    # rather than waited out, and the next delivery makes the call.
    payments, redelivered = await never_sent_without_keys(client, provider)
    key = pending_key(payments)
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=429))

    throttled = await payments.handle(redelivered)

    assert throttled.outcome is Outcome.TRANSIENT
    assert throttled.description is not None
    assert throttled.description.startswith(f"TransientStoreError: provider, capture {key}: ")
    assert payments.state("o-1")["pending"] is None
    assert [entry.amount_minor for entry in provider.ledger] == []
    again = await payments.handle(replace(redelivered, delivery_count=3))
    assert again.outcome is Outcome.PROCESSED
    assert [entry.amount_minor for entry in provider.ledger] == [4200]


async def test_without_keys_or_a_bound_a_call_the_provider_has_no_record_of_stays_unknown(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # With no processing bound configured, an attempt that may have been sent is never made
    # again without keys, even once the provider says it has no such operation: the delivery
    # says so, and the call stays in progress for an operator.
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    payments.definition = payment_capture(
        client, call_deadline_s=CLIENT_TIMEOUT_S, clock_skew_s=CLOCK_SKEW_S
    )
    redelivered = await never_sent(payments, provider)
    key = pending_key(payments)

    unknown = await payments.handle(redelivered)

    assert unknown.outcome is Outcome.TRANSIENT
    assert unknown.description == (
        f"Inconclusive: call {key} (capture of {redelivered.message_id!r}) may or may not have "
        "happened: the other side has no record of it and no processing bound is configured"
    )
    assert pending_key(payments) == key
    assert [entry.amount_minor for entry in provider.ledger] == []


async def test_without_keys_an_attempt_recorded_without_its_window_is_waited_for_then_unknown(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    # A record written before senders enforced their window has no overBy: it is over on our
    # side twice the deadline after its start, plus the skew margin (0.7 s here), and then,
    # with no bound applying to it, its outcome is unknown until the provider says.
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    state = payments.state("o-1")
    pending = state["pending"]
    assert isinstance(pending, dict)
    del pending["overBy"]

    waiting = await payments.decide(replace(accepted, delivery_count=2))
    unknown = await payments.handle(replace(accepted, delivery_count=2))  # 1 s later

    assert (waiting.outcome, unknown.outcome) == (Outcome.TRANSIENT, Outcome.TRANSIENT)
    assert waiting.retry_after_s == pytest.approx(2 * CLIENT_TIMEOUT_S + CLOCK_SKEW_S)
    assert unknown.description == (
        f"Inconclusive: call {pending['key']} (capture of {accepted.message_id!r}) may or may "
        "not have happened: the other side is still in progress and no processing bound is "
        "configured"
    )
    await asyncio.sleep(HOLD_S)
    found = await payments.handle(replace(accepted, delivery_count=3))
    assert found.outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_without_keys_an_inconclusive_call_is_parked_and_the_order_waits_behind_it(
    client: HttpPaymentProvider, provider: PaymentProviderStandIn
) -> None:
    provider.honour_keys = False
    payments = Payments(client, honours_keys=False)
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=3 * HOLD_S))
    accepted = payment_event("o-1", 1, 4200)
    assert (await payments.handle(accepted)).outcome is Outcome.TRANSIENT
    key = pending_key(payments)
    # Still processing at the provider past the attempt's window and its bound: its lookup says
    # so, on every delivery, and the delivery says that it cannot tell.
    inconclusive = await payments.handle(replace(accepted, delivery_count=2))
    assert inconclusive.outcome is Outcome.TRANSIENT
    assert inconclusive.description == (
        f"Inconclusive: call {key} (capture of {accepted.message_id!r}) may or may not have "
        "happened: the other side is still in progress"
    )
    parked = await payments.handle(replace(accepted, delivery_count=3))
    assert (parked.outcome, parked.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    assert parked.measures == {"payments.reconciliation_needed": 1}
    behind = await payments.handle(payment_event("o-1", 2, 5000))
    assert behind.deadletter_reason == NEEDS_RECONCILIATION
    await asyncio.sleep(3 * HOLD_S)
    assert provider.net_captured("o-1") == 4200 and len(provider.ledger) == 1


async def test_a_decline_finished_by_the_next_event_is_counted_by_that_event(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The decline was answered, then the delivery stopped before its completed record.
    accepted = payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER)
    assert (await payments.stopped_after_the_call(accepted)).outcome is Outcome.TRANSIENT
    cancelled = await payments.handle(payment_event("o-1", 2, None))
    assert cancelled.outcome is Outcome.PROCESSED
    assert cancelled.measures == {"payments.declined": 1}  # counted where it was recorded
    again = await payments.handle(accepted)
    assert (again.outcome, again.measures) == (Outcome.DUPLICATE, {})  # recorded on its behalf
    assert provider.ledger == ()


async def test_a_decline_finished_by_its_own_redelivery_is_counted_by_it(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # The decline was answered, then the delivery stopped before its completed record: the
    # redelivery finds it at the provider and completes it, counting what it recorded.
    accepted = payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER)
    assert (await payments.stopped_after_the_call(accepted)).outcome is Outcome.TRANSIENT
    again = await payments.handle(replace(accepted, delivery_count=2))
    assert (again.outcome, again.measures) == (Outcome.PROCESSED, {"payments.declined": 1})
    assert payments.state("o-1")["lastOutcome"] == "declined"
    assert provider.ledger == ()


async def test_a_decline_finished_by_an_older_event_is_counted_by_it_though_it_is_stale(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # Version 2 arrived first: its decline was answered, then its delivery stopped before the
    # completed record. The acceptance (version 1) finishes version 2's call on its behalf,
    # counting the decline it recorded, and read again it is stale, the count kept.
    payments.store.fail_next = [None, None, TransientStoreError("stopped")]  # read, begin, complete
    amended = payment_event("o-1", 2, 5000, customer_id=DECLINED_CUSTOMER)
    assert (await payments.handle(amended)).outcome is Outcome.TRANSIENT
    accepted = await payments.handle(payment_event("o-1", 1, 4200, customer_id=DECLINED_CUSTOMER))
    assert (accepted.outcome, accepted.measures) == (Outcome.STALE, {"payments.declined": 1})
    # What its span and log say: the version the payment is at.
    assert (accepted.stored_version, accepted.description) == (
        2,
        "OrderAccepted version 1 is stale: version 2 is applied",
    )
    assert (payments.state("o-1")["version"], payments.state("o-1")["lastOutcome"]) == (
        2,
        "declined",
    )
    again = await payments.handle(replace(amended, delivery_count=2))
    assert (again.outcome, again.measures) == (Outcome.DUPLICATE, {})  # recorded on its behalf
    assert provider.ledger == ()


async def test_a_refusal_the_providers_profile_does_not_name_is_held_systemic_never_completed(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    # A 400 of a type nobody documented: before the profile, a "refused" outcome, completed with
    # no money moved and nobody told.
    unknown = {"type": "https://provider.example/problems/unknown", "title": "Unknown"}
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=400, problem=unknown))
    accepted = payment_event("o-1", 1, 4200)

    held = await payments.handle(accepted)

    assert (held.outcome, held.measures) == (Outcome.SYSTEMIC, {})
    assert "lastOutcome" not in payments.state("o-1")
    assert payments.state("o-1")["pending"]  # kept: the next delivery looks it up first
    assert provider.ledger == ()
    assert (await payments.handle(accepted)).outcome is Outcome.PROCESSED  # the fault was once
    assert provider.net_captured("o-1") == 4200


# -- the contract (shared.payments.contract) ---------------------------------------------------


def reworded(message: IncomingMessage, event_type: str, **payload: object) -> IncomingMessage:
    """``message`` as another event type, its payload changed (a value None: the field left out)."""
    body = json.loads(message.body)
    body["eventType"] = event_type
    body["payload"].update(payload)
    body["payload"] = {name: value for name, value in body["payload"].items() if value is not None}
    return replace(message, body=json.dumps(body).encode(), subject=event_type)


@pytest.mark.parametrize(
    ("event_type", "version", "description"),
    [
        (
            "OrderAmended",
            1,
            "OrderAmended cannot be version 1 (OrderAccepted is 1, a change 2 or more)",
        ),
        (
            "OrderAccepted",
            2,
            "OrderAccepted cannot be version 2 (OrderAccepted is 1, a change 2 or more)",
        ),
        (
            "OrderCancelled",
            1,
            "OrderCancelled cannot be version 1 (OrderAccepted is 1, a change 2 or more)",
        ),
    ],
)
async def test_an_event_whose_type_and_version_disagree_is_dead_lettered_and_moves_no_money(
    payments: Payments,
    provider: PaymentProviderStandIn,
    event_type: str,
    version: int,
    description: str,
) -> None:
    message = reworded(payment_event("o-1", version, 4200), event_type)

    refused = await payments.handle(message)

    assert (refused.outcome, refused.deadletter_reason) == (Outcome.INVALID, "InvalidPayload")
    assert refused.description == description
    assert provider.ledger == () and payments.store.documents == {}


async def test_an_acceptance_without_its_payer_and_total_is_dead_lettered_saying_what_it_lacks(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    lacking = reworded(
        payment_event("o-1", 1, 4200), "OrderAccepted", customerId=None, totalMinor=None
    )

    refused = await payments.handle(lacking)

    assert (refused.outcome, refused.deadletter_reason) == (Outcome.INVALID, "InvalidPayload")
    assert refused.description == "OrderAccepted lacks customerId, totalMinor"
    assert provider.ledger == () and payments.store.documents == {}


async def test_an_acceptance_published_before_order_versions_is_version_1_and_captured(
    payments: Payments, provider: PaymentProviderStandIn
) -> None:
    old = reworded(payment_event("o-1", 1, 4200), "OrderAccepted", orderVersion=None)

    accepted = await payments.handle(old)

    assert accepted.outcome is Outcome.PROCESSED
    assert payments.state("o-1")["version"] == 1
    assert provider.net_captured("o-1") == 4200


def test_the_payment_fingerprint_is_pinned() -> None:
    # Stored in every marker (requestHash): a change of what it covers makes every redelivery
    # of an event applied before the change a mismatch.
    amended = parse_event(payment_event("o-1", 2, 5000))
    cancelled = parse_event(payment_event("o-1", 3, None))
    assert amended.request_hash == (
        "830d70748007bd4a2d2fb6d5431a2fcab44c66bf5de70e1ded9487300e64de54"
    )
    assert cancelled.request_hash == (
        "3d5a9ddbe69faafe25e70b223e93ebaea38bf873ec846a693ad1165a734c13bb"
    )
