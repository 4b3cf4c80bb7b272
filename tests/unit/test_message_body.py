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
from azure.servicebus._pyamqp.message import Header, Message, Properties
from hypothesis import given, settings
from hypothesis import strategies as st
from idempotent_consumer import IncomingMessage
from idempotent_consumer.servicebus import BodyKind, property_text, read_body, to_incoming
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


# ---- to_incoming reads the AMQP sections once, as the SDK's getters would -------------------

_ID = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.binary(max_size=12),  # an id that is not UTF-8: the SDK hands back the bytes
    st.uuids(),  # AMQP allows a uuid message-id
)
_PROPERTY_VALUES = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.one_of(st.text(max_size=8), st.integers(-(2**31), 2**31 - 1), st.booleans()),
    max_size=3,
)


def _through_the_sdks_getters(message: ServiceBusReceivedMessage) -> IncomingMessage:
    """What ``to_incoming`` reads, through the SDK message's own property getters."""
    return IncomingMessage(
        message_id=property_text(message.message_id),
        body=read_body(message.body, message.body_type).content,
        correlation_id=property_text(message.correlation_id),
        delivery_count=message.delivery_count,
        application_properties={
            property_text(k) or "": property_text(v) if isinstance(v, bytes) else v
            for k, v in (message.application_properties or {}).items()
        },
        locked_until=message.locked_until_utc,
        subject=property_text(message.subject),
    )


@settings(max_examples=150, deadline=None)
@given(
    message_id=_ID,
    correlation_id=_ID,
    subject=st.one_of(st.none(), st.text(max_size=20)),
    application_properties=_PROPERTY_VALUES,
    sections=st.lists(st.binary(max_size=16), min_size=1, max_size=3),
    delivery_count=st.integers(0, 20),
    decoder=st.sampled_from(["extension", "link"]),
)
def test_to_incoming_reads_what_the_sdks_getters_read(
    message_id: Any,
    correlation_id: Any,
    subject: str | None,
    application_properties: dict[str | bytes, Any],
    sections: list[bytes],
    delivery_count: int,
    decoder: str,
) -> None:
    """``to_incoming`` reads the message's AMQP sections once (the SDK's getters test a
    section's truth on every read); it must read exactly what the getters return, on both
    decoders the app meets, whatever the ids' AMQP types."""
    if decoder == "extension":
        amqp = uamqp.Message(
            body=sections,
            properties=MessageProperties(
                message_id=message_id, correlation_id=correlation_id, subject=subject
            ),
            application_properties=application_properties or None,
            header=uamqp.message.MessageHeader(),
        )
        amqp.header.delivery_count = delivery_count
        received = decode_host_binding(host_binding_bytes(uuid.uuid4(), amqp.encode_message()))
    else:
        encoded = bytearray()
        properties = Properties(
            message_id=message_id, correlation_id=correlation_id, subject=subject
        )
        encode_payload(
            encoded,
            Message(
                header=Header(delivery_count=delivery_count),
                properties=properties,
                application_properties=dict(application_properties) or None,
                data=b"".join(sections),  # pyamqp's encoder writes one data section
            ),
        )
        received = ServiceBusReceivedMessage.from_bytes(bytes(encoded))

    assert to_incoming(received) == _through_the_sdks_getters(received)


def test_a_message_without_properties_or_header_reads_as_none() -> None:
    """No properties section, no header: the SDK's getters give ``None``, and so does
    ``to_incoming``."""
    encoded = bytearray()
    encode_payload(encoded, Message(data=ORDER))
    received = ServiceBusReceivedMessage.from_bytes(bytes(encoded))

    incoming = to_incoming(received)

    assert (incoming.message_id, incoming.correlation_id, incoming.subject) == (None, None, None)
    assert incoming.delivery_count is None
    assert incoming == _through_the_sdks_getters(received)
