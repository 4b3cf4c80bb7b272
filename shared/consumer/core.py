"""The decision core: a message in, an outcome and its settlement out. No Azure imports.

The create itself is the deduplication check: the order document's id is the MessageId, so a
second create of the same order conflicts (409) inside Cosmos DB's own uniqueness guarantee. Only
then is the stored order read to tell a duplicate (same fingerprint: complete) from a different
request reusing the id (dead-letter ``HashMismatch``). A new order therefore costs one write; there
is no "in progress" record to write first and clean up after, as two-phase designs need.

Nothing is completed unless its effect is committed: ``Settlement.COMPLETE`` is only decided after
the store confirmed the write or a stored order with the same fingerprint was read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.clock import SYSTEM_CLOCK, Clock, document_timestamp
from shared.consumer.contract import (
    CONTRACT_FIELDS,
    FINGERPRINT_ALGORITHMS,
    ORDER_PLACED,
    DeadletterReason,
    InvalidMessage,
    ValidChange,
    ValidOrder,
    bound,
    parse_message,
)
from shared.consumer.decision import (
    SETTLEMENT_BY_OUTCOME,
    Decision,
    IncomingMessage,
    OrderStore,
    Outcome,
    Settlement,
    decided,
)
from shared.consumer.errors import (
    OrderAlreadyExists,
    OrphanedDocument,
    SystemicStoreError,
    TransientStoreError,
)
from shared.consumer.lifecycle import decide_change, record_stale
from shared.consumer.order import ORDER_TYPE, placed_order, stored_version
from shared.relay.outbox import new_outbox_document

# Re-exported: the vocabulary lives in ``shared.consumer.decision``; callers keep importing it
# from the core, where it is decided.
__all__ = [
    "HELD_BEFORE_ABANDON",
    "ORDER_TYPE",
    "RETRIED_IN_DELIVERY",
    "SETTLEMENT_BY_OUTCOME",
    "Decision",
    "IncomingMessage",
    "OrderStore",
    "Outcome",
    "RetryPolicy",
    "Settlement",
    "build_documents",
    "decide",
]

# Fields an amendment may change: a mismatch against an amended order cannot compare them.
_AMENDABLE = frozenset({"customerId", "currency", "placedAt", "lines"})
# How long an inbox marker is kept when the caller does not say; the app passes its setting
# (``Settings.inbox_marker_ttl_s``, whose default this equals: tests/unit/test_config.py): the
# queue's lockDuration x maxDeliveryCount + message TTL + a 14-day dead-letter replay horizon.
DEFAULT_MARKER_TTL_S = 60 * 10 + 14 * 24 * 3600 + 14 * 24 * 3600
# The dead-letter reason of an order whose outbox event exists without the order (a reason of
# the consumer's bounded set; ``shared.consumer.contract.DeadletterReason`` holds the contract's
# own).
ORPHANED_DOCUMENT = "OrphanedDocument"


# Outcomes worth retrying within the same delivery: the moment or the system is wrong, and
# waiting (while holding the lock) is cheaper than burning a delivery attempt.
RETRIED_IN_DELIVERY = frozenset({Outcome.TRANSIENT, Outcome.SYSTEMIC})
# Not retried, but held before abandoning: nothing says time cures an unknown error, yet
# abandoning at once would burn maxDeliveryCount deliveries in seconds (see RetryPolicy).
HELD_BEFORE_ABANDON = frozenset({Outcome.UNEXPECTED})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one delivery rides out a transient (or systemic) failure before abandoning.

    Abandoning at once would redeliver at once: a one-minute Cosmos DB outage would burn
    ``maxDeliveryCount`` deliveries in seconds and dead-letter healthy orders. Instead the
    delivery retries with capped exponential backoff (full jitter) while its lock lasts, and
    abandons ``lock_margin_s`` before the lock expires. Each delivery thus spans about one
    ``lockDuration``, and an outage shorter than about ``maxDeliveryCount x (lockDuration -
    lock_margin_s)`` dead-letters nothing. The host renews the lock while the function runs, so
    an attempt that overruns the margin is still covered; if not, the settlement fails and the
    redelivery resolves it.

    An unexpected error (an exception no adapter could classify: a bug, or a failure mode not
    yet known) is not retried, since nothing says waiting cures it; but it is not abandoned at
    once either: the delivery holds its lock for ``unexpected_hold_s`` (at most until the lock
    margin) first. Ten deliveries then take minutes, not milliseconds: the error-level log with
    its stack trace reaches an operator before Service Bus dead-letters a possibly healthy order
    as ``MaxDeliveryCountExceeded``, and a poison-by-bug message occupies one concurrency slot
    for half a minute per delivery, not a whole lock duration.
    """

    first_delay_s: float = 1.0
    max_delay_s: float = 8.0
    lock_margin_s: float = 5.0
    budget_without_lock_s: float = 50.0  # when the message does not carry its lock expiry
    unexpected_hold_s: float = 30.0

    def next_delay(
        self,
        attempt: int,
        remaining_s: float,
        jitter: float,
        retry_after_s: float | None = None,
    ) -> float | None:
        """Delay before retry ``attempt`` (1-based), or None to abandon now.

        ``remaining_s`` is the time left until the lock expires; ``jitter`` is in [0, 1];
        ``retry_after_s`` the wait the service asked for, if any (Cosmos DB's retry-after of a
        throttled operation): the delay is never shorter, since retrying earlier is throttled
        again, and never runs past the lock margin."""
        available = remaining_s - self.lock_margin_s
        if available <= 0:
            return None
        # The exponent is capped: 2.0 ** 1100 overflows, and the cap is reached by then anyway.
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        ceiling = min(self.max_delay_s, self.first_delay_s * 2.0**exponent)
        delay = max(0.05, ceiling * jitter, retry_after_s or 0.0)
        return min(available, delay)

    def hold_before_abandon(self, remaining_s: float) -> float:
        """How long an unexpected error holds the lock before abandoning (0: abandon now)."""
        return max(0.0, min(self.unexpected_hold_s, remaining_s - self.lock_margin_s))


