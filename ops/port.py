"""The ports of the dead-letter tool: the dead-letter queue and the order store it reads.

A port says what the tool needs, in its own terms; adapters translate (``ops.servicebus``,
``ops.local_broker``, ``ops.cosmos``). No Azure import here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    body: bytes
    correlation_id: str | None = None
    content_type: str | None = None
    subject: str | None = None
    application_properties: Mapping[str, PropertyValue] = field(default_factory=dict)


class DeadLetterQueue(Protocol):
    """The queue's dead-letter sub-queue, and what the tool needs of the queue itself."""

    @property
    def duplicate_detection_window(self) -> timedelta: ...

    def now(self) -> datetime: ...

    def dead_letters(self) -> list[DeadLetter]:
        """Peek every dead letter (locks nothing, changes nothing)."""
        ...

    def send_copy(self, letter: DeadLetter) -> None:
        """Send a copy to the queue: same MessageId, body and properties."""
        ...

    def queued_message_ids(self) -> set[str]:
        """MessageIds of the active messages of the queue (a peek)."""
        ...

    def remove(self, sequence_numbers: Iterable[int]) -> set[int]:
        """Remove these dead letters for good; returns those that were removed."""
        ...


class OrderLookup(Protocol):
    """The stored order document, by order id (None if there is none)."""

    def stored_order(self, order_id: str) -> dict[str, Any] | None: ...
