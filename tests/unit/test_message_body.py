"""The one body reading (``shared.message_body``) on real ``ServiceBusReceivedMessage`` objects,
decoded both ways the app meets them: by the Functions extension (uamqp, the consumer's path) and
by pyamqp (``ServiceBusReceivedMessage.from_bytes``, the decoder a receiver link uses: the
dead-letter tool's path)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import uamqp
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import Message, Properties
from idempotent_consumer.servicebus import BodyKind, read_body, to_incoming
from uamqp.message import MessageProperties

from local.standins.host_binding import decode_host_binding, host_binding_bytes

ORDER = b'{"orderId": "ord-1"}'


def from_extension(body: Any, body_type: Any) -> ServiceBusReceivedMessage:
    """What the worker hands the consumer: the extension decodes the host's AMQP bytes."""
    message = uamqp.Message(
        body=body, properties=MessageProperties(message_id="ord-1"), body_type=body_type
    )
    return decode_host_binding(host_binding_bytes(uuid.uuid4(), message.encode_message()))


def from_link(**section: Any) -> ServiceBusReceivedMessage:
    """What a receiver link yields: pyamqp's decoder over the encoded message."""
    encoded = bytearray()
    encode_payload(encoded, Message(properties=Properties(message_id="ord-1"), **section))
    return ServiceBusReceivedMessage.from_bytes(bytes(encoded))


def test_a_jms_text_message_reaches_the_consumer_as_its_text() -> None:
    """A string value body (a JMS TextMessage) is an order like any other: the extension
    surfaces the AMQP string as bytes, and the consumer reads them."""
    received = from_extension(ORDER.decode(), uamqp.MessageBodyType.Value)

    assert to_incoming(received).body == ORDER
    assert read_body(received.body, received.body_type) == (
        read_body(ORDER, BodyKind.VALUE)  # same reading, kind value, readable
    )


def test_a_map_value_reaches_the_consumer_as_an_unreadable_repr() -> None:
    received = from_extension({"orderId": "ord-1"}, uamqp.MessageBodyType.Value)

    body = read_body(received.body, received.body_type)

    assert (body.kind, body.readable) == (BodyKind.VALUE, False)
    assert body.problem == "an AMQP value body holding a dict, not text"
    assert to_incoming(received).body == body.content  # parse_order rejects it: not JSON
    assert b"orderId" in body.content


def test_data_sections_are_joined() -> None:
    received = from_link(data=[b'{"orderId": ', b'"ord-1"}'])

    body = read_body(received.body, received.body_type)

    assert body == read_body(ORDER)
    assert (body.kind, body.readable) == (BodyKind.DATA, True)


@pytest.mark.parametrize("value", ["{}", b"{}"])
def test_a_string_or_binary_value_from_a_link_is_read_as_bytes(value: str | bytes) -> None:
    received = from_link(value=value)

    assert received.body == b"{}"  # pyamqp decodes an AMQP string as bytes
    assert read_body(received.body, received.body_type).content == b"{}"


def test_a_sequence_body_is_described_not_raised() -> None:
    received = from_link(sequence=[[1, "a"], ["b"]])

    body = read_body(received.body, received.body_type)

    assert (body.kind, body.readable) == (BodyKind.SEQUENCE, False)
    assert body.problem == "an AMQP sequence body (a JMS StreamMessage)"
    assert body.content == b"[[1, b'a'], [b'b']]"


def test_an_unreadable_body_is_bounded() -> None:
    body = read_body({"x": "y" * 10_000}, BodyKind.VALUE)

    assert len(body.content.decode()) == 4096
    assert not body.readable
