"""Service Bus out (azure-servicebus aio): the relay's ``EventPublisher`` on the topic sender,
and the public edge's ``MessageSender`` on the ``orders`` queue sender (``ServiceBusOrderSender``,
at the end: the same connection, lock, bounds and error table).

Owns: turning an ``OutboundEvent`` into a ``ServiceBusMessage`` (MessageId = eventId, content
type, subject, correlation id, application properties), packing the events of one invocation
into as few ``ServiceBusMessageBatch`` sends as their size allows, and translating the SDK's
errors into ``shared.relay.core``'s classes. Never decides what to retry or park
(``shared.relay.core``).

One ``ServiceBusClient`` and one topic sender per worker process (``shared.bootstrap``), identity
based on the namespace the queue trigger uses (``ServiceBusConnection__fullyQualifiedNamespace``)
and with the trigger's identity (``ServiceBusConnection__credential`` = ``managedidentity`` and
``__clientId``: ``ManagedIdentityCredential``; unset: ``DefaultAzureCredential``, development;
``shared.adapters.identity``); a connection string (``ServiceBusConnection``) only for emulators.

The sender is shared by every relay invocation of the process (the trigger runs one per lease,
concurrently, and the watchdog too), and azure-servicebus does not make it safe for that: "We
do not guarantee that the ServiceBusClient, ServiceBusSender, and ServiceBusReceiver are
thread-safe or coroutine-safe ... use an asyncio.Lock()" (the package README,
azure_servicebus-7.15.0.dist-info/METADATA:123,156). Concretely, ``ServiceBusSender._open``
closes ``self._handler`` whenever the sender is not yet ``_running``
(aio/_servicebus_sender_async.py:215-230), so two cold sends close each other's link. One
``asyncio.Lock`` therefore serialises each publish (batch creation and sends): one link, one
operation at a time, as the SDK asks. Sends are milliseconds; a publish holds the lock at most
twice ``SEND_TIMEOUT_S`` on a failing link, and waits for it at most ``LOCK_WAIT_S``: the
process's invocations queue on one lock (at the top tier, 40+ leases share a process), and an
unbounded wait behind a hung link would end the k-th waiter after k holds, past
``functionTimeout``. A publish that cannot get the sender in time reports its events
unavailable (``TimeoutError`` its cause): retried, never parked.

Every SDK call is bounded: ``send_messages(timeout=None)`` means no timeout
(aio/_servicebus_sender_async.py:404-405) and ``create_message_batch`` has no timeout at all (it
opens the link through ``_open_with_retry``, unbounded, :508-509), so a hung link would run the
invocation into ``functionTimeout``, and on Python a timed-out invocation restarts the worker
and every in-flight consumer delivery with it. Each call gets ``SEND_TIMEOUT_S``: as the SDK's
own total timeout (it covers its retries) and as an ``asyncio.timeout`` around it. Once a
create or a send fails, the invocation's remaining events are reported with the same error, not
tried: the link is bad, and every further attempt would wait its own timeout.

Errors are translated by what a retry can fix, the SDK's plain ``ServiceBusError`` included: the
SDK raises it, marked not retryable, for every AMQP condition it maps to no class of its own
(_transport/_pyamqp_transport.py:149-167 and :1156-1167), and keeps the condition on the error
(``_condition``, exceptions.py:28 and :35-39). Link, session and connection conditions say the
link is unwell (unavailable); a deleted entity says the topic is gone (systemic); the rest
(``amqp:decode-error``, ``amqp:invalid-field``, ``amqp:not-allowed`` ...) may be the message's
and are left unclassified: the relay core charges them to an event only once it was sent alone.
An error of ``create_message_batch`` carries no message (it opens the link): never the event's.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

from shared.consumer.contract import ORDER_PLACED
from shared.edge.sender import SendFailed
from shared.relay.core import (
    EventRejected,
    OutboundEvent,
    PublishMisconfigured,
    PublishUnavailable,
)

# Seconds each create_message_batch / send_messages may take, the SDK's own retries included:
# well inside the relay's functionTimeout (5 min) and the 60 s a batch retry waits at most
# between the runtime's first retries; long enough for the SDK's 4 attempts of a short outage
# (backoff 0.8 x 2^n s: 1.6 + 3.2 + 6.4 s, see docs/events.md "Retries").
SEND_TIMEOUT_S = 30.0
# The outer asyncio bound leaves the SDK's own timeout the first word (its OperationTimeoutError
# names what timed out).
_GRACE_S = 1.0
# Seconds a publish waits for the sender's lock: one call's bound, what a holder on a hung link
# takes to fail. A publish then ends within this wait plus its own hold (two calls, 62 s), and
# the relay core's isolation of a failed send stops at the first alone send that fails for the
# link: an invocation's sends end within 2 x (31 + 62) = 186 s of the 300 s functionTimeout
# (host.json), leaving its marks (20 s each, shared.adapters.cosmos_orders) the rest.
LOCK_WAIT_S = SEND_TIMEOUT_S + _GRACE_S

# AMQP conditions the SDK raises as a plain ServiceBusError, marked not retryable (the no-retry
# lists: _pyamqp/error.py:99-120, _transport/_pyamqp_transport.py:119-130), by what a retry can
# fix; the condition names are AMQP 1.0's (_pyamqp/error.py:16-89).
# The link, its session or its connection is unwell, not the event: a new link cures it.
_UNAVAILABLE_CONDITIONS = frozenset(
    {
        "amqp:link:stolen",  # the link was attached elsewhere and this one closed
        "amqp:link:redirect",
        "amqp:connection:redirect",
        "amqp:connection:framing-error",
        "amqp:frame-size-too-small",
        "amqp:illegal-state",
        "amqp:session:errant-link",
        "amqp:session:handle-in-use",
        "amqp:session:unattached-handle",
        "amqp:session:window-violation",
    }
)
# The entity is gone: an operator recreates it (``azd provision``).
_SYSTEMIC_CONDITIONS = frozenset({"amqp:resource-deleted"})
# An order message's body is the contract's JSON, UTF-8 (shared.edge.core ``_encode``).
ORDER_MESSAGE_CONTENT_TYPE = "application/json"


class MessageBatchSender(Protocol):
    """What the adapter needs of ``azure.servicebus.aio.ServiceBusSender`` (the network
    boundary: the local topic model implements it too)."""

    async def create_message_batch(
        self, max_size_in_bytes: int | None = None
    ) -> ServiceBusMessageBatch: ...

    async def send_messages(
        self,
        message: Any,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the SDK's signature
    ) -> None: ...


def to_service_bus_message(event: OutboundEvent) -> ServiceBusMessage:
    properties: dict[str | bytes, int | float | bytes | bool | str | uuid.UUID] = {}
    for name, value in event.application_properties.items():
        properties[name] = value
    return ServiceBusMessage(
        event.body,
        message_id=event.event_id,
        content_type=event.content_type,
        subject=event.subject,
        correlation_id=event.correlation_id,
        application_properties=properties,
    )


class _OneAtATime:
    """A sender shared by every invocation of an event loop, used by one send at a time (see
    the module docstring): the sender, its timeouts and its lock. Built once per event loop by
    the composition root."""

    def __init__(
        self,
        sender: MessageBatchSender,
        *,
        timeout_s: float = SEND_TIMEOUT_S,
        lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self._sender = sender
        self._timeout_s = timeout_s
        self._lock_wait_s = lock_wait_s
        self._lock = asyncio.Lock()

    async def _acquire(self) -> None:
        """The lock within ``lock_wait_s``, or ``TimeoutError``: the sender stayed busy."""
        async with asyncio.timeout(self._lock_wait_s):
            await self._lock.acquire()


class ServiceBusEventPublisher(_OneAtATime):
    async def publish(self, events: Sequence[OutboundEvent]) -> list[BaseException | None]:
        if not events:
            return []
        try:
            await self._acquire()
        except TimeoutError as error:
            busy = PublishUnavailable(
                f"the topic sender stayed busy for {self._lock_wait_s:g} s (another publish "
                "holds it, its link failing or slow); not sent"
            )
            busy.__cause__ = error
            return [busy] * len(events)
        try:
            return await self._publish(events)
        finally:
            self._lock.release()

    async def _publish(self, events: Sequence[OutboundEvent]) -> list[BaseException | None]:
        results: list[BaseException | None] = [None] * len(events)
        batch: ServiceBusMessageBatch | None = None
        members: list[int] = []
        for index, event in enumerate(events):
            message = to_service_bus_message(event)
            if batch is not None:
                try:
                    batch.add_message(message)
                    members.append(index)
                    continue
                except MessageSizeExceededError:  # full: send it, start another
                    failure = await self._send(batch)
                    if failure is not None:
                        return _fail(results, [*members, *range(index, len(events))], failure)
                    batch, members = None, []
            try:
                async with asyncio.timeout(self._timeout_s + _GRACE_S):
                    batch = await self._sender.create_message_batch()
            except Exception as error:  # noqa: BLE001 - reported per event
                return _fail(results, range(index, len(events)), _link_failure(error))
            try:
                batch.add_message(message)
                members.append(index)
            except MessageSizeExceededError as error:  # alone, it exceeds the entity's limit
                results[index] = EventRejected(f"message of {len(event.body)} bytes: {error}")
        if batch is not None and members:
            failure = await self._send(batch)
            if failure is not None:
                _fail(results, members, failure)
        return results

    async def _send(self, batch: ServiceBusMessageBatch) -> BaseException | None:
        """Send one batch; the translated error, or None when the topic accepted it."""
        try:
            async with asyncio.timeout(self._timeout_s + _GRACE_S):
                await self._sender.send_messages(batch, timeout=self._timeout_s)
        except Exception as error:  # noqa: BLE001 - reported per event
            return translate(error)
        return None


def _fail(
    results: list[BaseException | None], indexes: Sequence[int], failure: BaseException
) -> list[BaseException | None]:
    for index in indexes:
        results[index] = failure
    return results


def _retryable(error: Exception) -> bool:
    """A ``ServiceBusError`` the SDK itself marks retryable: every AMQP condition outside its
    no-retry list (``amqp:internal-error`` among them) is created with ``_retryable = True``
    (_transport/_pyamqp_transport.py:1164-1167; the list: _pyamqp/error.py:99-120 and
    _transport/_pyamqp_transport.py:119-130), and it retries them itself before raising
    (aio/_base_handler_async.py:205-207, 233-284). Still failing after those retries, it is an
    outage, not this event's fault: retried, never parked."""
    return isinstance(error, ServiceBusError) and bool(getattr(error, "_retryable", False))


