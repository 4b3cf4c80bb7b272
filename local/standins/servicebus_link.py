"""The real ``azure-servicebus`` client over the local broker model, joined at the SDK's AMQP
client boundary: ``servicebus_client(namespace)`` is a genuine ``ServiceBusClient`` whose
receivers and senders run all of their own code (``receive_messages``, ``peek_messages``,
``complete_message``, ``abandon_message``, ``renew_message_lock``, ``send_messages``, message
batches, retries, error mapping), and whose pyamqp ``ReceiveClient`` / ``SendClient`` (the
"handler", created by ``PyamqpTransport.create_receive_client`` / ``create_send_client``) are
replaced by the two classes below, which speak to ``local.standins.broker.PeekLockQueue``.

Why this boundary, the lowest one that lets the public methods run: everything above it is the
SDK's own handling of Service Bus (``ServiceBusReceivedMessage`` built from the transfer frame and
the decoded AMQP message, the lock token from the delivery tag, settlement mapped to AMQP
outcomes: accepted = complete, modified = abandon, rejected with ``com.microsoft:dead-letter``
= dead-letter, azure/servicebus/_transport/_pyamqp_transport.py:906-965; management requests
encoded and their responses parsed, azure/servicebus/_common/mgmt_handlers.py); everything below
it is connection, session, link and CBS frame plumbing that carries no Service Bus semantics and
that no project code touches. Standing in lower would mean writing an AMQP 1.0 broker.

What crosses the boundary is what crosses the wire: every message is encoded with pyamqp's own
encoder and decoded with its own decoder (``_encode.encode_payload``, ``_decode.decode_payload``),
so the SDK sees the types a link delivers (strings as ``bytes``, annotations, timestamps).

Management operations, as the AMQP request/response page defines them
(https://learn.microsoft.com/azure/service-bus-messaging/service-bus-amqp-request-response):
``peek-message`` (from a sequence number, at most ``message-count``; 204 when there are none),
``renew-lock`` (``expirations``), ``update-disposition`` (settlement by lock token). Not
modelled: ``receive-by-sequence-number`` (deferral), sessions, scheduling, rules; they answer 501.

Time: the broker runs on its own clock (a ``ManualClock`` in tests and the demo), the SDK on the
wall clock (it refuses to settle a message whose ``locked_until_utc`` is past,
azure/servicebus/_servicebus_receiver.py:478). A lock's expiry is therefore sent as "now on the
wall clock + what is left of the lock on the broker's clock", as a broker and a client whose
clocks agree would see it; enqueue times are sent on the broker's clock as they are.

The async client (``async_servicebus_client``) joins at the same boundary for senders: pyamqp's
``SendClientAsync`` (``PyamqpTransportAsync.create_send_client_async``) is replaced by
``AsyncSendHandler``, the same send over awaitables, so the app's own aio sender (the public
edge's sender to the ``orders`` queue) runs all of its code (``send_messages``, ``_open``,
retries, error mapping) into the broker model, its duplicate detection included. Receivers are
not modelled on the async client.

Not reproduced: message size limits, link credit beyond one receive call (the SDK asks for what
it returns: prefetch 0), network faults, throttling.
"""

from __future__ import annotations

import queue as queue_module
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from azure.servicebus import ServiceBusClient
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.error import AMQPError, ErrorCondition, MessageException
from azure.servicebus._pyamqp.message import BatchMessage, Header, Message, Properties
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio._transport._pyamqp_transport_async import PyamqpTransportAsync
from idempotent_consumer import SYSTEM_CLOCK, Clock
from idempotent_consumer.servicebus import property_text

from local.standins.broker import (
    AmqpSequence,
    AmqpValue,
    Delivery,
    MessageLockLostError,
    NotAllowedError,
    OutgoingMessage,
    PeekedMessage,
    PeekLockQueue,
    PropertyValue,
    SubQueue,
)

HOSTNAME = "local-broker.servicebus.windows.net"
# A well-formed connection string (a SAS signature is computed locally and never checked).
CONNECTION_STRING = (
    f"Endpoint=sb://{HOSTNAME}/;SharedAccessKeyName=local;SharedAccessKey=bG9jYWwtYnJva2Vy"
)
MAX_MESSAGE_BYTES = 256 * 1024  # Standard tier
_DEAD_LETTER_SUFFIX = "/$deadletterqueue"
_LOCK_LOST = b"com.microsoft:message-lock-lost"
_NOT_ALLOWED = b"amqp:not-allowed"
_IDLE_WAIT_S = 0.005  # what an empty do_work waits, so a receive's wait does not spin


