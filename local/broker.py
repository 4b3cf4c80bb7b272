"""An in-memory peek-lock queue with the Service Bus semantics the app depends on.

The function's exactly-once-in-effect guarantee rests on a handful of broker behaviours:
locks that expire and cause redelivery, a delivery count that ends in the dead-letter
sub-queue, send-side duplicate detection, and settlement that fails loudly with a stale
lock token. This model reproduces exactly those, deterministically (time is injected, nothing
sleeps), so the local demo and the tests can exercise the failure paths that a real
namespace only shows under load.

It is thread-safe because the gRPC settlement server calls it from worker threads while the
dispatcher receives from the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.core import SYSTEM_CLOCK, Clock

__all__ = [
    "MAX_DELIVERY_COUNT_EXCEEDED",
    "DeadLetteredMessage",
    "Delivery",
    "ManualClock",
    "MessageLockLostError",
    "OutgoingMessage",
    "PeekLockQueue",
    "PeekedMessage",
    "QueueSettings",
    "QueueStats",
    "SettlementRecord",
    "default_messaging_file",
    "parse_iso8601_duration",
]

#: The dead-letter reason Service Bus itself uses when the delivery count is exhausted.
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"

PropertyValue = str | int | float | bool

# ---------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_iso8601_duration(text: str) -> timedelta:
    """Parse the PnDTnHnMnS subset of ISO-8601 that ARM/Bicep uses for queue properties.

    Hand-rolled so that reading infra/messaging.json needs no extra dependency; years, months
    and weeks are rejected because their length is ambiguous and Service Bus never uses them.
    """
    text = text.strip()
    match = _DURATION.match(text)
    if match is None or text == "P" or text.endswith("T"):  # the regex allows empty parts
        raise ValueError(f"unsupported ISO-8601 duration: {text!r} (expected PnDTnHnMnS)")
    parts = match.groupdict()
    return timedelta(
        days=int(parts["days"] or 0),
        hours=int(parts["hours"] or 0),
        minutes=int(parts["minutes"] or 0),
        seconds=float(parts["seconds"] or 0),
    )


def default_messaging_file() -> Path:
    """infra/messaging.json of this repository: the file the Bicep loads too."""
    return Path(__file__).resolve().parent.parent / "infra" / "messaging.json"


@dataclass(frozen=True)
class QueueSettings:
    """The queue properties that change consumer-visible behaviour."""

    lock_duration: timedelta
    max_delivery_count: int
    duplicate_detection_window: timedelta
    queue_name: str

    def __post_init__(self) -> None:
        if self.lock_duration <= timedelta(0):
            raise ValueError("lock_duration must be positive")
        if self.max_delivery_count < 1:
            raise ValueError("max_delivery_count must be at least 1")
        if self.duplicate_detection_window < timedelta(0):
            raise ValueError("duplicate_detection_window must not be negative")

    @classmethod
    def from_messaging_file(cls, path: Path | None = None, **overrides: Any) -> QueueSettings:
        """Read the same JSON the Bicep deploys, so local runs cannot drift from Azure.

        Keyword overrides use the field names (e.g. ``lock_duration=timedelta(seconds=5)``)
        and exist for tests and demos that need a short lock or a low delivery limit.
        """
        raw = json.loads((path or default_messaging_file()).read_text(encoding="utf-8"))
        settings = cls(
            lock_duration=parse_iso8601_duration(raw["lockDuration"]),
            max_delivery_count=int(raw["maxDeliveryCount"]),
            duplicate_detection_window=parse_iso8601_duration(
                raw["duplicateDetectionHistoryTimeWindow"]
            ),
            queue_name=str(raw["queueName"]),
        )
        return dataclasses.replace(settings, **overrides) if overrides else settings


# ---------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------


class ManualClock:
    """A clock that only moves when told to, so tests can step across a lock's expiry."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2024, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError("time does not go backwards")
        with self._lock:
            self._now += delta
            return self._now

    async def sleep(self, seconds: float) -> None:
        """An ``asyncio.sleep`` on this clock: time passes at once, then other tasks run.
        Lets a consumer's backoff and the queue's lock expiry share one time line."""
        self.advance(timedelta(seconds=seconds))
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------
# Messages, deliveries and records
# ---------------------------------------------------------------------------------------


