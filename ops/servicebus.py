"""The dead-letter port over Azure Service Bus (``azure-servicebus``, sync client): peeks to list
and verify, one peek-lock scan of the dead-letter sub-queue to remove, one sender to copy. Entra
ID (``DefaultAzureCredential``: Data Receiver + Data Sender on the queue) or a connection string
(the emulator; and ``local.standins.servicebus_link``, the same client over the local broker).

**Removal in one pass.** Service Bus removes a dead letter only when it is received under a lock
and completed; there is no removal by sequence number. Abandoning what the scan passes over does
not work: an abandoned message "is available again for immediate processing"
(``ServiceBusReceiver.AbandonMessageAsync``, https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.servicebusreceiver.abandonmessageasync),
with its sequence number, so the next receive returns the same lowest messages and a loop that
abandons never gets past its first batch (the defect this module had). Two ways past them:

- **defer** them: a deferred message stays in the sub-queue but "must be requested specifically
  by its sequence number in order to be received" (``defer_message``, azure/servicebus/
  _servicebus_receiver.py:907), and there is no operation that un-defers it. A tool killed after
  deferring leaves those dead letters deferred for good: peek still lists them, but no ordinary
  receive (Service Bus Explorer's, the next run's, anyone's) returns them again;
- **hold** them: keep each passed-over dead letter's lock until the scan is over, renewing it at
  half its remaining life ("the lock will be renewed based on the setting specified on the
  queue", ``RenewMessageLockAsync``), then abandon them all. A held message is invisible to
  receives, so each receive returns new ones: every dead letter is received once (again only if
  its lock lapsed, at most ``max_receives`` times, then the scan stops and says so).

This module holds. A tool killed mid-scan leaves nothing behind but locks, which lapse within the
queue's ``lockDuration`` (PT1M, infra/messaging.json); each dead letter is then available again,
exactly as before with its delivery count + 1 ("incremented when a message lock expires",
``ServiceBusReceivedMessage.DeliveryCount``), and a dead letter is never dead-lettered again
("you can't dead-letter a message from a DLQ", https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues).
Nothing is completed except what the caller's decision (``ops.resubmit``) returned. A removal or
a lock renewal the broker refuses (other than a lost lock) stops the scan where it is: the SDK
closes its receiver on such an error, so nothing more could be renewed, received or removed; the
``ScanResult`` still accounts for every wanted dead letter (removed, failed, not received) and
says why it stopped.

Verifying a copy reads the queue from a sequence number on: the queue is not partitioned
(``enablePartitioning: false``, infra/app/servicebus.bicep), so sequence numbers grow with each
accepted message (azure/servicebus/_common/message.py:1142) and a copy's is above every number
seen before it was sent.

**A topic's subscription** (``subscription``: the order-events topic's ``inventory`` or
``payments``): its dead-letter sub-queue is read the same way (``get_subscription_receiver``),
but a copy can only be sent to the topic (``get_topic_sender``; no one sends to a
subscription): every subscription whose filter takes it gets one, each consumer a duplicate of
what it handled already. The topic's duplicate detection applies ("a subscription has none of
its own": infra/app/servicebus.bicep), and its sequence numbers are the topic's ("a gap-free,
increasing sequence number relative to the queue or topic",
https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing), so a copy's, in
the subscription, is above every number seen there before it was sent, as on the queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageProperties
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusError,
)
from idempotent_consumer import SYSTEM_CLOCK, Clock
from idempotent_consumer.servicebus import BodyKind, property_text, read_body

from ops.audit import SeenEvent
from ops.port import BatchDecision, DeadLetter, PropertyValue, ScanResult

PEEK_PAGE = 250  # messages per peek request
RECEIVE_BATCH = 100  # dead letters per receive
_EVERY = 1 << 62
# Service Bus records the dead-lettering in these application properties; they describe the
# dead letter, not the order, and must not travel with a resubmitted copy.
_BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})


def _text(value: Any) -> str:
    return property_text(value) or ""


def _properties(message: ServiceBusReceivedMessage) -> dict[str, PropertyValue]:
    properties: dict[str, PropertyValue] = {}
    for key, value in (message.application_properties or {}).items():
        if _text(key) in _BROKER_PROPERTIES:
            continue
        kept = value if isinstance(value, str | int | float | bool) else _text(value)
        properties[_text(key)] = kept
    return properties


def to_dead_letter(message: ServiceBusReceivedMessage) -> DeadLetter:
    """A received or peeked dead letter. Its body is read as the consumer reads it, and a body
    that cannot be read is described, never raised (a JMS StreamMessage must not stop the tool)."""
    body = read_body(message.body, message.body_type)
    return DeadLetter(
        sequence_number=int(message.sequence_number or 0),
        message_id=message.message_id,
        enqueued_time=message.enqueued_time_utc or datetime.now(UTC),
        delivery_count=int(message.delivery_count or 0),
        reason=message.dead_letter_reason or "",
        description=message.dead_letter_error_description,
        body=body.content,
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        subject=message.subject,
        application_properties=_properties(message),
        body_kind=body.kind.value,
        body_problem=body.problem,
    )


def to_copy(letter: DeadLetter) -> ServiceBusMessage | AmqpAnnotatedMessage:
    """The message to resubmit: the same MessageId, body and properties, and the same body kind.
    A value body goes back as a value: as an AMQP string when it is UTF-8 text (what a JMS
    TextMessage carries; the SDK decodes strings and binaries alike as bytes,
    azure/servicebus/_pyamqp/_decode.py:587), else as binary."""
    properties = dict(letter.application_properties)
    if letter.body_kind != BodyKind.VALUE:
        return ServiceBusMessage(
            letter.body,
            message_id=letter.message_id,
            correlation_id=letter.correlation_id,
            content_type=letter.content_type,
            subject=letter.subject,
            application_properties=properties,  # type: ignore[arg-type]
        )
    value: str | bytes
    try:
        value = letter.body.decode("utf-8")
    except UnicodeDecodeError:
        value = letter.body
    return AmqpAnnotatedMessage(
        value_body=value,
        properties=AmqpMessageProperties(
            message_id=letter.message_id,
            correlation_id=letter.correlation_id,
            content_type=letter.content_type,
            subject=letter.subject,
        ),
        application_properties=properties,
    )


class ServiceBusDeadLetterQueue:
    """``peek_limit`` bounds each verification peek of the queue: a copy beyond it is reported as
    not seen, and its dead letter stays (the safe side). ``receive_wait_s`` is how long a receive
    waits for a dead letter before the scan concludes there is none left to give.
    ``wall_clock`` schedules lock renewals against the locks' ``locked_until_utc``."""

    def __init__(
        self,
        client: ServiceBusClient,
        queue_name: str,
        duplicate_detection_window: timedelta,
        *,
        subscription: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        wall_clock: Clock = SYSTEM_CLOCK,
        peek_limit: int = 10_000,
        receive_batch: int = RECEIVE_BATCH,
        receive_wait_s: float = 5.0,
        max_receives: int = 3,
    ) -> None:
        self._client = client
        self._queue_name = queue_name
        self._subscription = subscription
        self._window = duplicate_detection_window
        self._clock = clock
        self._wall_clock = wall_clock
        self._peek_limit = peek_limit
        self._receive_batch = receive_batch
        self._receive_wait_s = receive_wait_s
        self._max_receives = max_receives
        self._sender: ServiceBusSender | None = None
        self._peekers: dict[ServiceBusSubQueue | None, ServiceBusReceiver] = {}

    @classmethod
    def connect(
        cls,
        queue_name: str,
        window: timedelta,
        *,
        namespace: str | None = None,
        connection_string: str | None = None,
        subscription: str | None = None,
    ) -> ServiceBusDeadLetterQueue:
        return cls(
            client_for(namespace=namespace, connection_string=connection_string),
            queue_name,
            window,
            subscription=subscription,
        )

    @property
    def duplicate_detection_window(self) -> timedelta:
        return self._window

    def now(self) -> datetime:
        return self._clock.now()

    def close(self) -> None:
        for handler in [self._sender, *self._peekers.values()]:
            if handler is not None:
                handler.close()
        self._sender, self._peekers = None, {}
        self._client.close()

    # -- peeks ------------------------------------------------------------------------------

    def _receiver(self, sub_queue: ServiceBusSubQueue | None, **options: Any) -> ServiceBusReceiver:
        """A receiver of the queue, or of the topic's subscription."""
        if self._subscription is None:
            return self._client.get_queue_receiver(self._queue_name, sub_queue=sub_queue, **options)
        return self._client.get_subscription_receiver(
            self._queue_name, self._subscription, sub_queue=sub_queue, **options
        )

    def _peeker(self, sub_queue: ServiceBusSubQueue | None) -> ServiceBusReceiver:
        if sub_queue not in self._peekers:
            self._peekers[sub_queue] = self._receiver(sub_queue)
        return self._peekers[sub_queue]

    def _peek_from(
        self, sub_queue: ServiceBusSubQueue | None, first: int, limit: int
    ) -> list[ServiceBusReceivedMessage]:
        # An explicit sequence number every time: 0 means "after the last one this receiver saw"
        # to the SDK (azure/servicebus/_servicebus_receiver.py:838), not "from the start".
        peeker = self._peeker(sub_queue)
        found: list[ServiceBusReceivedMessage] = []
        next_sequence = max(first, 1)
        while len(found) < limit:
            page = peeker.peek_messages(
                max_message_count=min(PEEK_PAGE, limit - len(found)),
                sequence_number=next_sequence,
            )
            if not page:
                break
            found.extend(page)
            next_sequence = int(page[-1].sequence_number or 0) + 1
        return found

    def dead_letters(self) -> list[DeadLetter]:
        peeked = self._peek_from(ServiceBusSubQueue.DEAD_LETTER, 1, limit=_EVERY)
        return [to_dead_letter(message) for message in peeked]

    def queued_message_ids(self, from_sequence_number: int) -> tuple[set[str], int]:
        peeked = self._peek_from(None, from_sequence_number, self._peek_limit)
        top = max((int(m.sequence_number or 0) for m in peeked), default=from_sequence_number - 1)
        return {m.message_id for m in peeked if m.message_id}, top

    def dead_lettered_since(self, from_sequence_number: int) -> dict[str, DeadLetter]:
        peeked = self._peek_from(
            ServiceBusSubQueue.DEAD_LETTER, from_sequence_number, self._peek_limit
        )
        return {m.message_id: to_dead_letter(m) for m in peeked if m.message_id}

    # -- sending ----------------------------------------------------------------------------

    def send_copies(self, letters: Sequence[DeadLetter]) -> None:
        if not letters:
            return
        if self._sender is None:
            self._sender = (
                self._client.get_queue_sender(self._queue_name)
                if self._subscription is None
                else self._client.get_topic_sender(self._queue_name)
            )
        sender = self._sender
        batch = sender.create_message_batch()
        for letter in letters:
            copy = to_copy(letter)
            try:
                batch.add_message(copy)
            except MessageSizeExceededError:
                if len(batch) == 0:
                    raise
                sender.send_messages(batch)
                batch = sender.create_message_batch()
                batch.add_message(copy)
        if len(batch):
            sender.send_messages(batch)

    # -- the scan ---------------------------------------------------------------------------

    def scan(
        self,
        wanted: Collection[int],
        decide: BatchDecision,
        *,
        progress: Callable[[int], None] = lambda _received: None,
    ) -> ScanResult:
        pending = set(wanted)
        held: dict[int, ServiceBusReceivedMessage] = {}
        renew_at: dict[int, datetime] = {}
        receives: Counter[int] = Counter()
        removed: set[int] = set()
        failed: dict[int, str] = {}
        renewals = 0
        stopped: str | None = None
        if not pending:
            return ScanResult()
        receiver = self._receiver(
            ServiceBusSubQueue.DEAD_LETTER,
            receive_mode=ServiceBusReceiveMode.PEEK_LOCK,
            prefetch_count=0,  # nothing is locked that this scan has not asked for
        )
        with receiver:
            try:
                while pending:
                    renewed, stopped = self._renew_due(receiver, held, renew_at)
                    renewals += renewed
                    if stopped is not None:
                        break
                    try:
                        batch = receiver.receive_messages(
                            max_message_count=self._receive_batch,
                            max_wait_time=self._receive_wait_s,
                        )
                    except ServiceBusError as error:  # after the SDK's own retries
                        stopped = f"a receive failed ({type(error).__name__}: {error})"
                        break
                    if not batch:
                        break
                    progress(len(batch))
                    mine: list[ServiceBusReceivedMessage] = []
                    for message in batch:
                        sequence = int(message.sequence_number or 0)
                        receives[sequence] += 1
                        held[sequence] = message
                        renew_at[sequence] = self._half_life(message)
                        if sequence in pending:
                            mine.append(message)
                    if max(receives[int(m.sequence_number or 0)] for m in batch) > (
                        self._max_receives
                    ):
                        stopped = (
                            f"dead letters came back more than {self._max_receives} times: "
                            "their locks lapsed before the tool could renew them"
                        )
                        break
                    if not mine:
                        continue
                    chosen = set(decide([to_dead_letter(m) for m in mine]))
                    # The decision may have taken a while (sends, peeks, reads): renew first.
                    renewed, stopped = self._renew_due(receiver, held, renew_at)
                    renewals += renewed
                    for message in mine:
                        sequence = int(message.sequence_number or 0)
                        pending.discard(sequence)
                        if sequence not in chosen:
                            continue
                        if stopped is not None:  # decided (a copy may be sent), not removed
                            failed[sequence] = f"{stopped}: it is still in the dead-letter queue"
                            continue
                        if sequence not in held:  # its lock was lost just now
                            failed[sequence] = (
                                "its lock lapsed before the removal: it is back in the "
                                "dead-letter queue"
                            )
                            continue
                        del held[sequence]
                        try:
                            receiver.complete_message(message)
                        except MessageLockLostError:
                            failed[sequence] = (
                                "its lock lapsed before the removal: it is back in the "
                                "dead-letter queue"
                            )
                        except ServiceBusError as error:  # after the SDK's own retries
                            failed[sequence] = f"the removal failed: {error}"
                            # The SDK closes its handler on an error it does not retry
                            # (_base_handler.py:353), after which every settlement raises
                            # ValueError (receiver_mixins.py:97): stop, and report the rest.
                            stopped = f"a removal failed ({type(error).__name__}: {error})"
                            break
                        else:
                            removed.add(sequence)
                    if stopped is not None:
                        break
            finally:
                self._release(receiver, held)
        return ScanResult(
            removed=removed,
            failed=failed,
            not_received=pending,
            receives=sum(receives.values()),
            most_receives_of_one=max(receives.values(), default=0),
            renewals=renewals,
            stopped=stopped,
        )

    def _half_life(self, message: ServiceBusReceivedMessage) -> datetime:
        now = self._wall_clock.now()
        until = message.locked_until_utc or now
        return now + (until - now) / 2

    def _renew_due(
        self,
        receiver: ServiceBusReceiver,
        held: dict[int, ServiceBusReceivedMessage],
        renew_at: dict[int, datetime],
    ) -> tuple[int, str | None]:
        """Renew every held lock past half its life: (how many were renewed, why the scan must
        stop, or None). A lock already lost is let go (its dead letter is available again, and
        a later receive will hold it again). Any other refusal stops the scan, as a refused
        removal does: a ``ServiceBusError`` (after the SDK's own retries, or one it does not
        retry, such as a revoked role's ``ServiceBusAuthorizationError``) on which the SDK
        closes its handler (_base_handler.py:353), and the ``ValueError`` a closed handler
        raises on the next renewal (receiver_mixins.py:97). Every later lock renewal,
        receive and removal would fail the same way; the caller reports every dead letter."""
        now = self._wall_clock.now()
        renewed = 0
        for sequence, message in list(held.items()):
            if renew_at.get(sequence, now) > now:
                continue
            try:
                receiver.renew_message_lock(message)
            except MessageLockLostError:
                del held[sequence]
                continue
            except (ServiceBusError, ValueError) as error:
                return renewed, f"a lock renewal failed ({type(error).__name__}: {error})"
            renewed += 1
            renew_at[sequence] = self._half_life(message)
        return renewed, None

    @staticmethod
    def _release(receiver: ServiceBusReceiver, held: dict[int, ServiceBusReceivedMessage]) -> None:
        """Abandon every held dead letter: available again at once. A failure here loses
        nothing: the lock lapses within the queue's lock duration."""
        for message in held.values():
            try:
                receiver.abandon_message(message)
            except (ServiceBusError, ValueError):  # ValueError: the SDK closed the handler
                continue
        held.clear()