class SendTarget(Protocol):
    """What a sender sends to: a queue, or a topic (``local.standins.topic.OrderEventsTopic``)."""

    def send_batch(self, messages: list[OutgoingMessage]) -> list[bool]: ...


@dataclass
class LocalNamespace:
    """The entities of the stand-in's namespace, by path: a queue (``orders``) or a topic
    subscription (``order-events/Subscriptions/retained``), each a ``PeekLockQueue``; and the
    topics a sender may send to (``order-events``), which receivers never read."""

    entities: dict[str, PeekLockQueue] = field(default_factory=dict)
    topics: dict[str, SendTarget] = field(default_factory=dict)
    #: Wraps every operation the handlers perform (fault injection in tests: a tool killed
    #: mid-way); called with the operation's name before it runs.
    before_operation: Callable[[str], None] = lambda _operation: None
    #: The SDK's clock, against which it judges a lock's ``locked_until_utc`` (see "Time").
    client_clock: Clock = SYSTEM_CLOCK

    def resolve(self, address: str) -> tuple[PeekLockQueue, SubQueue]:
        path = address.split("://", 1)[-1].split("/", 1)[-1] if "://" in address else address
        sub_queue = SubQueue.ACTIVE
        if path.lower().endswith(_DEAD_LETTER_SUFFIX):
            path, sub_queue = path[: -len(_DEAD_LETTER_SUFFIX)], SubQueue.DEAD_LETTER
        for name, entity in self.entities.items():
            if name.lower() == path.lower():
                return entity, sub_queue
        raise MessageException(ErrorCondition.NotFound, description=f"no entity {path!r}")

    def send_target(self, address: str) -> SendTarget:
        """A topic of that path, else the queue ``resolve`` finds."""
        path = address.split("://", 1)[-1].split("/", 1)[-1] if "://" in address else address
        for name, topic in self.topics.items():
            if name.lower() == path.lower():
                return topic
        queue, _ = self.resolve(address)
        return queue


def servicebus_client(namespace: LocalNamespace) -> ServiceBusClient:
    """A real ``ServiceBusClient`` whose handlers speak to ``namespace``."""
    client = ServiceBusClient.from_connection_string(CONNECTION_STRING)
    # The client passes its transport to every receiver and sender it creates
    # (azure/servicebus/_servicebus_client.py:370, :504); this is the one private assignment.
    client._amqp_transport = _transport_over(namespace)
    return client


def async_servicebus_client(
    namespace: LocalNamespace, **client_options: Any
) -> AsyncServiceBusClient:
    """A real ``azure.servicebus.aio.ServiceBusClient`` whose senders speak to ``namespace``;
    ``client_options`` are the client's own (``retry_backoff_factor`` ...)."""
    client = AsyncServiceBusClient.from_connection_string(CONNECTION_STRING, **client_options)
    # As ``servicebus_client``: the aio client passes its transport to every sender it creates
    # (azure/servicebus/aio/_servicebus_client_async.py:141, get_queue_sender :357); the one
    # private assignment.
    client._amqp_transport = _async_transport_over(namespace)
    return client


def _async_transport_over(namespace: LocalNamespace) -> type[PyamqpTransportAsync]:
    class LocalBrokerTransportAsync(PyamqpTransportAsync):
        @staticmethod
        def create_send_client_async(config: Any, **kwargs: Any) -> Any:
            return AsyncSendHandler(namespace, str(kwargs["target"]))

    return LocalBrokerTransportAsync


def _transport_over(namespace: LocalNamespace) -> type[PyamqpTransport]:
    class LocalBrokerTransport(PyamqpTransport):
        @staticmethod
        def create_receive_client(receiver: Any, **kwargs: Any) -> Any:
            return ReceiveHandler(namespace, str(kwargs["source"]))

        @staticmethod
        def create_send_client(config: Any, **kwargs: Any) -> Any:
            return SendHandler(namespace, str(kwargs["target"]))

    return LocalBrokerTransport


# ---- the link objects the SDK reads through the handler ------------------------------------


class _Connection:
    def listen(self, wait: float | bool = False, **_: Any) -> None:
        """Nothing arrives outside a receive call (the SDK asks for what it returns)."""


@dataclass
class _Link:
    name: str
    current_link_credit: int = 0
    remote_max_message_size: int = MAX_MESSAGE_BYTES
    remote_properties: dict[bytes, Any] | None = None
    _is_closed: bool = False

    def flow(self, *, link_credit: int | None = None, drain: bool = False, **_: Any) -> None:
        # An AMQP flow sets the credit, it does not add to it.
        self.current_link_credit = 0 if drain else int(link_credit or 0)


