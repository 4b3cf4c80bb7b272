"""The Service Bus adapter: read a received message into the core's terms, and settle it.

``ServiceBusMessageActions`` settles over a blocking gRPC call to the Functions host; it runs in a
worker thread so one slow settlement never stalls the other messages on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from shared.core import Decision, IncomingMessage, Settlement


class MessageActions(Protocol):
    """The part of ``azurefunctions.extensions.bindings.servicebus.ServiceBusMessageActions``
    this consumer uses."""

    def complete(self, message: Any) -> None: ...

    def abandon(self, message: Any) -> None: ...

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None: ...


def to_incoming(message: Any) -> IncomingMessage:
    """``azure.servicebus.ServiceBusReceivedMessage`` -> ``IncomingMessage``."""
    return IncomingMessage(
        message_id=_text(message.message_id),
        body=_body_bytes(message.body),
        correlation_id=_text(message.correlation_id),
        delivery_count=message.delivery_count,
        application_properties=_properties(message.application_properties),
        locked_until=message.locked_until_utc,
    )


async def settle(actions: MessageActions, message: Any, decision: Decision) -> None:
    """Apply the decision's settlement; raises what the settlement call raised."""
    settlement = decision.settlement
    if settlement is Settlement.COMPLETE:
        await asyncio.to_thread(actions.complete, message)
    elif settlement is Settlement.DEADLETTER:
        await asyncio.to_thread(
            actions.deadletter,
            message,
            deadletter_reason=decision.deadletter_reason,
            deadletter_error_description=decision.description,
        )
    else:
        await asyncio.to_thread(actions.abandon, message)


def _body_bytes(body: Any) -> bytes:
    # The SDK yields a data body as a generator of sections; value bodies come as they are.
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    try:
        return b"".join(bytes(section) for section in body)
    except TypeError:
        # Not a data body (an AMQP value or sequence): not an OrderPlaced, fail validation.
        return repr(body).encode("utf-8", "replace")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _properties(properties: Mapping[Any, Any] | None) -> dict[str, Any]:
    # uamqp-decoded application properties arrive with bytes keys and values.
    if not properties:
        return {}
    return {
        _text(key) or "": value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        for key, value in properties.items()
    }
