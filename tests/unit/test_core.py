"""The pure decision core with an in-memory store at the port: fast, no I/O."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from idempotent_consumer import (
    SYSTEM_CLOCK,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    Settlement,
    SystemicStoreError,
    TransientStoreError,
    document_timestamp,
)
from idempotent_consumer.servicebus import Settler, to_incoming

from local.standins.broker import ManualClock, QueueSettings
from local.standins.doubles import InMemoryOrderStore, RecordingActions
from shared.consumer.core import decide
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry
from tests.orders import order_body
from tests.unit.doubles import received


def incoming(body: dict[str, Any] | bytes, message_id: str | None = "ord-1001") -> IncomingMessage:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return IncomingMessage(message_id=message_id, body=raw, correlation_id="c", delivery_count=1)


async def test_new_order_is_processed_with_one_write_request() -> None:
    store = InMemoryOrderStore()

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.PROCESSED
    assert decision.settlement is Settlement.COMPLETE
    assert store.requests == ["batch"]
    assert sorted(doc["type"] for doc in store.documents.values()) == ["order", "outbox"]


async def test_outbox_off_is_a_single_create() -> None:
    store = InMemoryOrderStore()

    await decide(incoming(order_body()), store, outbox_enabled=False)

    assert store.requests == ["create"]
    assert [doc["type"] for doc in store.documents.values()] == ["order"]


async def test_duplicate_costs_the_conflicting_write_and_one_read() -> None:
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    store.requests.clear()

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.DUPLICATE
    assert decision.settlement is Settlement.COMPLETE
    assert store.requests == ["batch", "read"]


async def test_mismatch_is_dead_lettered_and_names_hashes_and_fields() -> None:
    store = InMemoryOrderStore()
    first = await decide(incoming(order_body()), store)

    decision = await decide(incoming(order_body(customerId="cust-43", currency="USD")), store)

    assert decision.outcome is Outcome.MISMATCH
    assert decision.settlement is Settlement.DEADLETTER
    assert decision.deadletter_reason == "HashMismatch"
    assert decision.description is not None
    assert first.request_hash is not None and first.request_hash in decision.description
    assert decision.request_hash is not None and decision.request_hash in decision.description
    assert "customerId, currency" in decision.description
    assert len(decision.description) <= 1024


async def test_invalid_message_writes_nothing() -> None:
    store = InMemoryOrderStore()

    decision = await decide(incoming(order_body(lines=[])), store)

    assert decision.outcome is Outcome.INVALID
    assert decision.deadletter_reason == "InvalidPayload"
    assert store.requests == []


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (TransientStoreError("429"), Outcome.TRANSIENT),
        (SystemicStoreError("403"), Outcome.SYSTEMIC),
        (RuntimeError("bug"), Outcome.UNEXPECTED),
    ],
)
async def test_store_failures_abandon_and_never_dead_letter(
    error: Exception, outcome: Outcome
) -> None:
    store = InMemoryOrderStore()
    store.fail_next.append(error)

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is outcome
    assert decision.settlement is Settlement.ABANDON
    assert decision.error is error
    assert store.documents == {}


async def test_failure_on_the_conflict_read_abandons() -> None:
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    store.fail_next = [None, TransientStoreError("503 on read")]  # write conflicts, read fails

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.TRANSIENT
    assert decision.settlement is Settlement.ABANDON


async def test_stored_order_with_an_unknown_hash_algorithm_is_not_dead_lettered() -> None:
    # Written by a newer deployment during a rolling upgrade: leave it to the newer code.
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    store.documents[("ord-1001", "ord-1001")]["hashAlgorithm"] = "sha512/canonical-v2"

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.SYSTEMIC
    assert decision.settlement is Settlement.ABANDON


async def test_outbox_event_id_is_deterministic_across_deliveries() -> None:
    first, second = InMemoryOrderStore(), InMemoryOrderStore()
    await decide(incoming(order_body()), first)
    await decide(incoming(order_body()), second)

    def event_ids(store: InMemoryOrderStore) -> list[str]:
        return [d["eventId"] for d in store.documents.values() if d["type"] == "outbox"]

    assert event_ids(first) == event_ids(second)
    assert len(event_ids(first)) == 1


def test_backoff_stays_finite_for_any_attempt_number() -> None:
    # Uncapped, 2.0 ** (attempt - 1) overflows (OverflowError) past attempt 1025.
    policy = RetryPolicy(first_delay_s=1, max_delay_s=8, lock_margin_s=5)

    assert policy.next_delay(5000, 60, jitter=1.0) == 8


def test_a_retry_whose_jitter_draws_zero_still_waits_a_little_or_as_asked() -> None:
    # Full jitter draws from [0, 1]: at 0, without the 50 ms floor, the delivery would hit the
    # failing store again at once (a retry storm across every delivery drawing near 0).
    policy = RetryPolicy(first_delay_s=1, max_delay_s=8, lock_margin_s=5)

    assert policy.next_delay(1, remaining_s=60, jitter=0.0) == 0.05
    # A throttled store's retry-after is still waited in full, whatever the jitter drew.
    assert policy.next_delay(1, remaining_s=60, jitter=0.0, retry_after_s=7.0) == 7.0


def test_an_unexpected_error_holds_the_lock_briefly_never_past_the_margin() -> None:
    policy = RetryPolicy(lock_margin_s=5, unexpected_hold_s=30)

    assert policy.hold_before_abandon(remaining_s=60) == 30
    assert policy.hold_before_abandon(remaining_s=20) == 15
    assert policy.hold_before_abandon(remaining_s=3) == 0


async def test_the_consumer_stamps_accepted_at_with_its_own_clock() -> None:
    # The consumer's injected clock must reach decide(): one time line for backoff, lock
    # expiry and the stored acceptedAt.
    clock = ManualClock(datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC))
    store = InMemoryOrderStore()
    consumer = OrderConsumer(store, ConsumerTelemetry("orders"), clock=clock)

    message, settler = received(order_body()), Settler()
    try:
        await consumer.handle(to_incoming(message), settler.bound(RecordingActions(), message))
    finally:
        settler.close()

    assert store.documents[("ord-1001", "ord-1001")]["acceptedAt"] == "2031-01-02T03:04:05.000000Z"


@pytest.mark.parametrize("character", ["/", "\\", "?", "#"])
async def test_an_order_id_cosmos_db_would_refuse_is_dead_lettered_without_a_request(
    character: str,
) -> None:
    # Cosmos DB refuses these in an id (tests/unit/test_contract.py cites the list): the order
    # is dead-lettered at once, not sent to the store for a 400 on every delivery.
    order_id = f"ord{character}1001"
    store = InMemoryOrderStore()

    decision = await decide(incoming(order_body(order_id), message_id=order_id), store)

    assert decision.outcome is Outcome.INVALID
    assert decision.settlement is Settlement.DEADLETTER
    assert decision.deadletter_reason == "InvalidPayload"
    assert store.requests == []


async def test_a_long_store_error_is_cut_to_the_description_limit() -> None:
    # An SDK error message can carry a whole response body; what reaches a log, a span status
    # or a dead-letter description stays bounded (shared.consumer.contract.MAX_DESCRIPTION_CHARS).
    store = InMemoryOrderStore()
    store.fail_next.append(TransientStoreError("x" * 5000))

    decision = await decide(incoming(order_body()), store)

    assert decision.description is not None
    assert len(decision.description) == 1024
    assert decision.description.endswith("…")


def test_the_last_moments_before_the_margin_are_still_used_for_a_retry() -> None:
    # Half a second left before the lock margin: one more attempt, then abandon.
    policy = RetryPolicy(first_delay_s=1, max_delay_s=8, lock_margin_s=5)

    assert policy.next_delay(1, remaining_s=5.5, jitter=1.0) == 0.5
    assert policy.next_delay(1, remaining_s=5.0, jitter=1.0) is None


async def test_the_system_clock_really_waits() -> None:
    # Production's clock: its sleep is the consumer's backoff; the tests' manual clock never is.
    started = time.monotonic()

    await SYSTEM_CLOCK.sleep(0.02)

    assert time.monotonic() - started >= 0.02


class OrderGoneBeforeTheRead(InMemoryOrderStore):
    """The order conflicts, then is deleted before the conflict read reaches it."""

    async def read_order(self, order_id: str) -> None:
        self.requests.append("read")


async def test_a_conflicting_order_gone_before_its_read_is_transient_and_says_so() -> None:
    store = OrderGoneBeforeTheRead()
    await decide(incoming(order_body()), store)

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.TRANSIENT
    assert decision.description == (
        "TransientStoreError: order ord-1001 conflicted but could not be read"
    )


async def test_an_unknown_stored_hash_algorithm_is_named_in_the_description() -> None:
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    store.documents[("ord-1001", "ord-1001")]["hashAlgorithm"] = "sha512/canonical-v2"

    decision = await decide(incoming(order_body()), store)

    assert decision.description == (
        "SystemicStoreError: stored order uses unknown hash algorithm 'sha512/canonical-v2'"
    )


async def test_a_mismatch_with_no_visible_difference_says_the_stored_document_changed() -> None:
    # Same fields, another stored hash: someone edited the stored order's requestHash.
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    store.documents[("ord-1001", "ord-1001")]["requestHash"] = "0" * 64

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.MISMATCH
    assert decision.description is not None
    assert decision.description.endswith("differing fields: none visible (stored document changed)")


async def test_an_order_stored_by_an_earlier_deployment_is_still_a_duplicate() -> None:
    # Stored documents name their algorithm forever ("sha256/canonical-v1", the name every
    # deployment so far wrote): renaming it would turn every earlier order's duplicate into a
    # systemic failure.
    store = InMemoryOrderStore()
    await decide(incoming(order_body()), store)
    stored = store.documents[("ord-1001", "ord-1001")]
    stored["hashAlgorithm"] = "sha256/canonical-v1"
    stored["requestHash"] = "ba6f3b2ba2691f2f815ed62ac05598a36ec29d05fbd6a2f655c8e242b65db745"

    decision = await decide(incoming(order_body()), store)

    assert decision.outcome is Outcome.DUPLICATE


def test_the_default_retry_policy_is_the_documented_one() -> None:
    # docs/orders.md, "Riding out an outage": backoff 1, 2, 4, 8, 8 ... s (full jitter), abandoned
    # 5 s before the lock expires; an unexpected error holds the lock 30 s; a message without its
    # lock expiry gets no more than a lock's worth either. The consumer uses RetryPolicy() as is.
    policy = RetryPolicy()

    delays = [policy.next_delay(attempt, remaining_s=600, jitter=1.0) for attempt in range(1, 6)]
    assert delays == [1, 2, 4, 8, 8]
    assert policy.next_delay(1, remaining_s=5, jitter=1.0) is None
    assert policy.hold_before_abandon(remaining_s=600) == 30
    lock_s = QueueSettings.from_messaging_file().lock_duration.total_seconds()
    assert policy.budget_without_lock_s <= lock_s - policy.lock_margin_s


async def test_an_invalid_message_is_decided_under_its_message_id() -> None:
    # The dead-letter's log record and span carry the order id: for a message that never
    # became an order, its MessageId (the order id it claims).
    decision = await decide(incoming(order_body(lines=[])), InMemoryOrderStore())

    assert decision.order_id == "ord-1001"


def test_document_times_are_utc_whatever_the_machine_s_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        moment = datetime(2026, 11, 29, 12, 0, tzinfo=timezone(timedelta(hours=2)))
        assert document_timestamp(moment) == "2026-11-29T10:00:00.000000Z"
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    ("moment", "stored"),
    [
        (datetime(2026, 11, 29, 10, 0, 0, 5, tzinfo=UTC), "2026-11-29T10:00:00.000005Z"),
        # Fixed width at any year: the watchdog compares these as strings (strftime's %Y wrote
        # "999" on Linux).
        (datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05.000000Z"),
    ],
)
def test_a_document_time_is_fixed_width_with_microseconds(moment: datetime, stored: str) -> None:
    assert document_timestamp(moment) == stored
