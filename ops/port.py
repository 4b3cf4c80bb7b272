"""The ports of the dead-letter tool: the dead-letter queue and the order store it reads.

A port says what the tool needs, in its own terms; adapters translate (``ops.servicebus`` over
``azure-servicebus``, for Azure and, through ``local.standins.servicebus_link``, for the local
broker; ``ops.cosmos``). No Azure import here.

The queue port offers only what Service Bus offers: peeks (which lock and change nothing) and one
scan that receives dead letters under peek-lock and completes those the caller decides to remove;
there is no "remove by sequence number" (Service Bus has none).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

PropertyValue = str | int | float | bool


@dataclass(frozen=True)
class DeadLetter:
    """One message of the dead-letter sub-queue, as the broker keeps it."""

    sequence_number: int
    message_id: str | None
    enqueued_time: datetime  # of the original send: the duplicate-detection window runs from here
    delivery_count: int
    reason: str
    description: str | None
    body: bytes  # as ``shared.message_body`` reads it (a bounded repr when not readable)
    correlation_id: str | None = None
    content_type: str | None = None
    subject: str | None = None
    application_properties: Mapping[str, PropertyValue] = field(default_factory=dict)
    body_kind: str = "data"  # the AMQP body section: data, value or sequence
    body_problem: str | None = None  # why the body is not readable as bytes (None: it is)


@dataclass(frozen=True)
class ScanResult:
    """What one scan of the dead-letter sub-queue did, by sequence number."""

    removed: set[int] = field(default_factory=set)
    failed: dict[int, str] = field(default_factory=dict)  # received and meant to go, not removed
    not_received: set[int] = field(default_factory=set)  # wanted, never received
    receives: int = 0  # dead letters received in all (each held ones included)
    most_receives_of_one: int = 0  # the bound: 1 unless a lock lapsed mid-scan
    renewals: int = 0
    stopped: str | None = None  # why the scan stopped early, if it did


#: Called with the wanted dead letters of one received batch, while the scan holds their locks;
#: returns the sequence numbers to complete (remove), and may raise nothing: a failure it wants
#: to report goes in its own results.
BatchDecision = Callable[[Sequence[DeadLetter]], Collection[int]]


class DeadLetterQueue(Protocol):
    """The queue's dead-letter sub-queue, and what the tool needs of the queue itself."""

    @property
    def duplicate_detection_window(self) -> timedelta: ...

    def now(self) -> datetime: ...

    def dead_letters(self) -> list[DeadLetter]:
        """Peek every dead letter, in sequence order (locks nothing, changes nothing)."""
        ...

    def scan(
        self,
        wanted: Collection[int],
        decide: BatchDecision,
        *,
        progress: Callable[[int], None] = lambda _received: None,
    ) -> ScanResult:
        """Receive the dead letters in peek-lock mode until every ``wanted`` one was received,
        holding (not abandoning) the others; call ``decide`` with the wanted ones of each batch
        and complete what it returns; release every other lock at the end. ``progress`` gets the
        number of dead letters received by each batch."""
        ...

    def send_copies(self, letters: Sequence[DeadLetter]) -> None:
        """Send copies to the queue in as few sends as their size allows: same MessageId, body
        (and body kind) and properties. Raises what the send raised."""
        ...

    def queued_message_ids(self, from_sequence_number: int) -> tuple[set[str], int]:
        """MessageIds of the queue's messages from that sequence number on (a peek), and the
        highest sequence number seen (``from_sequence_number - 1`` when none)."""
        ...

    def dead_lettered_since(self, from_sequence_number: int) -> dict[str, DeadLetter]:
        """Dead letters with a sequence number from that one on, by MessageId (a peek): a copy
        the consumer dead-lettered again."""
        ...


#: A document of the orders container by its (id, partition key = orderId).
DocumentKey = tuple[str, str]


class OrderLookup(Protocol):
    """Stored documents of the orders container; what is not stored is left out."""

    def stored_orders(self, order_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        """Order documents by order id."""
        ...

    def documents(self, keys: Collection[DocumentKey]) -> dict[DocumentKey, dict[str, Any]]:
        """Any documents (orders, inbox markers) by (id, orderId), in one batched read."""
        ...


def by_sequence(letters: Iterable[DeadLetter]) -> dict[int, DeadLetter]:
    return {letter.sequence_number: letter for letter in letters}
