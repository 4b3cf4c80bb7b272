"""The one reading of a Service Bus message body (and of its text properties), for the consumer
(``to_incoming``) and an operator's dead-letter tool: the bytes a message is parsed from, and
whether the body
could be read as bytes at all. Never raises: a body nobody can read is described, not fatal.

An AMQP message carries its body in one of three sections (AMQP 1.0 core, messaging 3.2.5-3.2.7;
``azure.servicebus.amqp.AmqpMessageBodyType``):

- **data**: one or more binary sections; ``ServiceBusReceivedMessage.body`` yields them one by
  one (azure/servicebus/amqp/_amqp_message.py:253). What every Azure SDK sends by default;
- **value**: one AMQP value. A JMS ``TextMessage`` is an ``amqp-value`` holding a UTF-8 string,
  a ``MapMessage`` one holding a map (Red Hat AMQ JMS, "Interoperability",
  https://docs.redhat.com/ja/documentation/red_hat_amq/2021.q3/html/using_the_amq_jms_client/interoperability).
  Both decoders the app meets surface an AMQP string as ``bytes``: pyamqp decodes the str8/str32
  constructors 0xa1/0xb1 with its binary decoder (azure/servicebus/_pyamqp/_decode.py:587,590),
  and the Functions extension's, ``uamqp.Message().decode_from_bytes``
  (azurefunctions/extensions/bindings/servicebus/utils.py:28), does the same;
- **sequence**: one or more lists of values (a JMS ``StreamMessage``).

A data body, or a value that is a string or binary, is read as those bytes (an order may arrive
as a JMS ``TextMessage``). Anything else (a map, a number, a sequence) cannot hold an order
document: its ``content`` is a bounded ``repr`` (so the consumer rejects it as ``InvalidPayload``,
not JSON, and the tool can show it) and ``problem`` says what it is.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# A repr of an unreadable body is for a human and a dead-letter description: bounded.
MAX_REPR_CHARS = 4096


class BodyKind(enum.StrEnum):
    """The AMQP body section, by ``azure.servicebus.amqp.AmqpMessageBodyType``'s values."""

    DATA = "data"
    VALUE = "value"
    SEQUENCE = "sequence"


@dataclass(frozen=True, slots=True)
class MessageBody:
    kind: BodyKind
    content: bytes  # what an order is parsed from; a bounded repr when not ``readable``
    readable: bool  # the body is bytes (data sections, or a string or binary value)
    problem: str | None = None  # why it is not readable, for a human


def read_body(body: Any, body_type: Any = None) -> MessageBody:
    """``ServiceBusReceivedMessage.body`` and ``.body_type`` -> ``MessageBody``. Without a
    ``body_type`` (a double of the message), the kind is told from the body itself."""
    kind = _kind(body_type, body)
    if kind is BodyKind.SEQUENCE:
        sections = list(body) if isinstance(body, Iterable) else [body]
        return _unreadable(kind, sections, "an AMQP sequence body (a JMS StreamMessage)")
    if kind is BodyKind.VALUE:
        if isinstance(body, _BINARY):
            return MessageBody(kind, bytes(body), readable=True)
        if isinstance(body, str):
            return MessageBody(kind, body.encode("utf-8"), readable=True)
        what = "null" if body is None else type(body).__name__
        return _unreadable(kind, body, f"an AMQP value body holding a {what}, not text")
    return _data(body)


def _kind(body_type: Any, body: Any) -> BodyKind:
    if body_type is not None:
        try:
            return _KIND_BY_BODY_TYPE[body_type]
        except (KeyError, TypeError):  # not read yet, or not hashable
            pass
        try:
            kind = BodyKind(str(getattr(body_type, "value", body_type)).lower())
        except ValueError:
            pass
        else:
            if len(_KIND_BY_BODY_TYPE) < _KNOWN_BODY_TYPES_MAX:
                with contextlib.suppress(TypeError):
                    _KIND_BY_BODY_TYPE[body_type] = kind
            return kind
    if isinstance(body, _BINARY_OR_TEXT):
        return BodyKind.VALUE if isinstance(body, str) else BodyKind.DATA
    return BodyKind.DATA


# A body type (``AmqpMessageBodyType``'s three members) read once per process, not per message;
# bounded, whatever a caller passes.
_KIND_BY_BODY_TYPE: dict[Any, BodyKind] = {}
_KNOWN_BODY_TYPES_MAX = 8
_BINARY = (bytes, bytearray, memoryview)
_BINARY_OR_TEXT = (*_BINARY, str)


def _data(body: Any) -> MessageBody:
    if isinstance(body, _BINARY):
        return MessageBody(BodyKind.DATA, bytes(body), readable=True)
    if isinstance(body, str):
        return MessageBody(BodyKind.DATA, body.encode("utf-8"), readable=True)
    sections = list(body) if isinstance(body, Iterable) else [body]
    if len(sections) == 1 and type(sections[0]) is bytes:
        return MessageBody(BodyKind.DATA, sections[0], readable=True)  # the usual: one section
    if all(isinstance(section, _BINARY) for section in sections):
        return MessageBody(BodyKind.DATA, b"".join(bytes(s) for s in sections), readable=True)
    return _unreadable(BodyKind.DATA, sections, "data sections that are not binary")


def _unreadable(kind: BodyKind, body: Any, problem: str) -> MessageBody:
    text = repr(body)
    if len(text) > MAX_REPR_CHARS:
        text = text[: MAX_REPR_CHARS - 1] + "…"
    return MessageBody(kind, text.encode("utf-8", "replace"), readable=False, problem=problem)


def property_text(value: Any) -> str | None:
    """A message property or application-property key as text: AMQP strings arrive as ``bytes``
    from both decoders (as a value body's do, above); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
