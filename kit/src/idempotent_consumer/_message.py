"""Reading a message against a consumer's contract: the checks every JSON message shares, the
canonical fingerprint, and a valid message a consumer can return from its ``parse`` without a
class of its own.

A body that fails its schema is described by ``schema_violations``: field paths and pydantic's
messages, never a value of the message (a customer id, an address: a dead-letter description is
kept by Service Bus and read by operators, and reaches the logs and the span).

The checks, in the order a reader meets them, each with a reason of the kit's bounded set: a
MessageId (``MissingMessageId``), the size (``PayloadTooLarge``), UTF-8 JSON (``InvalidPayload``),
an object (``InvalidPayload``). The Subject names the type; a consumer dead-letters a type it
does not read as ``UnsupportedMessageType``.

The fingerprint (``HASH_ALGORITHM``) is SHA-256 of the UTF-8 bytes of ``json.dumps({"messageType":
<type>, **fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``: fields are the
validated values (key order, whitespace and unknown fields do not change it), and the type is
part of it, so the same MessageId sent as another type is a mismatch. Stored fingerprints are
compared for as long as markers live: never change the definition, add an algorithm instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from idempotent_consumer._decision import IncomingMessage
from idempotent_consumer._errors import InvalidMessage, bound

HASH_ALGORITHM = "sha256/canonical-v1"
MAX_BODY_BYTES = 256 * 1024  # Service Bus Standard's largest message


class KitReason:
    """The dead-letter reasons of the kit's own checks (a consumer adds its own)."""

    MISSING_MESSAGE_ID = "MissingMessageId"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    INVALID_PAYLOAD = "InvalidPayload"
    UNSUPPORTED_MESSAGE_TYPE = "UnsupportedMessageType"


def read_json_object(
    body: bytes, message_id: str | None, max_bytes: int = MAX_BODY_BYTES
) -> tuple[str, dict[str, Any]]:
    """The MessageId and the body's JSON object, or ``InvalidMessage`` (module docstring)."""
    if not message_id:
        raise InvalidMessage(KitReason.MISSING_MESSAGE_ID, "the message has no MessageId")
    if len(body) > max_bytes:
        raise InvalidMessage(
            KitReason.PAYLOAD_TOO_LARGE,
            f"the body is {len(body)} bytes; the limit is {max_bytes}",
        )
    try:
        document = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as error:
        # pydantic-core rejects invalid UTF-8 here too; say which, briefly.
        problem = "not UTF-8" if _is_not_utf8(body) else f"not JSON ({error})"
        raise InvalidMessage(KitReason.INVALID_PAYLOAD, f"the body is {problem}") from None
    if not isinstance(document, dict):
        raise InvalidMessage(
            KitReason.INVALID_PAYLOAD,
            f"the body must be a JSON object, not {type(document).__name__}",
        )
    return message_id, document


def fingerprint(message_type: str, fields: Mapping[str, Any]) -> str:
    """The canonical fingerprint of a valid message's fields (module docstring)."""
    canonical = {"messageType": message_type, **fields}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ValidEvent:
    """A message that passed its consumer's contract: what the kit keys, versions and
    fingerprints (``request_hash``, computed from ``fields``)."""

    message_id: str
    message_type: str
    order_id: str  # what the message is about (an order, for every consumer of this app)
    version: int  # its version of that order (1 when the contract has none)
    fields: Mapping[str, Any]  # the validated values the effect uses, and the fingerprint covers
    hash_algorithm: str = HASH_ALGORITHM
    request_hash: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "request_hash", fingerprint(self.message_type, self.fields))


def read_event[E: Mapping[str, object]](
    message: IncomingMessage, schema: TypeAdapter[E], reads: Sequence[str]
) -> tuple[str, str, E]:
    """An event whose type is its Subject, one of ``reads``, and its body's ``eventType``: the
    MessageId, the type and the body validated strictly against ``schema``, or
    ``InvalidMessage`` (``UnsupportedMessageType``, the body's checks, ``InvalidPayload``)."""
    event_type = message.subject
    if event_type is None or event_type not in reads:
        raise unsupported_type(reads=", ".join(reads))
    message_id, body = read_json_object(message.body, message.message_id)
    try:
        event = schema.validate_python(body, strict=True)
    except ValidationError as error:
        raise InvalidMessage(KitReason.INVALID_PAYLOAD, schema_violations(error)) from None
    body_type = event.get("eventType")
    if body_type != event_type:
        # Named only when it is a type the consumer reads: any other text is the sender's.
        named = f" ({body_type})" if body_type in reads else ""
        raise InvalidMessage(
            KitReason.INVALID_PAYLOAD, f"eventType{named} is not the Subject {event_type!r}"
        )
    return message_id, event_type, event


def schema_violations(error: ValidationError) -> str:
    """A short, bounded description of schema violations: field paths and messages, no input
    (the one way every consumer describes them: module docstring)."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}"
        for item in error.errors(include_url=False, include_input=False)[:5]
    ]
    more = error.error_count() - len(problems)
    return bound("; ".join(problems) + (f"; and {more} more" if more > 0 else ""))


def unsupported_type(reads: str) -> InvalidMessage:
    """The refusal of a message type the consumer does not read (``reads``: what it reads). The
    Subject is the sender's text: it stays out of the description (the dead letter keeps it,
    ``python -m ops show`` prints it as text)."""
    return InvalidMessage(
        KitReason.UNSUPPORTED_MESSAGE_TYPE, f"the Subject is not a type it reads ({reads})"
    )


def _is_not_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
