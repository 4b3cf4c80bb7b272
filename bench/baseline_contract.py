"""The OrderPlaced contract as it was before the CPU work (BaseModel validation, ``model_dump``,
``json.dumps`` fingerprint), kept only so ``bench.optimisations`` can measure what the change was
worth and check that it gives the same results. Not product code."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
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

from shared.contract import (
    CONTRACT_FIELDS,
    MAX_BODY_BYTES,
    SCHEMA_VERSION,
    DeadletterReason,
    InvalidMessage,
    ValidOrder,
    bound,
    describe,
)

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
        problem = f"not JSON ({error})"
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
    return ValidOrder(fields=fields, request_hash=fingerprint_v1(fields))
