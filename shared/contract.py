"""The OrderPlaced contract (schemaVersion 1): validation and the canonical request fingerprint.

Decisions a reader may want to know:
- One JSON parse (pydantic-core's Rust parser, NaN/Infinity rejected), then one pydantic validation
  in strict mode: ``"2"`` is not an integer and ``1.0`` is not a quantity.
- Unknown fields are ignored (tolerant reader): not stored, not hashed.
- Duplicate JSON keys: the last one wins, as in every mainstream parser; the fingerprint is computed
  from the validated values, so the same bytes always give the same verdict.
- ``placedAt`` must be RFC 3339 with an offset. It is stored and hashed in UTC with the fraction
  kept as written (up to 9 digits, trailing zeros dropped): .NET's round-trip format has 7 digits,
  and truncating to microseconds would make two different instants hash equal.
- Strings are compared as written (no Unicode normalisation): NFC and NFD forms of a customer id
  are different requests.
- Line order is part of the order and so of the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

SCHEMA_VERSION = 1
MAX_BODY_BYTES = 256 * 1024
MAX_DESCRIPTION_CHARS = 1024
HASH_ALGORITHM = "sha256/canonical-v1"

# The fields that make up an order's identity-relevant content, in canonical order.
CONTRACT_FIELDS = ("schemaVersion", "orderId", "customerId", "currency", "placedAt", "lines")


class DeadletterReason:
    """The bounded set of reasons this consumer dead-letters with (Service Bus DeadLetterReason)."""

    MISSING_MESSAGE_ID = "MissingMessageId"
    MESSAGE_ID_MISMATCH = "MessageIdMismatch"
    INVALID_PAYLOAD = "InvalidPayload"
    UNSUPPORTED_SCHEMA_VERSION = "UnsupportedSchemaVersion"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    HASH_MISMATCH = "HashMismatch"


class InvalidMessage(Exception):
    """The message itself is wrong: no redelivery can fix it, so it is dead-lettered."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = bound(description)


def bound(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """Cut text to ``limit`` characters; dead-letter descriptions and logs stay bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)

Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class OrderLine(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    sku: Sku
    quantity: Annotated[int, Field(ge=1, le=10_000)]
    unitPriceMinor: Annotated[int, Field(ge=0, le=1_000_000_000)]  # noqa: N815 (wire name)


class OrderPlaced(BaseModel):
    """The validated body. Field names are the wire names so the model round-trips unchanged."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    schemaVersion: int  # noqa: N815
    orderId: Annotated[  # noqa: N815
        str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    ]
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]  # noqa: N815
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    placedAt: str  # noqa: N815  (normalised to UTC by the validator below)
    lines: Annotated[list[OrderLine], Field(min_length=1, max_length=100)]

    @field_validator("placedAt")
    @classmethod
    def _normalise_placed_at(cls, value: str) -> str:
        return normalise_timestamp(value)

    @property
    def total_minor(self) -> int:
        return sum(line.quantity * line.unitPriceMinor for line in self.lines)

    def canonical_fields(self) -> dict[str, Any]:
        return self.model_dump(include=set(CONTRACT_FIELDS))


def normalise_timestamp(value: str) -> str:
    """RFC 3339 with offset -> ``YYYY-MM-DDTHH:MM:SS[.fraction]Z`` in UTC."""
    match = _RFC3339.match(value)
    if match is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2026-01-31T12:00:00Z")
    date_part, time_part, fraction, offset = match.groups()
    try:
        moment = datetime.fromisoformat(f"{date_part}T{time_part}")
    except ValueError as error:
        raise ValueError(f"is not a valid date-time: {error}") from None
    if offset not in ("Z", "z"):
        sign = 1 if offset[0] == "+" else -1
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError("has an out-of-range offset")
        moment -= sign * timedelta(hours=hours, minutes=minutes)
    if not datetime.min + timedelta(days=1) < moment < datetime.max - timedelta(days=1):
        raise ValueError("is out of range")
    digits = (fraction or "").rstrip("0")
    return moment.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S") + (
        f".{digits}Z" if digits else "Z"
    )


def fingerprint_v1(fields: Mapping[str, Any]) -> str:
    """SHA-256 over compact, key-sorted JSON of the validated contract fields."""
    canonical = json.dumps(
        {name: fields[name] for name in CONTRACT_FIELDS},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# Every algorithm a stored document may name. A new algorithm is added here, never replaced:
# documents written by older code must still be comparable, or duplicates turn into mismatches.
FINGERPRINT_ALGORITHMS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    HASH_ALGORITHM: fingerprint_v1,
}


@dataclass(frozen=True, slots=True)
class ValidOrder:
    """An order that passed the contract, with its fingerprint under the current algorithm."""

    order: OrderPlaced
    fields: dict[str, Any]
    request_hash: str
    hash_algorithm: str = HASH_ALGORITHM

    @property
    def order_id(self) -> str:
        return self.order.orderId


def parse_order(body: bytes, message_id: str | None) -> ValidOrder:
    """Validate a message body against the contract, or raise ``InvalidMessage``."""
    if not message_id:
        raise InvalidMessage(DeadletterReason.MISSING_MESSAGE_ID, "the message has no MessageId")
    if len(body) > MAX_BODY_BYTES:
        raise InvalidMessage(
            DeadletterReason.PAYLOAD_TOO_LARGE,
            f"the body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}",
        )
    try:
        document = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as error:
        # pydantic-core rejects invalid UTF-8 here too; say which, briefly.
        problem = "not UTF-8" if _is_not_utf8(body) else f"not JSON ({error})"
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, f"the body is {problem}") from None
    if not isinstance(document, dict):
        raise InvalidMessage(
            DeadletterReason.INVALID_PAYLOAD,
            f"the body must be a JSON object, not {type(document).__name__}",
        )
    version = document.get("schemaVersion")
    if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
        raise InvalidMessage(
            DeadletterReason.UNSUPPORTED_SCHEMA_VERSION,
            f"schemaVersion {bound(str(version), 40)} is not supported; this consumer reads "
            f"{SCHEMA_VERSION}",
        )
    try:
        order = OrderPlaced.model_validate(document)
    except ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, describe(error)) from None
    if order.orderId != message_id:
        raise InvalidMessage(
            DeadletterReason.MESSAGE_ID_MISMATCH,
            f"MessageId {bound(message_id, 80)!r} differs from orderId {order.orderId!r}",
        )
    fields = order.canonical_fields()
    return ValidOrder(order=order, fields=fields, request_hash=fingerprint_v1(fields))


def describe(error: ValidationError) -> str:
    """A short, bounded description of schema violations: field paths and messages, no input."""
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}"
        for item in error.errors(include_url=False, include_input=False)[:5]
    ]
    more = error.error_count() - len(problems)
    return bound("; ".join(problems) + (f"; and {more} more" if more > 0 else ""))


def _is_not_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