@dataclass
class OutgoingMessage:
    """What a sender puts on the queue (the subset of ServiceBusMessage the app uses)."""

    message_id: str | None
    body: bytes
    correlation_id: str | None = None
    content_type: str | None = "application/json"
    application_properties: dict[str, PropertyValue] = field(default_factory=dict)
    subject: str | None = None


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message under a lock; the lock token is valid for this one only."""

    lock_token: uuid.UUID
    message: OutgoingMessage
    delivery_count: int
    sequence_number: int
    enqueued_time: datetime
    locked_until: datetime


@dataclass(frozen=True)
class DeadLetteredMessage:
    """A message in the dead-letter sub-queue, with the reason Service Bus would record."""

    message: OutgoingMessage
    sequence_number: int
    delivery_count: int
    reason: str
    description: str | None
    dead_lettered_at: datetime
    #: When the original was accepted (Service Bus keeps EnqueuedTimeUtc on a dead letter); the
    #: duplicate-detection window of its MessageId runs from here.
    enqueued_time: datetime | None = None


@dataclass(frozen=True)
class PeekedMessage:
    """An active message seen without locking it (Service Bus peek)."""

    message: OutgoingMessage
    sequence_number: int
    enqueued_time: datetime


@dataclass(frozen=True)
class SettlementRecord:
    """One settlement attempt, successful or not, for tests and the demo's narration."""

    operation: str
    lock_token: uuid.UUID
    message_id: str | None
    ok: bool
    error: str | None
    reason: str | None
    description: str | None
    at: datetime


@dataclass
class QueueStats:
    """Counters that let tests assert on what happened, not just on the final state."""

    sent: int = 0
    accepted: int = 0
    dropped_duplicates: int = 0
    deliveries: int = 0
    completed: int = 0
    abandoned: int = 0
    dead_lettered: int = 0
    lock_expired: int = 0
    lock_lost_errors: int = 0


class MessageLockLostError(Exception):
    """The lock token no longer holds a lock (mirrors azure.servicebus's exception).

    Raised for unknown tokens, tokens whose lock expired, and tokens already used to settle:
    in each case another consumer may already own (or have finished) the message, so the
    caller must not assume its settlement took effect.
    """


@dataclass
class _Entry:
    message: OutgoingMessage
    sequence_number: int
    enqueued_time: datetime
    delivery_count: int = 0
    lock_token: uuid.UUID | None = None
    locked_until: datetime | None = None


# ---------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------