# 2 ** 64 s is far beyond any max_delay_s; keeps ``2.0 ** exponent`` finite for any attempt.
_MAX_EXPONENT = 64


def build_documents(
    valid: ValidOrder,
    message: IncomingMessage,
    *,
    outbox_enabled: bool,
    accepted_at: datetime,
    traceparent: str | None = None,
) -> list[dict[str, Any]]:
    """The order document, then (with the outbox on) its OrderAccepted event, same partition.

    ``traceparent`` is the W3C trace context of the consumer's processing span, as a string the
    telemetry adapter supplies (this core knows no tracing library); stored on the outbox event,
    it lets the relay's publish span link back to the consumer's trace."""
    accepted = document_timestamp(accepted_at)
    order = placed_order(
        valid,
        message_id=message.message_id,
        correlation_id=message.correlation_id,
        delivery_count=message.delivery_count,
        accepted_at=accepted,
    )
    if not outbox_enabled:
        return [order]
    outbox = new_outbox_document(
        valid,
        correlation_id=message.correlation_id,
        causation_id=message.message_id,
        created_at=accepted,
        traceparent=traceparent,
    )
    return [order, outbox]


async def decide(
    message: IncomingMessage,
    store: OrderStore,
    *,
    outbox_enabled: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    traceparent: str | None = None,
    marker_ttl_s: int = DEFAULT_MARKER_TTL_S,
) -> Decision:
    """Validate, write once, and classify. Never raises for a message-level problem.
    ``traceparent``: the consumer span's, stored on the outbox event (``build_documents``);
    ``marker_ttl_s``: how long an inbox marker is kept (``shared.consumer.inbox``)."""
    try:
        valid = parse_message(message.body, message.message_id, message.subject)
    except InvalidMessage as invalid:
        return Decision(
            Outcome.INVALID,
            order_id=message.message_id,
            deadletter_reason=invalid.reason,
            description=invalid.description,
            message_type=message.subject or ORDER_PLACED,
        )
    try:
        if isinstance(valid, ValidChange):
            return await decide_change(
                valid,
                message,
                store,
                marker_ttl_s=marker_ttl_s,
                now=clock.now(),
                outbox_enabled=outbox_enabled,
                traceparent=traceparent,
            )
        documents = build_documents(
            valid,
            message,
            outbox_enabled=outbox_enabled,
            accepted_at=clock.now(),
            traceparent=traceparent,
        )
        try:
            await store.create(documents)
        except OrderAlreadyExists:
            return await _compare_with_stored(valid, store, marker_ttl_s, clock)
        return decided(Outcome.PROCESSED, valid)
    except OrphanedDocument as orphan:
        return _orphaned(valid, orphan)
    except TransientStoreError as error:
        return _failed(Outcome.TRANSIENT, valid, error)
    except SystemicStoreError as error:
        return _failed(Outcome.SYSTEMIC, valid, error)
    except Exception as error:  # noqa: BLE001 - anything else: abandon, log with stack trace
        return _failed(Outcome.UNEXPECTED, valid, error)


