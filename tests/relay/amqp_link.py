"""The AMQP link under a real ``azure.servicebus.aio.ServiceBusSender``: the lowest boundary of the
SDK a test can hold without a Service Bus namespace.

The sender is the SDK's own, built from a connection string (no network is touched to build
it). Only its private ``_create_handler`` is replaced (aio/_servicebus_sender_async.py:204-213,
which builds pyamqp's ``SendClientAsync``): it installs a ``FakeSendLink`` instead. Everything
above it runs as in production: ``send_messages``, ``create_message_batch``, ``_open`` (which
closes a handler that is not running, :215-221), the SDK's retries and backoff
(aio/_base_handler_async.py:233-310) and its error mapping
(_transport/_pyamqp_transport.py:1191-1206).

``FakeSendLink`` implements what the sender and its pyamqp transport call on the handler
(_pyamqp/aio/_client_async.py): ``open_async``, ``client_ready_async``, ``send_message_async``,
``close_async``, and ``_link.remote_max_message_size`` / ``remote_properties``
(_transport/_pyamqp_transport.py:401-427). Its behaviours and their sources:

- a send on a link that was closed while the send was in flight fails as pyamqp's does when its
  connection stops: ``MessageException(ClientError, "Send failed - connection not running.")``
  (_pyamqp/aio/_client_async.py:583-588);
- a rejected send fails as pyamqp reports a rejected disposition: ``MessageSendFailed`` with
  the condition (_pyamqp/client.py:657-665), which the SDK maps and marks retryable unless the
  condition is in its no-retry list (_transport/_pyamqp_transport.py:1164-1167);
- a hung link (``hang_open`` / ``hang_send``) never answers: no frame, no disposition.

Not reproduced: pyamqp's own retries inside ``send_message_async`` (one attempt per call
here), CBS authentication, the connection's idle timeout and keep-alive, partial frames.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp.error import (
    AMQPConnectionError,
    AMQPException,
    AMQPLinkError,
    ErrorCondition,
    MessageException,
    MessageSendFailed,
)
from azure.servicebus._pyamqp.message import BatchMessage
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender
from azure.servicebus.exceptions import ServiceBusError

# A connection string of the shape the SDK parses; nothing connects with it.
CONNECTION_STRING = (
    "Endpoint=sb://relay-test.servicebus.windows.net/;SharedAccessKeyName=send;"
    "SharedAccessKey=bm90LWEtcmVhbC1rZXk="
)
MAX_MESSAGE_BYTES = 256 * 1024  # Standard tier


@dataclass
class LinkNetwork:
    """Every link the sender opened, and what they were asked to do."""

    latency_s: float = 0.002
    hang_open: bool = False
    hang_send: bool = False
    reject_with: ErrorCondition | None = None  # every send is rejected with this condition
    links: list[FakeSendLink] = field(default_factory=list)
    sent_ids: list[str] = field(default_factory=list)  # MessageIds the topic accepted
    send_attempts: int = 0
    closed_under_use: int = 0  # a link closed while an operation was in flight on it
    in_flight_peak: int = 0  # most operations at once on one sender

    def new_link(self) -> FakeSendLink:
        link = FakeSendLink(self)
        self.links.append(link)
        return link

    @property
    def in_flight(self) -> int:
        return sum(link.in_flight for link in self.links)


class FakeSendLink:
    """Stands in for pyamqp's ``SendClientAsync`` (see the module docstring)."""

    def __init__(self, network: LinkNetwork) -> None:
        self._network = network
        self.in_flight = 0
        self.opened = False
        self.shutdown = False
        self._link = SimpleNamespace(
            remote_max_message_size=MAX_MESSAGE_BYTES, remote_properties=None
        )

    async def _operation(self, hang: bool) -> None:
        self.in_flight += 1
        network = self._network
        network.in_flight_peak = max(network.in_flight_peak, network.in_flight)
        try:
            if hang:
                await asyncio.Event().wait()  # never set: a link that never answers
            await asyncio.sleep(network.latency_s)
        finally:
            self.in_flight -= 1

    async def open_async(self, connection: Any = None) -> None:
        await self._operation(self._network.hang_open)
        self.opened = True

    async def client_ready_async(self) -> bool:
        return self.opened and not self.shutdown

    async def send_message_async(
        self,
        message: Any,
        *,
        timeout: float = 0,  # noqa: ASYNC109 - pyamqp's signature
        **_: Any,
    ) -> None:
        network = self._network
        network.send_attempts += 1
        await self._operation(network.hang_send)
        if self.shutdown:
            raise MessageException(
                condition=ErrorCondition.ClientError,
                description="Send failed - connection not running.",
            )
        if network.reject_with is not None:
            raise MessageSendFailed(network.reject_with, description="injected: rejected")
        network.sent_ids.extend(_message_ids(message))

    async def close_async(self) -> None:
        if self.in_flight:
            self._network.closed_under_use += 1
        self.shutdown = True


def _message_ids(message: Any) -> list[str]:
    """The MessageIds of what the sender handed the link: a ``BatchMessage`` of encoded
    messages (aio/_transport/_pyamqp_transport_async.py:177-178), or one message."""
    data = message.data if isinstance(message, BatchMessage) else None
    encoded: list[bytes] = [data] if isinstance(data, bytes) else list(data or [])
    messages = [decode_payload(memoryview(raw)) for raw in encoded] if encoded else [message]
    ids = []
    for decoded in messages:
        value = decoded.properties.message_id if decoded.properties else None
        ids.append(value.decode() if isinstance(value, bytes) else str(value))
    return ids


def sender_on(network: LinkNetwork, topic: str, **client_options: Any) -> ServiceBusSender:
    """A real topic sender whose handler (the AMQP link) is ``network``'s."""
    client = ServiceBusClient.from_connection_string(CONNECTION_STRING, **client_options)
    sender = client.get_topic_sender(topic)

    def create_handler(auth: Any) -> None:
        sender._handler = network.new_link()

    sender._create_handler = create_handler  # type: ignore[method-assign]
    return sender


def service_bus_error(
    condition: ErrorCondition, *, on: str = "link", description: str = "injected"
) -> ServiceBusError:
    """The error the SDK raises for an AMQP ``condition``, built as it builds it: pyamqp's
    exception (a link detached or a connection closed with the condition, or a rejected
    disposition: ``on`` = "link", "connection" or "disposition") mapped by
    ``create_servicebus_exception`` (_transport/_pyamqp_transport.py:1191-1205, the class and
    ``_retryable`` from :1113-1167)."""
    amqp_errors: dict[str, type[AMQPException]] = {
        "link": AMQPLinkError,
        "connection": AMQPConnectionError,
        "disposition": MessageSendFailed,
    }
    amqp_error = amqp_errors[on](condition, description=description)
    return PyamqpTransport.create_servicebus_exception(
        logging.getLogger("azure.servicebus"), amqp_error
    )