def _condition(error: Exception) -> str | None:
    """The AMQP condition a ``ServiceBusError`` was raised for: the SDK decodes it onto the error
    (exceptions.py:28, :35-39); None when it has none (e.g. "Handler failed: ...",
    _transport/_pyamqp_transport.py:1201-1203)."""
    condition = getattr(error, "_condition", None) if isinstance(error, ServiceBusError) else None
    if isinstance(condition, bytes):
        return condition.decode("utf-8", "replace")
    return condition if isinstance(condition, str) else None


def _link_failure(error: Exception) -> BaseException:
    """An error of ``create_message_batch``, which opens the link and holds no message: never
    the event's, so one nobody classified is unavailable (retried, alerted), not charged to the
    event the relay would then send alone."""
    translated = translate(error)
    if translated is not error:
        return translated
    unavailable = PublishUnavailable(f"{type(error).__name__}: {error}")
    unavailable.__cause__ = error
    return unavailable


def translate(error: Exception) -> BaseException:
    """The SDK's error as ``shared.relay.core`` classifies it (the original is the cause); an
    error nobody classified is returned as itself."""
    translated: BaseException
    condition = _condition(error)
    if isinstance(error, MessageSizeExceededError):
        translated = EventRejected(str(error))
    elif (
        isinstance(
            error,
            ServiceBusAuthenticationError
            | ServiceBusAuthorizationError
            | ClientAuthenticationError
            | MessagingEntityNotFoundError
            | MessagingEntityDisabledError
            | ServiceBusQuotaExceededError,
        )
        or condition in _SYSTEMIC_CONDITIONS
    ):
        translated = PublishMisconfigured(f"{type(error).__name__}: {error}")
    elif (
        isinstance(
            error,
            OperationTimeoutError
            | ServiceBusConnectionError
            | ServiceBusCommunicationError
            | ServiceBusServerBusyError
            | TimeoutError
            | ConnectionError,
        )
        or _retryable(error)
        or condition in _UNAVAILABLE_CONDITIONS
    ):
        translated = PublishUnavailable(f"{type(error).__name__}: {error}")
    else:
        return error
    translated.__cause__ = error
    return translated


