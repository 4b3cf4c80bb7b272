"""What a consumer decides about one delivery, and the store port it decides against.

The vocabulary every consumer of the kit shares: the delivery (``IncomingMessage``), the outcome
and its settlement (``Outcome``, ``Settlement``, one total table), the ``Decision``, and the
``DocumentStore`` port. No Azure imports; no logic beyond the table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from idempotent_consumer._errors import InvalidMessage, TransientStoreError, bound
from idempotent_consumer._writes import Write


class Outcome(enum.StrEnum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    # A first delivery of a version at or below the one applied: completed, nothing changed but
    # its marker. A signal (a producer resending, a replay), never an error.
    STALE = "stale"
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
    Outcome.STALE: Settlement.COMPLETE,
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
    subject: str | None = None  # the message type; None means OrderPlaced


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
    # The message's type and order version once it passed its contract; for a stale message the
    # stored version it lost to (logged with both).
    message_type: str | None = None
    order_version: int | None = None
    stored_version: int | None = None
    # The consumer's own business counts for this delivery (units short of stock, a declined
    # payment ...), each exported as a counter by the observer: names from
    # the telemetry observer's counters.
    measures: Mapping[str, int] = field(default_factory=dict)

    @property
    def settlement(self) -> Settlement:
        return SETTLEMENT_BY_OUTCOME[self.outcome]


class DocumentStore(Protocol):
    """The store port of every consumer: atomic commits in one partition, and point reads.
    Adapters translate their errors into ``_errors``."""

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        """Apply ``writes`` in one partition atomically, in one request: all or nothing. A write
        refused for what is stored raises its ``_errors.WriteRefused`` (the first
        refused, with its index): ``DocumentExists``, ``DocumentMissing``, ``ConditionFailed``."""
        ...

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        """One document by id, or None."""
        ...


class AboutMessage(Protocol):
    """What a decision repeats of the valid message it is about (``ValidOrder``,
    ``ValidChange``)."""

    @property
    def order_id(self) -> str: ...

    @property
    def request_hash(self) -> str: ...

    @property
    def message_type(self) -> str: ...

    @property
    def version(self) -> int: ...


def decided(outcome: Outcome, about: AboutMessage, **details: Any) -> Decision:
    """The decision ``outcome`` about a message that passed its contract: its order, fingerprint,
    type and version, and ``details`` (a reason, a description, the stored version ...), which
    may replace any of them."""
    fields: dict[str, Any] = {
        "order_id": about.order_id,
        "request_hash": about.request_hash,
        "message_type": about.message_type,
        "order_version": about.version,
    }
    fields.update(details)
    return Decision(outcome, **fields)


def failed(outcome: Outcome, about: AboutMessage, error: BaseException) -> Decision:
    """The decision of a failure (transient, systemic or unexpected) while deciding about a
    valid message: the error, bounded in the description, and the wait the service asked for."""
    return decided(
        outcome,
        about,
        description=bound(f"{type(error).__name__}: {error}"),
        error=error,
        retry_after_s=error.retry_after_s if isinstance(error, TransientStoreError) else None,
    )


def refused(
    message: IncomingMessage, invalid: InvalidMessage, message_type: str | None
) -> Decision:
    """The decision about a message its contract refused: dead-letter with the contract's
    reason and bounded description; nothing of it is written."""
    return Decision(
        Outcome.INVALID,
        order_id=message.message_id,
        deadletter_reason=invalid.reason,
        description=invalid.description,
        message_type=message_type,
    )