async def _compare_with_stored(
    valid: ValidOrder, store: OrderStore, marker_ttl_s: int, clock: Clock
) -> Decision:
    stored = await store.read_order(valid.order_id)
    if stored is None:
        # The order conflicted, then was gone: deleted between the create and this read. A retry
        # creates it afresh, or, if its outbox event survived the deletion, meets that event and
        # ends systemic (``OrphanedDocument``): a conflict on any document but the order never
        # reaches this read.
        raise TransientStoreError(f"order {valid.order_id} conflicted but could not be read")
    if stored.get("requestHash") is None:
        # Created by an amendment or a cancellation that arrived first: a newer version.
        return await record_stale(
            valid, stored_version(stored), store, marker_ttl_s=marker_ttl_s, now=clock.now()
        )
    algorithm = stored.get("hashAlgorithm")
    fingerprint = FINGERPRINT_ALGORITHMS.get(str(algorithm))
    if fingerprint is None:
        # Written by a newer deployment with an algorithm this one does not know (rolling
        # upgrade). Dead-lettering would park a probably-healthy duplicate: let the newer code
        # handle the redelivery instead.
        raise SystemicStoreError(f"stored order uses unknown hash algorithm {algorithm!r}")
    incoming_hash = fingerprint(valid.fields)
    stored_hash = stored.get("requestHash")
    if incoming_hash == stored_hash:
        return decided(Outcome.DUPLICATE, valid, request_hash=incoming_hash)
    # An amended order's fields are no longer the placed ones: compare what it was placed with
    # where that is still stored, and say so otherwise.
    amended = stored_version(stored) > 1
    comparable = [name for name in CONTRACT_FIELDS if not (amended and name in _AMENDABLE)]
    differing = [name for name in comparable if stored.get(name) != valid.fields[name]]
    return decided(
        Outcome.MISMATCH,
        valid,
        request_hash=incoming_hash,
        deadletter_reason=DeadletterReason.HASH_MISMATCH,
        description=bound(
            f"order {valid.order_id} already exists with {algorithm} hash {stored_hash}; this "
            f"message hashes to {incoming_hash}; differing fields: "
            f"{', '.join(differing) or 'none visible (stored document changed)'}"
            + (f" (the order is at version {stored_version(stored)})" if amended else "")
        ),
    )


def _orphaned(valid: ValidOrder | ValidChange, orphan: OrphanedDocument) -> Decision:
    """The order's outbox event exists without the order: every redelivery would conflict on
    it the same way, and no other order is affected, so the message is dead-lettered at once
    with a reason of its own rather than held as systemic (which burned ``maxDeliveryCount``
    deliveries into an anonymous ``MaxDeliveryCountExceeded``). The stored state is what
    differs from the request: the outcome is a mismatch, like a ``HashMismatch``."""
    return decided(
        Outcome.MISMATCH,
        valid,
        deadletter_reason=ORPHANED_DOCUMENT,
        description=bound(
            f"order {valid.order_id} cannot be stored: its document {orphan.document_id!r} "
            "exists without the order (the order was deleted or expired); remove the document "
            "(or restore the order), then resubmit this message"
        ),
        error=orphan,
    )


def _failed(outcome: Outcome, valid: ValidOrder | ValidChange, error: BaseException) -> Decision:
    return decided(
        outcome,
        valid,
        description=bound(f"{type(error).__name__}: {error}"),
        error=error,
        retry_after_s=error.retry_after_s if isinstance(error, TransientStoreError) else None,
    )
