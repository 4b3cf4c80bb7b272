"""A received Service Bus message read into the kit's terms (``IncomingMessage``): its id, body
(``_body``: the one reading of an AMQP body), correlation id, delivery count, application
properties, lock expiry and subject. Reads attributes only: no Azure import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from idempotent_consumer import IncomingMessage
from idempotent_consumer.servicebus._body import property_text, read_body


def to_incoming(message: Any) -> IncomingMessage:
    """``azure.servicebus.ServiceBusReceivedMessage`` -> ``IncomingMessage``."""
    return IncomingMessage(
        message_id=property_text(message.message_id),
        # One reading for the consumer and an operator's dead-letter tool (``read_body``).
        body=read_body(message.body, getattr(message, "body_type", None)).content,
        correlation_id=property_text(message.correlation_id),
        delivery_count=message.delivery_count,
        application_properties=_properties(message.application_properties),
        locked_until=message.locked_until_utc,
        subject=property_text(message.subject),
    )


def _properties(properties: Mapping[Any, Any] | None) -> dict[str, Any]:
    # uamqp-decoded application properties arrive with bytes keys and values.
    if not properties:
        return {}
    return {
        property_text(key) or "": property_text(value) if isinstance(value, bytes) else value
        for key, value in properties.items()
    }
