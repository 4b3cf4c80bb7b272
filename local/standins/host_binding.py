"""The bytes the Functions host hands the Python worker for one Service Bus message, and their
decoding through the extension's own converter (the production path).

Format (model_binding_data, source ``AzureServiceBusReceivedMessage``): the 16-byte lock token as a
little-endian GUID, the marker ``x-opt-lock-token``, then the AMQP-encoded message. The host
re-encodes the message it received with the .NET SDK, whose header carries Service Bus's
DeliveryCount (1 on the first delivery); so does this encoder.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import uamqp
from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.base import Datum
from azurefunctions.extensions.bindings.servicebus import ServiceBusConverter
from uamqp.message import MessageHeader, MessageProperties

LOCK_TOKEN_MARKER = b"x-opt-lock-token"


@dataclass(frozen=True)
class ModelBindingData:
    """The shape of the worker's ``ModelBindingData`` protobuf that the converter reads."""

    content: bytes
    version: str = "1.0"
    source: str = "AzureServiceBusReceivedMessage"
    content_type: str = "application/octet-stream"


def encode_amqp(
    *,
    body: bytes,
    message_id: str | None,
    correlation_id: str | None = None,
    content_type: str | None = None,
    subject: str | None = None,
    application_properties: dict[str, Any] | None = None,
    delivery_count: int = 1,
    enqueued_time: datetime | None = None,
    sequence_number: int = 0,
    locked_until: datetime | None = None,
) -> bytes:
    properties = MessageProperties(
        message_id=message_id,
        correlation_id=correlation_id,
        content_type=content_type,
        subject=subject,
    )
    header = MessageHeader()
    header.delivery_count = delivery_count
    message = uamqp.Message(
        body=body,
        properties=properties,
        application_properties=application_properties or None,
        header=header,
    )
    enqueued = enqueued_time or datetime.now(UTC)
    message.annotations = {
        b"x-opt-enqueued-time": int(enqueued.timestamp() * 1000),
        b"x-opt-sequence-number": sequence_number,
        b"x-opt-locked-until": int((locked_until or enqueued).timestamp() * 1000),
    }
    encoded: bytes = message.encode_message()
    return encoded


def host_binding_bytes(lock_token: uuid.UUID, amqp_message: bytes) -> bytes:
    return lock_token.bytes_le + LOCK_TOKEN_MARKER + amqp_message


def decode_host_binding(content: bytes) -> ServiceBusReceivedMessage:
    """What the worker does with the host's bytes before calling the function."""
    datum = Datum(value=ModelBindingData(content=content), type="model_binding_data")
    message: ServiceBusReceivedMessage = ServiceBusConverter.decode(
        datum, trigger_metadata=None, pytype=ServiceBusReceivedMessage
    )
    return message