class ServiceBusOrderSender(_OneAtATime):
    """The public edge's ``MessageSender`` (``shared.edge.sender``) on the ``orders`` queue's
    sender, built like the topic's (``shared.bootstrap``: one per process, identity-based on the
    queue trigger's namespace).

    The message is the edge's intent as stored: MessageId and body bytes as given, content type
    ``application/json`` (the body is the contract's JSON, UTF-8), Subject the message type but
    none for an OrderPlaced ("no Subject means OrderPlaced", ``shared.consumer.contract``: the
    consumer reads both alike, and producers written before the lifecycle send none).

    The sender is shared by the process's concurrent HTTP invocations, so one ``asyncio.Lock``
    serialises sends (the SDK's own advice, module docstring), waited on at most
    ``lock_wait_s``; each send is bounded by ``timeout_s`` (the SDK's total, retries included)
    and an ``asyncio.timeout`` around it. An error is translated by the topic's table
    (``translate``): unavailable (a timeout, the connection, the server busy, an error the SDK
    marks retryable, a busy lock) is ``SendFailed``, which the edge answers 503 with its intent
    kept; anything else (the queue missing or disabled, the identity refused, the quota, a
    message too large, an unclassified AMQP condition) is raised as the SDK raised it: a fault
    of the system or a bug, which the HTTP layer answers 500 and the host logs; the intent is
    kept, and a retry of the key sends it once the system is fixed."""

    async def send(self, message_id: str, subject: str, body: bytes) -> None:
        message = ServiceBusMessage(
            body,
            message_id=message_id,
            content_type=ORDER_MESSAGE_CONTENT_TYPE,
            subject=None if subject == ORDER_PLACED else subject,
        )
        try:
            await self._acquire()
        except TimeoutError as error:
            raise SendFailed(
                f"the queue sender stayed busy for {self._lock_wait_s:g} s; not sent"
            ) from error
        try:
            async with asyncio.timeout(self._timeout_s + _GRACE_S):
                await self._sender.send_messages(message, timeout=self._timeout_s)
        except Exception as error:
            translated = translate(error)
            if isinstance(translated, PublishUnavailable):
                raise SendFailed(str(translated)) from error
            raise
        finally:
            self._lock.release()