class PeekLockQueue:
    """A single Service Bus queue in peek-lock mode.

    Lock expiry is evaluated lazily at the start of every call against the injected clock,
    which is equivalent to the broker's timer but deterministic. When a released message has
    already been delivered ``max_delivery_count`` times it goes straight to the dead-letter
    sub-queue, so it is delivered at most that many times, as on Service Bus.
    """

    def __init__(self, settings: QueueSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}  # live messages by sequence number
        self._locked: dict[uuid.UUID, _Entry] = {}  # current lock token -> entry
        self._retired: dict[uuid.UUID, str] = {}  # old lock token -> why it is dead
        self._accepted_ids: dict[str, datetime] = {}  # message_id -> accepted send time
        self._dead_letters: list[DeadLetteredMessage] = []
        self._log: list[SettlementRecord] = []
        self._stats = QueueStats()
        self._next_sequence = 1
        self._listeners: list[Callable[[], None]] = []

    # -- sending -----------------------------------------------------------------------

    def send(self, message: OutgoingMessage) -> bool:
        """Enqueue a message; False if duplicate detection dropped it.

        The window is measured from the first accepted send of that id, so re-sending a
        duplicate does not extend it. Messages without an id are never deduplicated.
        """
        with self._lock:
            now = self.clock.now()
            self._expire_locks(now)
            self._stats.sent += 1
            message_id = message.message_id
            if message_id is not None:
                first_seen = self._accepted_ids.get(message_id)
                window = self.settings.duplicate_detection_window
                if first_seen is not None and now - first_seen < window:
                    self._stats.dropped_duplicates += 1
                    return False
                self._accepted_ids[message_id] = now
            stored = dataclasses.replace(
                message, application_properties=dict(message.application_properties)
            )
            entry = _Entry(stored, self._next_sequence, now)
            self._entries[entry.sequence_number] = entry
            self._next_sequence += 1
            self._stats.accepted += 1
        self._notify()
        return True

    # -- receiving ---------------------------------------------------------------------

    def receive(self, max_count: int = 1) -> list[Delivery]:
        """Lock and return up to ``max_count`` available messages in sequence order."""
        if max_count < 1:
            raise ValueError("max_count must be at least 1")
        with self._lock:
            now = self.clock.now()
            self._expire_locks(now)
            deliveries: list[Delivery] = []
            for entry in sorted(self._entries.values(), key=lambda e: e.sequence_number):
                if len(deliveries) == max_count:
                    break
                if entry.lock_token is not None:
                    continue
                entry.delivery_count += 1
                entry.lock_token = uuid.uuid4()
                entry.locked_until = now + self.settings.lock_duration
                self._locked[entry.lock_token] = entry
                self._stats.deliveries += 1
                deliveries.append(
                    Delivery(
                        lock_token=entry.lock_token,
                        message=entry.message,
                        delivery_count=entry.delivery_count,
                        sequence_number=entry.sequence_number,
                        enqueued_time=entry.enqueued_time,
                        locked_until=entry.locked_until,
                    )
                )
            return deliveries

    # -- settlement --------------------------------------------------------------------

    def complete(self, lock_token: uuid.UUID) -> None:
        """Remove the message for good: the consumer has durably processed it."""
        with self._lock:
            now = self.clock.now()
            entry = self._take_lock("complete", lock_token, now, retire_as="already completed")
            del self._entries[entry.sequence_number]
            self._stats.completed += 1
            self._record("complete", lock_token, entry, now)

    def abandon(self, lock_token: uuid.UUID) -> None:
        """Release the lock now so the message is redelivered without waiting for expiry."""
        with self._lock:
            now = self.clock.now()
            entry = self._take_lock("abandon", lock_token, now, retire_as="already abandoned")
            self._stats.abandoned += 1
            self._release(entry, now)
            self._record("abandon", lock_token, entry, now)
        self._notify()

    def dead_letter(
        self,
        lock_token: uuid.UUID,
        reason: str | None = None,
        description: str | None = None,
    ) -> None:
        """Move the message to the dead-letter sub-queue (a missing reason is stored as "")."""
        with self._lock:
            now = self.clock.now()
            entry = self._take_lock(
                "dead_letter",
                lock_token,
                now,
                retire_as="already dead-lettered",
                reason=reason,
                description=description,
            )
            self._dead_letter_entry(entry, reason or "", description, now)
            self._record("dead_letter", lock_token, entry, now, reason, description)

    def renew_lock(self, lock_token: uuid.UUID) -> datetime:
        """Extend a still-valid lock by a full lock duration from now; returns the new expiry."""
        with self._lock:
            now = self.clock.now()
            entry = self._find_lock("renew_lock", lock_token, now)
            entry.locked_until = now + self.settings.lock_duration
            self._record("renew_lock", lock_token, entry, now)
            return entry.locked_until

    def defer(self, lock_token: uuid.UUID) -> None:
        """Deferral needs sequence-number receives, which the app never uses."""
        raise NotImplementedError("defer is not modelled by the local broker")

    # -- observability -----------------------------------------------------------------

    def active_count(self) -> int:
        """Messages still owed to a consumer: available plus locked."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return len(self._entries)

    def is_idle(self) -> bool:
        """True when nothing is available or locked, i.e. the demo can stop."""
        return self.active_count() == 0

    def next_lock_expiry(self) -> datetime | None:
        """When the next lock lapses, so a dispatcher can wait exactly that long."""
        with self._lock:
            self._expire_locks(self.clock.now())
            expiries = [e.locked_until for e in self._locked.values() if e.locked_until]
            return min(expiries) if expiries else None

    @property
    def dead_letters(self) -> list[DeadLetteredMessage]:
        with self._lock:
            self._expire_locks(self.clock.now())
            return list(self._dead_letters)

    @property
    def stats(self) -> QueueStats:
        """A snapshot; the live counters keep changing under other threads."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return dataclasses.replace(self._stats)

    def peek(self) -> list[PeekedMessage]:
        """The active messages (available or locked) in sequence order, locking nothing."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return [
                PeekedMessage(entry.message, entry.sequence_number, entry.enqueued_time)
                for entry in sorted(self._entries.values(), key=lambda e: e.sequence_number)
            ]

    def remove_dead_letter(self, sequence_number: int) -> DeadLetteredMessage:
        """Take one message out of the dead-letter sub-queue for good (a receive + complete on
        the DLQ); KeyError if it is not there (already removed by someone else)."""
        with self._lock:
            for index, dead in enumerate(self._dead_letters):
                if dead.sequence_number == sequence_number:
                    return self._dead_letters.pop(index)
        raise KeyError(f"no dead letter with sequence number {sequence_number}")

    def expire_lock(self, lock_token: uuid.UUID) -> None:
        """Fault injection: this delivery's lock lapses now (the host could not renew it), as if
        its ``locked_until`` had passed. The message is available again at once."""
        with self._lock:
            if lock_token not in self._locked:
                raise MessageLockLostError(f"no lock held for token {lock_token}")
            self._lapse(lock_token, self.clock.now())
        self._notify()

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from any thread, without the queue's lock held) whenever a
        message becomes available by send, abandon or a forced lock expiry, so a receiver can
        wake up instead of polling."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    @property
    def settlement_log(self) -> list[SettlementRecord]:
        with self._lock:
            return list(self._log)

    # -- internals (caller holds self._lock) -------------------------------------------

    def _expire_locks(self, now: datetime) -> None:
        for token, entry in list(self._locked.items()):
            if entry.locked_until is not None and now >= entry.locked_until:
                self._lapse(token, now)

    def _lapse(self, token: uuid.UUID, now: datetime) -> None:
        """The lock ``token`` is gone: the token is retired and the message released."""
        entry = self._locked.pop(token)
        self._retired[token] = "lock expired"
        self._stats.lock_expired += 1
        self._release(entry, now)

    def _release(self, entry: _Entry, now: datetime) -> None:
        entry.lock_token = None
        entry.locked_until = None
        if entry.delivery_count >= self.settings.max_delivery_count:
            self._dead_letter_entry(
                entry, MAX_DELIVERY_COUNT_EXCEEDED, self._exhausted_description(), now
            )

    def _dead_letter_entry(
        self, entry: _Entry, reason: str, description: str | None, now: datetime
    ) -> None:
        self._entries.pop(entry.sequence_number, None)
        if entry.lock_token is not None:
            self._locked.pop(entry.lock_token, None)
        entry.lock_token = None
        entry.locked_until = None
        self._stats.dead_lettered += 1
        self._dead_letters.append(
            DeadLetteredMessage(
                message=entry.message,
                sequence_number=entry.sequence_number,
                delivery_count=entry.delivery_count,
                reason=reason,
                description=description,
                dead_lettered_at=now,
                enqueued_time=entry.enqueued_time,
            )
        )

    def _exhausted_description(self) -> str:
        count = self.settings.max_delivery_count
        return f"Message could not be consumed after {count} delivery attempts."

    def _find_lock(
        self,
        operation: str,
        lock_token: uuid.UUID,
        now: datetime,
        reason: str | None = None,
        description: str | None = None,
    ) -> _Entry:
        self._expire_locks(now)
        entry = self._locked.get(lock_token)
        if entry is None:
            why = self._retired.get(lock_token, "unknown lock token")
            error = f"{operation} failed for lock token {lock_token}: {why}"
            self._stats.lock_lost_errors += 1
            self._log.append(
                SettlementRecord(
                    operation, lock_token, None, False, error, reason, description, now
                )
            )
            raise MessageLockLostError(error)
        return entry

    def _take_lock(
        self,
        operation: str,
        lock_token: uuid.UUID,
        now: datetime,
        retire_as: str,
        reason: str | None = None,
        description: str | None = None,
    ) -> _Entry:
        """Validate the token and consume it: a lock token settles at most once."""
        entry = self._find_lock(operation, lock_token, now, reason, description)
        del self._locked[lock_token]
        self._retired[lock_token] = retire_as
        entry.lock_token = None
        entry.locked_until = None
        return entry

    def _record(
        self,
        operation: str,
        lock_token: uuid.UUID,
        entry: _Entry,
        now: datetime,
        reason: str | None = None,
        description: str | None = None,
    ) -> None:
        self._log.append(
            SettlementRecord(
                operation,
                lock_token,
                entry.message.message_id,
                True,
                None,
                reason,
                description,
                now,
            )
        )
