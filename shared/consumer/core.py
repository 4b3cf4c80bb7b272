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

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.clock import SYSTEM_CLOCK, Clock, document_timestamp
from shared.consumer.contract import (
    CONTRACT_FIELDS,
    FINGERPRINT_ALGORITHMS,
    DeadletterReason,
    InvalidMessage,
    ValidOrder,
    bound,
    parse_order,
)
from shared.consumer.errors import (
    OrderAlreadyExists,
    OrphanedDocument,
    SystemicStoreError,
    TransientStoreError,
)
from shared.relay.outbox import new_outbox_document

# The order document's ``type`` (the outbox event's is ``shared.relay.outbox.OUTBOX_TYPE``).
ORDER_TYPE = "order"
# The dead-letter reason of an order whose outbox event exists without the order (a reason of
# the consumer's bounded set; ``shared.consumer.contract.DeadletterReason`` holds the contract's
# own).
ORPHANED_DOCUMENT = "OrphanedDocument"


class Outcome(enum.StrEnum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    MISMATCH = "mismatch"
    INVALID = "invalid"
    TRANSIENT = "transient"
    SYSTEMIC = "systemic"
    UNEXPECTED = "unexpected"


class Settlement(enum.StrEnum):
    COMPLETE = "complete"
    ABANDON = "abandon"
    DEADLETTER = "deadletter"


SETTLEMENT_BY_OUTCOME: Mapping[Outcome, Settlement] = {
    Outcome.PROCESSED: Settlement.COMPLETE,
    Outcome.DUPLICATE: Settlement.COMPLETE,
    Outcome.MISMATCH: Settlement.DEADLETTER,
    Outcome.INVALID: Settlement.DEADLETTER,
    Outcome.TRANSIENT: Settlement.ABANDON,
    Outcome.SYSTEMIC: Settlement.ABANDON,
    Outcome.UNEXPECTED: Settlement.ABANDON,
}


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """What the core needs of a Service Bus message; transport details stay out of the hash."""

    message_id: str | None
    body: bytes
    correlation_id: str | None = None
    delivery_count: int | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    locked_until: datetime | None = None  # the broker's lock expiry at delivery


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    order_id: str | None = None
    request_hash: str | None = None
    deadletter_reason: str | None = None
    description: str | None = None
    error: BaseException | None = None
    # The wait the service asked for before a retry (a throttled batch operation's
    # ``retryAfterMilliseconds``), carried as data: ``RetryPolicy`` honours it.
    retry_after_s: float | None = None

    @property
    def settlement(self) -> Settlement:
        return SETTLEMENT_BY_OUTCOME[self.outcome]


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


class OrderStore(Protocol):
    """The persistence port. Adapters translate their errors into ``shared.consumer.errors``."""

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Write all documents of one order atomically. Raise ``OrderAlreadyExists`` if the
        first (the order) exists, ``OrphanedDocument`` if another one exists without it. One
        request: a single create, or one transactional batch."""
        ...

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None: ...


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
    order_id = valid.order_id
    accepted = document_timestamp(accepted_at)
    total_minor = valid.total_minor
    order = {
        "id": order_id,
        "type": ORDER_TYPE,
        "status": "accepted",
        **valid.fields,
        "totalMinor": total_minor,
        "requestHash": valid.request_hash,
        "hashAlgorithm": valid.hash_algorithm,
        "messageId": message.message_id,
        "correlationId": message.correlation_id,
        "firstDeliveryCount": message.delivery_count,
        "acceptedAt": accepted,
    }
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
) -> Decision:
    """Validate, write once, and classify. Never raises for a message-level problem.
    ``traceparent``: the consumer span's, stored on the outbox event (``build_documents``)."""
    try:
        valid = parse_order(message.body, message.message_id)
    except InvalidMessage as invalid:
        return Decision(
            Outcome.INVALID,
            order_id=message.message_id,
            deadletter_reason=invalid.reason,
            description=invalid.description,
        )
    try:
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
            return await _compare_with_stored(valid, store)
        except OrphanedDocument as orphan:
            return _orphaned(valid, orphan)
        return Decision(Outcome.PROCESSED, order_id=valid.order_id, request_hash=valid.request_hash)
    except TransientStoreError as error:
        return _failed(Outcome.TRANSIENT, valid, error)
    except SystemicStoreError as error:
        return _failed(Outcome.SYSTEMIC, valid, error)
    except Exception as error:  # noqa: BLE001 - anything else: abandon, log with stack trace
        return _failed(Outcome.UNEXPECTED, valid, error)


async def _compare_with_stored(valid: ValidOrder, store: OrderStore) -> Decision:
    stored = await store.read_order(valid.order_id)
    if stored is None:
        # The order conflicted, then was gone: deleted between the create and this read. A retry
        # creates it afresh, or, if its outbox event survived the deletion, meets that event and
        # ends systemic (``OrphanedDocument``): a conflict on any document but the order never
        # reaches this read.
        raise TransientStoreError(f"order {valid.order_id} conflicted but could not be read")
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
        return Decision(Outcome.DUPLICATE, order_id=valid.order_id, request_hash=incoming_hash)
    differing = [name for name in CONTRACT_FIELDS if stored.get(name) != valid.fields[name]]
    return Decision(
        Outcome.MISMATCH,
        order_id=valid.order_id,
        request_hash=incoming_hash,
        deadletter_reason=DeadletterReason.HASH_MISMATCH,
        description=bound(
            f"order {valid.order_id} already exists with {algorithm} hash {stored_hash}; this "
            f"message hashes to {incoming_hash}; differing fields: "
            f"{', '.join(differing) or 'none visible (stored document changed)'}"
        ),
    )


def _orphaned(valid: ValidOrder, orphan: OrphanedDocument) -> Decision:
    """The order's outbox event exists without the order: every redelivery would conflict on
    it the same way, and no other order is affected, so the message is dead-lettered at once
    with a reason of its own rather than held as systemic (which burned ``maxDeliveryCount``
    deliveries into an anonymous ``MaxDeliveryCountExceeded``). The stored state is what
    differs from the request: the outcome is a mismatch, like a ``HashMismatch``."""
    return Decision(
        Outcome.MISMATCH,
        order_id=valid.order_id,
        request_hash=valid.request_hash,
        deadletter_reason=ORPHANED_DOCUMENT,
        description=bound(
            f"order {valid.order_id} cannot be stored: its document {orphan.document_id!r} "
            "exists without the order (the order was deleted or expired); remove the document "
            "(or restore the order), then resubmit this message"
        ),
        error=orphan,
    )


def _failed(outcome: Outcome, valid: ValidOrder, error: BaseException) -> Decision:
    return Decision(
        outcome,
        order_id=valid.order_id,
        request_hash=valid.request_hash,
        description=bound(f"{type(error).__name__}: {error}"),
        error=error,
        retry_after_s=error.retry_after_s if isinstance(error, TransientStoreError) else None,
    )