class _Handler:
    """What both handlers share: open/close and readiness, as pyamqp's ``AMQPClient``."""

    def __init__(self, namespace: LocalNamespace, address: str) -> None:
        self._namespace = namespace
        self._address = address
        self._link = _Link(name=f"local-{uuid.uuid4()}")
        self._connection = _Connection()
        self._socket_timeout = 0.2
        self._shutdown = True

    def open(self, connection: Any = None) -> None:
        self._namespace.before_operation("open")
        self._shutdown = False

    def client_ready(self) -> bool:
        return True

    def close(self) -> None:
        self._shutdown = True
        self._link._is_closed = True


class ReceiveHandler(_Handler):
    """pyamqp's ``ReceiveClient`` as the SDK's receiver uses it (azure/servicebus/
    _servicebus_receiver.py ``_receive``, ``_settle_message``; _base_handler.py
    ``_mgmt_request_response``)."""

    def __init__(self, namespace: LocalNamespace, source: str) -> None:
        super().__init__(namespace, source)
        self._queue, self._sub_queue = namespace.resolve(source)
        self._received_messages: queue_module.Queue[tuple[Any, Message]] = queue_module.Queue()
        self._last_activity_timestamp = time.time()
        self._delivery_ids = iter(range(1, 1 << 62))
        self._message_received: Callable[[Any, Message], None] = self._buffer

    def _clock_offset(self) -> timedelta:
        """Wall clock minus the broker's clock (see the module docstring, "Time")."""
        return self._namespace.client_clock.now() - self._queue.clock.now()

    def _buffer(self, frame: Any, message: Message) -> None:
        self._received_messages.put((frame, message))

    def do_work(self, **_: Any) -> bool:
        """One connection iteration: the broker delivers up to the link's credit."""
        if self._shutdown:
            return False
        credit = self._link.current_link_credit
        if credit <= 0:
            time.sleep(_IDLE_WAIT_S)
            return True
        self._namespace.before_operation("receive")
        deliveries = self._queue.receive(credit, self._sub_queue)
        if not deliveries:
            time.sleep(_IDLE_WAIT_S)
            return True
        self._link.current_link_credit -= len(deliveries)
        offset = self._clock_offset()
        for delivery in deliveries:
            # The transfer frame's delivery-id and delivery-tag (the lock token, as the SDK
            # reads it: message.py:1168 ``uuid.UUID(bytes_le=delivery_tag)``).
            frame = (0, next(self._delivery_ids), delivery.lock_token.bytes_le)
            self._message_received(frame, _delivered(delivery, offset))
        return True

    def settle_messages(
        self, delivery_id: Any, delivery_tag: bytes, outcome: str, **kwargs: Any
    ) -> None:
        """A disposition on the receiver link. The SDK awaits the outcome in peek-lock mode
        (receiver_mixins.py:72), so a refused settlement raises what the service's rejected
        outcome raises (``MessageException`` with its condition, pyamqp/receiver.py:53)."""
        self._namespace.before_operation(f"settle:{outcome}")
        token = uuid.UUID(bytes_le=bytes(delivery_tag))
        outcome = outcome.lower()
        try:
            if outcome == "accepted":
                self._queue.complete(token)
            elif outcome == "modified" and kwargs.get("undeliverable_here"):
                raise MessageException(
                    ErrorCondition.NotImplemented, description="defer is not modelled"
                )
            elif outcome in {"modified", "released"}:
                # released: not documented for Service Bus; modelled as an abandon.
                self._queue.abandon(token)
            elif outcome == "rejected":
                error: AMQPError | None = kwargs.get("error")
                info = dict(error.info or {}) if error is not None else {}
                self._queue.dead_letter(
                    token,
                    property_text(info.get("DeadLetterReason")),
                    property_text(info.get("DeadLetterErrorDescription")),
                )
            else:
                raise ValueError(f"unsupported outcome {outcome!r}")
        except MessageLockLostError as lost:
            raise MessageException(_LOCK_LOST, description=str(lost)) from lost
        except NotAllowedError as refused:
            raise MessageException(_NOT_ALLOWED, description=str(refused)) from refused

    def mgmt_request(
        self,
        message: Message,
        *,
        operation: Any = None,
        operation_type: Any = None,
        node: Any = None,
        timeout: float = 0,
        **_: Any,
    ) -> tuple[int, str, Message]:
        """One request to the entity's ``$management`` node: (status, description, response),
        as pyamqp's ``ManagementOperation.execute`` returns them."""
        operation_name = operation[VALUE] if isinstance(operation, Mapping) else operation
        name = property_text(operation_name) or ""
        self._namespace.before_operation(f"mgmt:{name}")
        request = _wire(message).value or {}
        if name == "com.microsoft:peek-message":
            return self._peek(request)
        if name == "com.microsoft:renew-lock":
            return self._renew(request)
        if name == "com.microsoft:update-disposition":
            return self._dispose(request)
        return _response(501, f"{name} is not modelled by the local broker")

    def _peek(self, request: Mapping[bytes, Any]) -> tuple[int, str, Message]:
        peeked = self._queue.peek(
            int(request.get(b"from-sequence-number") or 1),
            int(request.get(b"message-count") or 1),
            self._sub_queue,
        )
        if not peeked:
            return _response(204, "No messages to peek")
        encoded = [{b"message": _encode(_peeked(p))} for p in peeked]
        return _response(200, "OK", {b"messages": encoded})

    def _renew(self, request: Mapping[bytes, Any]) -> tuple[int, str, Message]:
        expirations = []
        try:
            for token in request.get(b"lock-tokens") or []:
                renewed = self._queue.renew_lock(uuid.UUID(str(token)))
                expirations.append(_timestamp(renewed + self._clock_offset()))
        except MessageLockLostError as lost:
            return _response(410, str(lost), condition=_LOCK_LOST)
        return _response(200, "OK", {b"expirations": expirations})

    def _dispose(self, request: Mapping[bytes, Any]) -> tuple[int, str, Message]:
        status = property_text(request.get(b"disposition-status"))
        settle: dict[str | None, Callable[[uuid.UUID], None]] = {
            "completed": self._queue.complete,
            "abandoned": self._queue.abandon,
            "suspended": lambda token: self._queue.dead_letter(
                token,
                property_text(request.get(b"deadletter-reason")),
                property_text(request.get(b"deadletter-description")),
            ),
        }
        if status not in settle:
            return _response(501, f"disposition {status!r} is not modelled")
        try:
            for token in request.get(b"lock-tokens") or []:
                settle[status](uuid.UUID(str(token)))
        except MessageLockLostError as lost:
            return _response(410, str(lost), condition=_LOCK_LOST)
        return _response(200, "OK", {})


