"""An in-memory peek-lock queue with the Service Bus semantics the app and the dead-letter tool
depend on.

The function's exactly-once-in-effect guarantee rests on a handful of broker behaviours:
locks that expire and cause redelivery, a delivery count that ends in the dead-letter
sub-queue, send-side duplicate detection, and settlement that fails loudly with a stale
lock token. The dead-letter tool's rests on the dead-letter sub-queue being a queue like the
others: received under a lock, completed, abandoned (and then available again at once), peeked
by sequence number. This model reproduces exactly those, each with its source (see
``PeekLockQueue``), deterministically (time is injected, nothing sleeps), so the local demo and
the tests can exercise the failure paths that a real namespace only shows under load. It offers
only what Service Bus offers: a dead letter leaves the sub-queue only by a receive and a
complete, never by its sequence number.

It is thread-safe because the gRPC settlement server calls it from worker threads while the
dispatcher receives from the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from idempotent_consumer import SYSTEM_CLOCK, Clock

from ops.messaging import read_messaging

__all__ = [
    "MAX_DELIVERY_COUNT_EXCEEDED",
    "AmqpSequence",
    "AmqpValue",
    "DeadLetteredMessage",
    "Delivery",
    "ManualClock",
    "MessageLockLostError",
    "NotAllowedError",
    "OutgoingMessage",
    "PeekLockQueue",
    "PeekedMessage",
    "QueueSettings",
    "QueueStats",
    "SettlementRecord",
    "SubQueue",
]

#: The dead-letter reason Service Bus itself uses when the delivery count is exhausted.
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"

PropertyValue = str | int | float | bool

# ---------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------


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
        messaging = read_messaging(path)
        settings = cls(
            lock_duration=messaging.lock_duration,
            max_delivery_count=messaging.max_delivery_count,
            duplicate_detection_window=messaging.duplicate_detection_window,
            queue_name=messaging.queue_name,
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


class SubQueue(enum.StrEnum):
    """The queue itself, or its dead-letter sub-queue (``<queue>/$deadletterqueue``)."""

    ACTIVE = "active"
    DEAD_LETTER = "deadletter"


@dataclass(frozen=True)
class AmqpValue:
    """An AMQP ``amqp-value`` body section: one value (a JMS TextMessage is a string)."""

    value: Any


@dataclass(frozen=True)
class AmqpSequence:
    """An AMQP ``amqp-sequence`` body: lists of values (a JMS StreamMessage)."""

    sections: tuple[tuple[Any, ...], ...]


@dataclass
class OutgoingMessage:
    """What a sender puts on the queue (the subset of ServiceBusMessage the app uses).

    ``body`` is the data section; ``amqp_body`` instead carries an AMQP value or sequence body
    (then ``body`` is empty), as senders other than the Azure SDKs' defaults send them."""

    message_id: str | None
    body: bytes
    correlation_id: str | None = None
    content_type: str | None = "application/json"
    application_properties: dict[str, PropertyValue] = field(default_factory=dict)
    subject: str | None = None
    amqp_body: AmqpValue | AmqpSequence | None = None


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message under a lock; the lock token is valid for this one only."""

    lock_token: uuid.UUID
    message: OutgoingMessage
    delivery_count: int
    sequence_number: int
    enqueued_time: datetime
    locked_until: datetime
    sub_queue: SubQueue = SubQueue.ACTIVE
    #: A dead letter's DeadLetterReason / DeadLetterErrorDescription.
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None


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
    """A message seen without locking it (Service Bus peek), available or locked."""

    message: OutgoingMessage
    sequence_number: int
    enqueued_time: datetime
    delivery_count: int = 0
    locked_until: datetime | None = None
    sub_queue: SubQueue = SubQueue.ACTIVE
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None


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
    sub_queue: SubQueue = SubQueue.ACTIVE


@dataclass
class QueueStats:
    """Counters that let tests assert on what happened, not just on the final state. The
    first group counts the queue itself; the ``dead_letter_*`` ones its dead-letter sub-queue."""

    sent: int = 0
    accepted: int = 0
    dropped_duplicates: int = 0
    deliveries: int = 0
    completed: int = 0
    abandoned: int = 0
    dead_lettered: int = 0
    lock_expired: int = 0
    lock_lost_errors: int = 0
    dead_letter_deliveries: int = 0
    dead_letters_completed: int = 0
    dead_letters_abandoned: int = 0
    dead_letter_locks_expired: int = 0
    dead_letter_lock_renewals: int = 0
    peeks: int = 0


class MessageLockLostError(Exception):
    """The lock token no longer holds a lock (mirrors azure.servicebus's exception).

    Raised for unknown tokens, tokens whose lock expired, and tokens already used to settle:
    in each case another consumer may already own (or have finished) the message, so the
    caller must not assume its settlement took effect.
    """


class NotAllowedError(Exception):
    """An operation Service Bus refuses on this sub-queue (dead-lettering a dead letter)."""


@dataclass
class _Entry:
    message: OutgoingMessage
    sequence_number: int
    enqueued_time: datetime
    sub_queue: SubQueue = SubQueue.ACTIVE
    delivery_count: int = 0
    lock_token: uuid.UUID | None = None
    locked_until: datetime | None = None
    reason: str | None = None  # a dead letter's
    description: str | None = None
    dead_lettered_at: datetime | None = None


# ---------------------------------------------------------------------------------------
# The queue
# ---------------------------------------------------------------------------------------


class PeekLockQueue:
    """A single Service Bus queue in peek-lock mode, with its dead-letter sub-queue.

    What it reproduces, and where each comes from:

    - peek-lock: a receive locks a message for ``lockDuration``; complete removes it; abandon
      releases the lock, and the message is available again at once, with its sequence number
      and its delivery count + 1; so does a lapsed lock (``ServiceBusReceiver.AbandonMessageAsync``,
      https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.servicebusreceiver.abandonmessageasync;
      ``DeliveryCount``: "incremented when a message lock expires, or the message is explicitly
      abandoned", https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.servicebusreceivedmessage.deliverycount).
      A settled, lapsed or unknown lock token fails loudly (``MessageLockLost``);
    - renew-lock: "resets the time the message is locked" by a full ``lockDuration``; an
      expired lock cannot be renewed (``RenewMessageLockAsync``, same API reference);
    - ``maxDeliveryCount``: a message released after that many deliveries goes to the
      dead-letter sub-queue with ``MaxDeliveryCountExceeded``; a consumer's dead-letter records
      its reason and description, which Service Bus adds to the message as the
      ``DeadLetterReason`` and ``DeadLetterErrorDescription`` properties;
    - the dead-letter sub-queue "fully supports normal operations such as peek-lock delivery",
      TTL is not observed, "you can't dead-letter a message from a DLQ", and nothing leaves it
      until it is received and completed (https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues):
      so a dead letter abandoned any number of times stays, its delivery count growing. It
      keeps its sequence number and enqueue time (a move within the entity, not a new send: the
      sequence number is assigned when the broker accepts a message, azure/servicebus/_common/
      message.py:1142; the dead-letter page does not say it in words);
    - peek ("message browsing", https://learn.microsoft.com/azure/service-bus-messaging/message-browsing):
      from a sequence number, at most the requested count, available and locked messages alike,
      in sequence order, locking nothing; dead letters only on the dead-letter sub-queue;
    - send-side duplicate detection: a message whose MessageId was accepted within
      ``duplicateDetectionHistoryTimeWindow`` is accepted by the send and discarded
      (``QueueProperties.RequiresDuplicateDetection``, https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties.requiresduplicatedetection);
    - AMQP data, value and sequence bodies (``OutgoingMessage.amqp_body``).

    Not reproduced: deferral, sessions, scheduled messages, TTL expiry, partitioning, auto-
    forwarding, transactions, and the receive order of the dead-letter sub-queue (not documented:
    this model, like the queue, delivers in sequence order; the tool must not depend on it).

    Lock expiry is evaluated lazily at the start of every call against the injected clock,
    which is equivalent to the broker's timer but deterministic.
    """

    def __init__(self, settings: QueueSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock: Clock = clock or SYSTEM_CLOCK
        self._lock = threading.Lock()
        self._entries: dict[SubQueue, dict[int, _Entry]] = {sub: {} for sub in SubQueue}
        self._locked: dict[uuid.UUID, _Entry] = {}  # current lock token -> entry
        self._retired: dict[uuid.UUID, str] = {}  # old lock token -> why it is dead
        self._accepted_ids: dict[str, datetime] = {}  # message_id -> accepted send time
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
            accepted = self._send(message, self.clock.now())
        if accepted:
            self._notify()
        return accepted

    def send_batch(self, messages: list[OutgoingMessage]) -> list[bool]:
        """One send of several messages: accepted together (one call); duplicate detection
        still drops each repeated MessageId on its own."""
        with self._lock:
            now = self.clock.now()
            accepted = [self._send(message, now) for message in messages]
        if any(accepted):
            self._notify()
        return accepted

    def _send(self, message: OutgoingMessage, now: datetime) -> bool:
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
        self._entries[SubQueue.ACTIVE][entry.sequence_number] = entry
        self._next_sequence += 1
        self._stats.accepted += 1
        return True

    # -- receiving ---------------------------------------------------------------------

    def receive(self, max_count: int = 1, sub_queue: SubQueue = SubQueue.ACTIVE) -> list[Delivery]:
        """Lock and return up to ``max_count`` available messages in sequence order."""
        if max_count < 1:
            raise ValueError("max_count must be at least 1")
        with self._lock:
            now = self.clock.now()
            self._expire_locks(now)
            deliveries: list[Delivery] = []
            for sequence in sorted(self._entries[sub_queue]):
                if len(deliveries) == max_count:
                    break
                entry = self._entries[sub_queue][sequence]
                if entry.lock_token is not None:
                    continue
                entry.delivery_count += 1
                entry.lock_token = uuid.uuid4()
                entry.locked_until = now + self.settings.lock_duration
                self._locked[entry.lock_token] = entry
                if sub_queue is SubQueue.ACTIVE:
                    self._stats.deliveries += 1
                else:
                    self._stats.dead_letter_deliveries += 1
                deliveries.append(
                    Delivery(
                        lock_token=entry.lock_token,
                        message=entry.message,
                        delivery_count=entry.delivery_count,
                        sequence_number=entry.sequence_number,
                        enqueued_time=entry.enqueued_time,
                        locked_until=entry.locked_until,
                        sub_queue=sub_queue,
                        dead_letter_reason=entry.reason,
                        dead_letter_description=entry.description,
                    )
                )
            return deliveries

    # -- settlement --------------------------------------------------------------------

    def complete(self, lock_token: uuid.UUID) -> None:
        """Remove the message for good: the consumer has durably processed it."""
        with self._lock:
            now = self.clock.now()
            entry = self._take_lock("complete", lock_token, now, retire_as="already completed")
            del self._entries[entry.sub_queue][entry.sequence_number]
            if entry.sub_queue is SubQueue.ACTIVE:
                self._stats.completed += 1
            else:
                self._stats.dead_letters_completed += 1
            self._record("complete", lock_token, entry, now)

    def abandon(self, lock_token: uuid.UUID) -> None:
        """Release the lock now so the message is redelivered without waiting for expiry."""
        with self._lock:
            now = self.clock.now()
            entry = self._take_lock("abandon", lock_token, now, retire_as="already abandoned")
            if entry.sub_queue is SubQueue.ACTIVE:
                self._stats.abandoned += 1
            else:
                self._stats.dead_letters_abandoned += 1
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
            locked = self._locked.get(lock_token)
            if locked is not None and locked.sub_queue is SubQueue.DEAD_LETTER:
                raise NotAllowedError("you can't dead-letter a message from a dead-letter queue")
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
            if entry.sub_queue is SubQueue.DEAD_LETTER:
                self._stats.dead_letter_lock_renewals += 1
            self._record("renew_lock", lock_token, entry, now)
            return entry.locked_until

    def defer(self, lock_token: uuid.UUID) -> None:
        """Deferral needs sequence-number receives, which neither the app nor the tool uses."""
        raise NotImplementedError("defer is not modelled by the local broker")

    # -- observability -----------------------------------------------------------------

    def active_count(self) -> int:
        """Messages still owed to a consumer: available plus locked (not dead letters)."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return len(self._entries[SubQueue.ACTIVE])

    def is_idle(self) -> bool:
        """True when nothing is available or locked, i.e. the demo can stop."""
        return self.active_count() == 0

    def next_lock_expiry(self) -> datetime | None:
        """When the next lock of the queue lapses, so a dispatcher can wait exactly that long."""
        with self._lock:
            self._expire_locks(self.clock.now())
            expiries = [
                e.locked_until
                for e in self._locked.values()
                if e.locked_until and e.sub_queue is SubQueue.ACTIVE
            ]
            return min(expiries) if expiries else None

    @property
    def dead_letters(self) -> list[DeadLetteredMessage]:
        """The dead-letter sub-queue, in the order the messages were dead-lettered (a view for
        tests and the demo: the tool reads it through Service Bus operations)."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return [
                DeadLetteredMessage(
                    message=entry.message,
                    sequence_number=entry.sequence_number,
                    delivery_count=entry.delivery_count,
                    reason=entry.reason or "",
                    description=entry.description,
                    dead_lettered_at=entry.dead_lettered_at or entry.enqueued_time,
                    enqueued_time=entry.enqueued_time,
                )
                for entry in self._entries[SubQueue.DEAD_LETTER].values()
            ]

    @property
    def stats(self) -> QueueStats:
        """A snapshot; the live counters keep changing under other threads."""
        with self._lock:
            self._expire_locks(self.clock.now())
            return dataclasses.replace(self._stats)

    def peek(
        self,
        from_sequence_number: int = 1,
        max_count: int | None = None,
        sub_queue: SubQueue = SubQueue.ACTIVE,
    ) -> list[PeekedMessage]:
        """Messages (available or locked) from ``from_sequence_number`` on, in sequence order,
        at most ``max_count`` of them, locking nothing."""
        with self._lock:
            self._expire_locks(self.clock.now())
            self._stats.peeks += 1
            entries = self._entries[sub_queue]
            found: list[PeekedMessage] = []
            for sequence in sorted(s for s in entries if s >= from_sequence_number):
                if max_count is not None and len(found) == max_count:
                    break
                entry = entries[sequence]
                found.append(
                    PeekedMessage(
                        entry.message,
                        entry.sequence_number,
                        entry.enqueued_time,
                        delivery_count=entry.delivery_count,
                        locked_until=entry.locked_until,
                        sub_queue=sub_queue,
                        dead_letter_reason=entry.reason,
                        dead_letter_description=entry.description,
                    )
                )
            return found

    def expire_lock(self, lock_token: uuid.UUID) -> None:
        """Fault injection: this delivery's lock lapses now (the host could not renew it), as if
        its ``locked_until`` had passed. The message is available again at once."""
        with self._lock:
            if lock_token not in self._locked:
                raise MessageLockLostError(f"no lock held for token {lock_token}")
            self._lapse(lock_token, self.clock.now())
        self._notify()

    def knows(self, lock_token: uuid.UUID) -> bool:
        """Whether this entity issued ``lock_token`` (held now, or settled, lapsed or retired):
        the host's one settlement service finds a token's entity by it."""
        with self._lock:
            return lock_token in self._locked or lock_token in self._retired

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
        if entry.sub_queue is SubQueue.ACTIVE:
            self._stats.lock_expired += 1
        else:
            self._stats.dead_letter_locks_expired += 1
        self._release(entry, now)

    def _release(self, entry: _Entry, now: datetime) -> None:
        entry.lock_token = None
        entry.locked_until = None
        if (
            entry.sub_queue is SubQueue.ACTIVE
            and entry.delivery_count >= self.settings.max_delivery_count
        ):
            self._dead_letter_entry(
                entry, MAX_DELIVERY_COUNT_EXCEEDED, self._exhausted_description(), now
            )

    def _dead_letter_entry(
        self, entry: _Entry, reason: str, description: str | None, now: datetime
    ) -> None:
        self._entries[SubQueue.ACTIVE].pop(entry.sequence_number, None)
        if entry.lock_token is not None:
            self._locked.pop(entry.lock_token, None)
        entry.lock_token = None
        entry.locked_until = None
        entry.sub_queue = SubQueue.DEAD_LETTER
        entry.reason = reason
        entry.description = description
        entry.dead_lettered_at = now
        self._stats.dead_lettered += 1
        self._entries[SubQueue.DEAD_LETTER][entry.sequence_number] = entry

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
                entry.sub_queue,
            )
        )