def client_for(*, namespace: str | None, connection_string: str | None) -> ServiceBusClient:
    if connection_string:
        return ServiceBusClient.from_connection_string(connection_string)
    if namespace:
        from azure.identity import DefaultAzureCredential

        return ServiceBusClient(namespace, DefaultAzureCredential())
    raise ValueError("give --namespace (Entra ID) or --connection-string (emulator)")


class ServiceBusEvents:
    """The OrderAccepted events a subscription of the topic holds, by peek (locks nothing,
    changes nothing, "for diagnostic and debugging purposes": message browsing,
    https://learn.microsoft.com/azure/service-bus-messaging/message-browsing). Only what the
    subscription still holds: what downstream consumed is gone (an audit subscription keeps
    what it is sent for its TTL). Needs *Azure Service Bus Data Receiver* on the subscription."""

    def __init__(self, client: ServiceBusClient, topic: str, *, limit: int = 1_000_000) -> None:
        self._client = client
        self._topic = topic
        self._limit = limit

    def events(self, subscription: str) -> list[SeenEvent]:
        found: list[SeenEvent] = []
        with self._client.get_subscription_receiver(self._topic, subscription) as receiver:
            next_sequence = 1
            while len(found) < self._limit:
                page = receiver.peek_messages(PEEK_PAGE, sequence_number=next_sequence)
                if not page:
                    break
                found.extend(SeenEvent.from_body(m.message_id, m.body, m.body_type) for m in page)
                next_sequence = int(page[-1].sequence_number or 0) + 1
        return found

    def close(self) -> None:
        self._client.close()