class SendHandler(_Handler):
    """pyamqp's ``SendClient`` as the SDK's sender uses it (``send_message`` of one message or
    of a ``BatchMessage``, PyamqpTransport.send_messages, _pyamqp_transport.py:545)."""

    def __init__(self, namespace: LocalNamespace, target: str) -> None:
        super().__init__(namespace, target)
        self._target = namespace.send_target(target)

    def send_message(self, message: Message, *, timeout: float = 0, **_: Any) -> None:
        self._namespace.before_operation("send")
        if isinstance(message, BatchMessage):
            sections: Any = message.data or []
            outgoing = [_outgoing(decode_payload(memoryview(bytes(m)))) for m in sections]
        else:
            outgoing = [_outgoing(_wire(message))]
        # A send is accepted whole; duplicate detection then drops each repeated MessageId,
        # and the sender is not told (the send succeeds).
        self._target.send_batch(outgoing)


class AsyncSendHandler:
    """pyamqp's ``SendClientAsync`` as the SDK's aio sender uses it (``open_async``,
    ``client_ready_async``, ``send_message_async``, ``close_async``, ``_link``:
    aio/_servicebus_sender_async.py ``_open``, aio/_transport/_pyamqp_transport_async.py
    ``send_messages_async``): ``SendHandler``'s send, awaited."""

    def __init__(self, namespace: LocalNamespace, target: str) -> None:
        self._handler = SendHandler(namespace, target)
        self._link = self._handler._link

    async def open_async(self, connection: Any = None) -> None:
        self._handler.open(connection)

    async def client_ready_async(self) -> bool:
        return self._handler.client_ready()

    async def send_message_async(
        self,
        message: Message,
        *,
        timeout: float = 0,  # noqa: ASYNC109 - pyamqp's signature
        **_: Any,
    ) -> None:
        self._handler.send_message(message, timeout=timeout)

    async def close_async(self) -> None:
        self._handler.close()


# ---- translation between the broker model and AMQP messages --------------------------------


def _encode(message: Message) -> bytes:
    output = bytearray()
    encode_payload(output, message)
    return bytes(output)


