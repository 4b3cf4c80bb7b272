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
    """``azure.servicebus.ServiceBusReceivedMessage`` -> ``IncomingMessage``.

    The SDK's message reads each property through its AMQP sections, testing the section's
    truth on every read (``_amqp_message.py``: ``DictMixin.__len__`` lists the section's
    attributes), so the sections are read here once (``raw_amqp_message``, public), with what
    the SDK's getters return: a section that is absent gives ``None``, a property is text
    (``property_text`` decodes the bytes the SDK would have tried to decode, message.py:475-540),
    the delivery count is the header's. A message without ``raw_amqp_message`` (a double) is
    read through the same attributes the SDK's message has."""
    raw = getattr(message, "raw_amqp_message", None)
    if raw is None:
        return _from_attributes(message)
    properties, header = raw.properties, raw.header
    return IncomingMessage(
        message_id=None if properties is None else property_text(properties.message_id),
        body=read_body(raw.body, raw.body_type).content,
        correlation_id=None if properties is None else property_text(properties.correlation_id),
        delivery_count=None if header is None else header.delivery_count,
        application_properties=_properties(raw.application_properties),
        locked_until=message.locked_until_utc,
        subject=None if properties is None else property_text(properties.subject),
    )


def _from_attributes(message: Any) -> IncomingMessage:
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
