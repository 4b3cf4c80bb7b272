"""The `order-events` topic, in memory: send-side duplicate detection and its subscriptions.

Driven by infra/messaging.json (``topicName``, ``duplicateDetectionHistoryTimeWindow``,
``lockDuration``, ``maxDeliveryCount``), the file the Bicep deploys. The relay reaches it
through the production adapter (``shared.adapters.servicebus_out.ServiceBusEventPublisher``): this
module stands in for the SDK's topic sender (``create_message_batch`` / ``send_messages``), the
network boundary, so the relay builds real ``ServiceBusMessage`` objects and real size-bounded
``ServiceBusMessageBatch`` es here as in Azure. The operator tool's copies come through the real
SDK's topic sender instead (``send_batch``, reached by ``local.standins.servicebus_link``).

A batch is accepted or refused as a whole: the SDK sends it as one AMQP transfer and one
disposition answers it (aio/_transport/_pyamqp_transport_async.py:175-185); that the service
never accepts part of a batch is how the SDK treats it, not a documented guarantee. Inside an
accepted batch, each message whose MessageId was accepted within the window is dropped: the
topic's duplicate detection accepts the send and ignores the copy ("Duplicate detection",
learn.microsoft.com/azure/service-bus-messaging/duplicate-detection), and the window starts at
the first accepted copy. Each subscription is a ``PeekLockQueue`` (a subscription is a queue), so
tests and the demo can receive, settle and count what downstream would see.

A topic stores messages only in its subscriptions: "A topic subscription resembles a virtual
queue that receives copies of the messages that are sent to the topic"
(learn.microsoft.com/azure/service-bus-messaging/service-bus-queues-topics-subscriptions), and a
new subscription's default rule is the true filter, so each subscription gets every message
(learn.microsoft.com/azure/service-bus-messaging/topic-filters). So, as in Service Bus:

- a message accepted while the topic has **no subscription** is kept nowhere: the send
  succeeds, the message is gone (``stats.dropped_no_subscription``);
- a subscription created later receives only what is sent from then on.

The world starts the topic with the subscriptions the Bicep deploys (``retained``, the default
subscription of infra/app/servicebus.bicep). Unknown, so not modelled: what a send racing a
subscription's creation delivers to it.

Faults are injected at the sender's surface: a refused send (``fail_next_sends``, or at a
seeded rate with ``add_random_faults``, or every send that carries one MessageId with
``fail_sends_of``: a fault that follows one event) raises the SDK's own exception and accepts
nothing; a
crash (``crash_next_sends``, or at a rate) raises ``WorkerCrashed`` just before the send, or
just after the topic accepted it: the worker process dies between the send and the mark.

Not reproduced: filters and rules other than the default true filter, sessions, partitions,
message TTL (the retained subscription's expiry), the topic's size quota
(``ServiceBusQuotaExceededError`` when full, injectable as a refused send), forwarding, AMQP
errors other than those injected, real latency.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.exceptions import OperationTimeoutError
from idempotent_consumer import SYSTEM_CLOCK, Clock

from local.standins.broker import (
    OutgoingMessage,
    PeekLockQueue,
    PropertyValue,
    QueueSettings,
)
from ops.messaging import MESSAGING_FILE, read_messaging

# Standard tier: 256 KB per message (and per batch).
MAX_BATCH_BYTES = 256 * 1024
# The default subscription the Bicep deploys (infra/app/servicebus.bicep, retainedSubscription):
# it keeps every event for retainedEventsTimeToLive, whoever has subscribed yet.
RETAINED_SUBSCRIPTION = "retained"


def subscription_path(topic: str, subscription: str) -> str:
    """A subscription's entity path, ``<topic>/subscriptions/<subscription>``: the SDK's form
    with "/Subscriptions/" (azure/servicebus/_base_handler.py:271, ``_entity_path``), which
    ``local.standins.servicebus_link`` matches without case."""
    return f"{topic}/subscriptions/{subscription}"


def topic_name(path: Path | None = None) -> str:
    """``topicName`` of infra/messaging.json."""
    name = read_messaging(path).topic_name
    if name is None:
        raise KeyError(f"topicName is not in {path or MESSAGING_FILE}")
    return name


@dataclass
class TopicStats:
    sends: int = 0  # send_messages calls that reached the topic
    failed_sends: int = 0  # refused by an injected fault
    messages: int = 0  # messages in accepted sends
    accepted: int = 0
    dropped_duplicates: int = 0
    dropped_no_subscription: int = 0  # accepted while the topic had no subscription: gone
    crashes_after_send: int = 0  # injected: accepted, then the worker died


class WorkerCrashed(BaseException):
    """The worker process died in the middle of an invocation (an injected crash). A
    ``BaseException``, like the ``CancelledError`` of a stopped worker: nothing of the app
    catches it, no invocation response is sent, the host never checkpoints."""


@dataclass
class _Fault:
    error: Callable[[], BaseException]
    remaining: int | None  # None: for ever, each send with ``probability``
    after_send: bool = False  # raised once the topic accepted the send
    probability: float = 1.0
    rng: random.Random | None = None
    message_id: str | None = None  # only sends that carry this MessageId, each of them

    def fires(self, message_ids: list[str | None]) -> bool:
        if self.message_id is not None:
            return self.message_id in message_ids
        if self.remaining is not None:
            if self.remaining <= 0:
                return False
            self.remaining -= 1
            return True
        return self.rng is not None and self.rng.random() < self.probability


class _TopicBatch(ServiceBusMessageBatch):
    """A real ``ServiceBusMessageBatch`` (the SDK's own size accounting) that also keeps the
    messages it accepted, which the topic reads back instead of decoding AMQP frames."""

    def __init__(self, max_size_in_bytes: int) -> None:
        super().__init__(max_size_in_bytes=max_size_in_bytes)
        self.accepted_messages: list[ServiceBusMessage] = []

    def add_message(self, message: Any) -> None:
        super().add_message(message)  # raises MessageSizeExceededError when full
        self.accepted_messages.append(message)


@dataclass
class OrderEventsTopic:
    """The topic and its subscriptions. Thread-safe like the queue model."""

    name: str
    duplicate_detection_window_s: float
    subscriptions: dict[str, PeekLockQueue]
    clock: Clock = SYSTEM_CLOCK
    messaging_file: Path | None = None
    max_batch_bytes: int = MAX_BATCH_BYTES
    stats: TopicStats = field(default_factory=TopicStats)
    # Every message of every accepted send, duplicates included (what the topic was sent).
    received: list[OutgoingMessage] = field(default_factory=list)
    _accepted_ids: dict[str, Any] = field(default_factory=dict)
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_messaging_file(
        cls,
        clock: Clock | None = None,
        path: Path | None = None,
        *,
        subscriptions: tuple[str, ...] = (RETAINED_SUBSCRIPTION,),
    ) -> OrderEventsTopic:
        file = path or MESSAGING_FILE
        topic = cls(
            name=topic_name(file),
            duplicate_detection_window_s=read_messaging(
                file
            ).duplicate_detection_window.total_seconds(),
            subscriptions={},
            clock=clock or SYSTEM_CLOCK,
            messaging_file=file,
        )
        for name in subscriptions:
            topic.add_subscription(name)
        return topic

    @property
    def subscription(self) -> PeekLockQueue:
        """The retained (default) subscription."""
        return self.subscriptions[RETAINED_SUBSCRIPTION]

    def add_subscription(self, name: str) -> PeekLockQueue:
        """A new, empty subscription: it receives what is sent from now on. Idempotent: the
        subscription of that name if it exists."""
        # A subscription delivers what the topic accepted: no duplicate detection of its own.
        settings = QueueSettings.from_messaging_file(
            self.messaging_file or MESSAGING_FILE,
            queue_name=subscription_path(self.name, name),
            duplicate_detection_window=timedelta(0),
        )
        with self._lock:
            queue = self.subscriptions.setdefault(name, PeekLockQueue(settings, clock=self.clock))
        return queue

    def remove_subscription(self, name: str) -> None:
        with self._lock:
            del self.subscriptions[name]

    # -- the SDK sender's surface (shared.adapters.servicebus_out.MessageBatchSender) -----------

    async def create_message_batch(
        self, max_size_in_bytes: int | None = None
    ) -> ServiceBusMessageBatch:
        return _TopicBatch(min(max_size_in_bytes or self.max_batch_bytes, self.max_batch_bytes))

    async def send_messages(
        self,
        message: Any,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the SDK sender's signature
    ) -> None:
        messages = message.accepted_messages if isinstance(message, _TopicBatch) else [message]
        with self._lock:
            carried = [sent.message_id for sent in messages]
            fault = next((f for f in self._faults if f.fires(carried)), None)
            if fault is not None and not fault.after_send:
                self.stats.failed_sends += 1
                raise fault.error()
            accepted, subscriptions = self._accept([_outgoing(sent) for sent in messages])
        _deliver(accepted, subscriptions)
        if fault is not None:  # after the send: the topic has it, the worker dies now
            self.stats.crashes_after_send += 1
            raise fault.error()

    def send_batch(self, messages: list[OutgoingMessage]) -> list[bool]:
        """One send of the SDK's own topic sender (``get_topic_sender``, through
        ``local.standins.servicebus_link``: the operator tool's copies): the same duplicate
        detection and a copy in each subscription; no injected fault applies. Whether each
        message was accepted (the sender is not told)."""
        with self._lock:
            accepted, subscriptions = self._accept(messages)
        _deliver(accepted, subscriptions)
        kept = {id(message) for message in accepted}
        return [id(message) in kept for message in messages]

    def _accept(
        self, messages: list[OutgoingMessage]
    ) -> tuple[list[OutgoingMessage], list[PeekLockQueue]]:
        """With the lock held: the messages duplicate detection keeps, and the subscriptions
        each gets a copy in."""
        self.stats.sends += 1
        self.stats.messages += len(messages)
        self.received.extend(messages)
        now = self.clock.now()
        accepted: list[OutgoingMessage] = []
        for sent in messages:
            message_id = sent.message_id
            first = self._accepted_ids.get(message_id) if message_id else None
            if first is not None and (now - first).total_seconds() < (
                self.duplicate_detection_window_s
            ):
                self.stats.dropped_duplicates += 1
                continue
            if message_id:
                self._accepted_ids[message_id] = now
            self.stats.accepted += 1
            accepted.append(sent)
        subscriptions = list(self.subscriptions.values())
        if not subscriptions:
            self.stats.dropped_no_subscription += len(accepted)
        return accepted, subscriptions

    async def close(self) -> None:
        """The sender's ``close``: nothing to release."""

    # -- fault injection ----------------------------------------------------------------

    def fail_next_sends(self, error: Callable[[], BaseException], times: int = 1) -> None:
        """The next ``times`` sends raise ``error()`` and accept nothing (a refused batch)."""
        with self._lock:
            self._faults.append(_Fault(error, times))

    def fail_sends_of(self, message_id: str, error: Callable[[], BaseException]) -> None:
        """From now on (until ``heal``), every send that carries ``message_id``, alone or in a
        batch, raises ``error()`` and accepts nothing: a refusal that follows one event."""
        with self._lock:
            self._faults.append(_Fault(error, None, message_id=message_id))

    def crash_next_sends(self, *, after_send: bool, times: int = 1) -> None:
        """The worker dies (``WorkerCrashed``) at the next ``times`` sends: before the topic
        has the batch, or ``after_send``, once it accepted it."""
        with self._lock:
            self._faults.append(_Fault(WorkerCrashed, times, after_send=after_send))

    def add_random_faults(
        self, rng: random.Random, *, send_failure_rate: float, crash_after_send_rate: float
    ) -> None:
        """From now on, each send is refused with a timeout (``OperationTimeoutError``) at
        ``send_failure_rate``, or accepted and followed by a crash at ``crash_after_send_rate``,
        drawn from ``rng`` (seeded by the caller)."""
        with self._lock:
            self._faults.append(
                _Fault(
                    lambda: OperationTimeoutError(message="injected: send timed out"),
                    None,
                    probability=send_failure_rate,
                    rng=rng,
                )
            )
            self._faults.append(
                _Fault(
                    WorkerCrashed,
                    None,
                    after_send=True,
                    probability=crash_after_send_rate,
                    rng=rng,
                )
            )

    def heal(self) -> None:
        """Drop every injected fault that has not fired yet."""
        with self._lock:
            self._faults.clear()

    # -- what downstream sees -----------------------------------------------------------

    def delivered(self, subscription: str = RETAINED_SUBSCRIPTION) -> list[OutgoingMessage]:
        """Receive and complete every message in a subscription (what downstream gets)."""
        queue = self.subscriptions[subscription]
        received: list[OutgoingMessage] = []
        while deliveries := queue.receive(100):
            for delivery in deliveries:
                queue.complete(delivery.lock_token)
                received.append(delivery.message)
        return received


def _deliver(accepted: list[OutgoingMessage], subscriptions: list[PeekLockQueue]) -> None:
    for outgoing in accepted:
        for subscription in subscriptions:  # a copy in each, none without any
            subscription.send(outgoing)


def _outgoing(message: ServiceBusMessage) -> OutgoingMessage:
    body = message.body
    data = body if isinstance(body, bytes) else b"".join(body)
    properties: dict[str, PropertyValue] = {}
    for key, value in (message.application_properties or {}).items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if isinstance(value, bytes):
            properties[name] = value.decode()
        elif isinstance(value, str | int | float | bool):
            properties[name] = value
        else:  # a UUID
            properties[name] = str(value)
    return OutgoingMessage(
        message_id=message.message_id,
        body=data,
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        application_properties=properties,
        subject=message.subject,
    )