def _wire(message: Message) -> Message:
    """The message as the other side of a link decodes it."""
    decoded: Message = decode_payload(memoryview(_encode(message)))
    return decoded


def _response(
    status: int,
    description: str,
    value: Any = None,
    *,
    condition: bytes | None = None,
) -> tuple[int, str, Message]:
    properties: dict[str | bytes, Any] = {"statusCode": status, "statusDescription": description}
    if condition is not None:
        properties["errorCondition"] = {TYPE: AMQPTypes.symbol, VALUE: condition}
    return status, description, _wire(Message(value=value, application_properties=properties))


def _timestamp(moment: datetime) -> dict[str, Any]:
    return {TYPE: AMQPTypes.timestamp, VALUE: int(moment.timestamp() * 1000)}


def _amqp(
    message: OutgoingMessage,
    *,
    sequence_number: int,
    enqueued_time: datetime,
    delivery_count: int,
    locked_until: datetime | None,
    dead_letter: tuple[str | None, str | None] | None,
) -> Message:
    properties: dict[str | bytes, Any] = {k: v for k, v in message.application_properties.items()}
    if dead_letter is not None:
        # Service Bus adds these two to a dead-lettered message (the dead-letter page, "Moving
        # messages to the DLQ"); the SDK reads them there (message.py:1046).
        reason, description = dead_letter
        properties["DeadLetterReason"] = reason or ""
        if description is not None:
            properties["DeadLetterErrorDescription"] = description
    annotations: dict[str | bytes, Any] = {
        b"x-opt-sequence-number": {TYPE: AMQPTypes.long, VALUE: sequence_number},
        b"x-opt-enqueued-time": _timestamp(enqueued_time),
    }
    if locked_until is not None:
        annotations[b"x-opt-locked-until"] = _timestamp(locked_until)
    body: dict[str, Any] = {"data": [message.body]}
    if isinstance(message.amqp_body, AmqpValue):
        body = {"value": message.amqp_body.value}
    elif isinstance(message.amqp_body, AmqpSequence):
        body = {"sequence": [list(section) for section in message.amqp_body.sections]}
    # The header carries Service Bus's DeliveryCount, 1 on the first delivery, as the SDK reads
    # it (message.py:1097), and as local/standins/host_binding.py encodes it for the consumer.
    return Message(
        header=Header(delivery_count=delivery_count),
        message_annotations=annotations,
        properties=Properties(
            message_id=message.message_id,
            correlation_id=message.correlation_id,
            content_type=message.content_type,
            subject=message.subject,
        ),
        application_properties=properties or None,
        **body,
    )


def _delivered(delivery: Delivery, clock_offset: timedelta) -> Message:
    dead = delivery.sub_queue is SubQueue.DEAD_LETTER
    return _wire(
        _amqp(
            delivery.message,
            sequence_number=delivery.sequence_number,
            enqueued_time=delivery.enqueued_time,
            delivery_count=delivery.delivery_count,
            locked_until=delivery.locked_until + clock_offset,
            dead_letter=(
                (delivery.dead_letter_reason, delivery.dead_letter_description) if dead else None
            ),
        )
    )


def _peeked(peeked: PeekedMessage) -> Message:
    dead = peeked.sub_queue is SubQueue.DEAD_LETTER
    return _amqp(
        peeked.message,
        sequence_number=peeked.sequence_number,
        enqueued_time=peeked.enqueued_time,
        delivery_count=peeked.delivery_count,
        locked_until=None,
        dead_letter=(peeked.dead_letter_reason, peeked.dead_letter_description) if dead else None,
    )


def _outgoing(message: Message) -> OutgoingMessage:
    """A sent AMQP message, as the broker stores it."""
    props = message.properties or Properties()
    amqp_body: AmqpValue | AmqpSequence | None = None
    body = b""
    if message.data is not None:
        body = b"".join(bytes(section) for section in message.data)
    elif message.sequence is not None:
        amqp_body = AmqpSequence(tuple(tuple(section) for section in message.sequence))
    else:
        amqp_body = AmqpValue(message.value)
    return OutgoingMessage(
        message_id=property_text(props.message_id),
        body=body,
        correlation_id=property_text(props.correlation_id),
        content_type=property_text(props.content_type),
        application_properties={
            property_text(key) or "": _property(value)
            for key, value in (message.application_properties or {}).items()
        },
        subject=property_text(props.subject),
        amqp_body=amqp_body,
    )


def _property(value: Any) -> PropertyValue:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str | int | float | bool):
        return value
    return str(value)
