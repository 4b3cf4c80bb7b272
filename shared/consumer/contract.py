"""The OrderPlaced contract (schemaVersion 1): validation and the canonical request fingerprint.

Decisions a reader may want to know:
- One JSON parse (pydantic-core's Rust parser, NaN/Infinity rejected), then one pydantic validation
  in strict mode: ``"2"`` is not an integer and ``1.0`` is not a quantity. Validation yields plain
  dicts (TypedDicts through one ``TypeAdapter`` each): what is stored and hashed, with no model
  objects built and dumped again.
- Only OrderPlaced's schema is built at import: every new order needs it, and building it on the
  first message would move its cost onto that message. The lifecycle changes' and the outbox
  events' schemas are built on their first use (pydantic's ``defer_build``): a cold start that
  meets only new orders, or only the relay, never pays for the others (docs/benchmarks.md,
  target 4).
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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, NotRequired

import pydantic_core
from idempotent_consumer import HASH_MISMATCH as KIT_HASH_MISMATCH
from idempotent_consumer import (
    MAX_BODY_BYTES,
    InvalidMessage,
    KitReason,
    bound,
    fingerprint,
    read_json_object,
    schema_violations,
    unsupported_type,
)
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict

SCHEMA_VERSION = 1
HASH_ALGORITHM = "sha256/canonical-v1"

# The fields that make up an order's identity-relevant content, in canonical order.
CONTRACT_FIELDS = ("schemaVersion", "orderId", "customerId", "currency", "placedAt", "lines")


class DeadletterReason:
    """The bounded set of reasons this consumer dead-letters with (Service Bus DeadLetterReason)."""

    UNSUPPORTED_MESSAGE_TYPE = KitReason.UNSUPPORTED_MESSAGE_TYPE
    INVALID_TRANSITION = "InvalidTransition"
    MISSING_MESSAGE_ID = KitReason.MISSING_MESSAGE_ID
    MESSAGE_ID_MISMATCH = "MessageIdMismatch"
    INVALID_PAYLOAD = KitReason.INVALID_PAYLOAD
    UNSUPPORTED_SCHEMA_VERSION = "UnsupportedSchemaVersion"
    PAYLOAD_TOO_LARGE = KitReason.PAYLOAD_TOO_LARGE
    HASH_MISMATCH = KIT_HASH_MISMATCH  # the kit's own: the same MessageId, other content


_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)

Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]


_EARLIEST = datetime.min + timedelta(days=1)
_LATEST = datetime.max - timedelta(days=1)


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
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError("has an out-of-range offset")
        seconds = hours * 3600 + minutes * 60
        try:
            # timedelta(days, seconds), positional: a third of the keyword form's cost.
            moment -= timedelta(0, seconds if offset[0] == "+" else -seconds)
        except OverflowError:  # 0001-01-01T00:00:00+01:00 is before the first representable day
            raise ValueError("is out of range") from None
    if not _EARLIEST < moment < _LATEST:
        raise ValueError("is out of range")
    digits = (fraction or "").rstrip("0")
    text = moment.isoformat()  # whole seconds: YYYY-MM-DDTHH:MM:SS, year always four digits
    return f"{text}.{digits}Z" if digits else f"{text}Z"


# The validated shapes are TypedDicts, not models: validation returns the plain dicts that are
# stored and hashed. The validated dict has the fields in declaration order (CONTRACT_FIELDS), not
# the input's order; unknown fields are dropped.
OrderId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]


@with_config(ConfigDict(strict=True, extra="ignore"))
class OrderLine(TypedDict):
    # Declared in sorted order: a validated line's keys come out in the fingerprint's canonical
    # order, so the fingerprint serialises the lines as they are, without a sorted copy of each.
    quantity: Annotated[int, Field(ge=1, le=10_000)]
    sku: Sku
    unitPriceMinor: Annotated[int, Field(ge=0, le=1_000_000_000)]


OrderLines = Annotated[list[OrderLine], Field(min_length=1, max_length=100)]


@with_config(ConfigDict(strict=True, extra="ignore"))
class OrderPlaced(TypedDict):
    """The validated body. Field names are the wire names so the fields round-trip unchanged."""

    schemaVersion: int
    orderId: OrderId
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    placedAt: Annotated[str, AfterValidator(normalise_timestamp)]
    lines: OrderLines


# Compiled once, at import: the first new order must not pay for it (module docstring).
_ORDER_PLACED: TypeAdapter[OrderPlaced] = TypeAdapter(OrderPlaced)
_VALIDATE = _ORDER_PLACED.validator.validate_python  # returns a new plain dict
_SORTED_CONTRACT_FIELDS = tuple(sorted(CONTRACT_FIELDS))


def fingerprint_v1(fields: Mapping[str, Any]) -> str:
    """SHA-256 over compact, key-sorted JSON of the validated contract fields.

    The canonical bytes are exactly those of ``json.dumps({name: fields[name] for name in
    CONTRACT_FIELDS}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` in UTF-8, and
    must stay so (stored hashes are compared forever). They are serialised by pydantic-core from
    dicts built with their keys already in sorted order, which yields the same bytes for every
    value validation can produce: strings (never a lone surrogate: the JSON parser rejects them;
    only ``"``, backslash and control characters below U+0020 are escaped, the same way) and
    integers. ``tests/unit/test_contract.py`` checks this against ``json.dumps`` with hypothesis.
    """
    canonical = {name: fields[name] for name in _SORTED_CONTRACT_FIELDS}
    canonical["lines"] = [_sorted_line(line) for line in fields["lines"]]
    return hashlib.sha256(pydantic_core.to_json(canonical)).hexdigest()


def _sorted_line(line: Mapping[str, Any]) -> dict[str, Any]:
    if len(line) == 3:  # a validated line: exactly these keys, written in sorted order
        try:
            return {
                "quantity": line["quantity"],
                "sku": line["sku"],
                "unitPriceMinor": line["unitPriceMinor"],
            }
        except KeyError:
            pass
    return {key: line[key] for key in sorted(line)}


# Every algorithm a stored document may name. A new algorithm is added here, never replaced:
# documents written by older code must still be comparable, or duplicates turn into mismatches.
FINGERPRINT_ALGORITHMS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    HASH_ALGORITHM: fingerprint_v1,
}


def total_minor(lines: Sequence[Mapping[str, Any]]) -> int:
    """An order's total in minor units: the sum of quantity x unitPriceMinor over its lines."""
    return sum(line["quantity"] * line["unitPriceMinor"] for line in lines)


@dataclass(frozen=True, slots=True)
class ValidMessage:
    """A message that passed its contract, with its fingerprint under the current algorithm."""

    fields: dict[str, Any]
    request_hash: str
    hash_algorithm: str = HASH_ALGORITHM

    @property
    def order_id(self) -> str:
        return str(self.fields["orderId"])


@dataclass(frozen=True, slots=True)
class ValidOrder(ValidMessage):
    """A valid OrderPlaced: the order's first version; its MessageId is its orderId. Its total
    is computed once, when it is parsed: the order and its event both carry it."""

    total_minor: int = field(kw_only=True)

    @property
    def message_type(self) -> str:
        return ORDER_PLACED

    @property
    def message_id(self) -> str:
        return self.order_id  # the contract checked that an OrderPlaced's MessageId is its id

    @property
    def version(self) -> int:
        return 1  # an OrderPlaced is always the order's first version


def parse_order(body: bytes, message_id: str | None) -> ValidOrder:
    """Validate an OrderPlaced body against the contract, or raise ``InvalidMessage``.

    ``orderVersion`` may be given and must then be exactly 1 (an OrderPlaced is the order's
    first version); it is neither stored among the fields nor hashed, so a body with it and one
    without it are the same request."""
    message_id, document = _read_object(body, message_id)
    if "orderVersion" in document and not _is_exact_int(document["orderVersion"], 1):
        raise InvalidMessage(
            DeadletterReason.INVALID_PAYLOAD,
            "orderVersion: an OrderPlaced is version 1, not "
            f"{bound(repr(document['orderVersion']), 40)}",
        )
    try:
        fields: dict[str, Any] = _VALIDATE(document)
    except ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, schema_violations(error)) from None
    problem = message_id_problem(ORDER_PLACED, message_id, fields["orderId"])
    if problem is not None:
        raise InvalidMessage(DeadletterReason.MESSAGE_ID_MISMATCH, problem)
    return ValidOrder(
        fields=fields,
        request_hash=_validated_fingerprint(fields),
        total_minor=total_minor(fields["lines"]),
    )


def _validated_fingerprint(fields: dict[str, Any]) -> str:
    """``fingerprint_v1`` of the fields as ``_VALIDATE`` returns them: every contract field, and
    each line exactly its three keys, already in sorted order (``OrderLine``), so the lines are
    serialised as they are; no copy of each line, as ``fingerprint_v1`` must make of a line it
    did not validate. Every new order pays for it. ``tests/unit/test_contract.py`` holds the
    parsed orders' hashes to the ``json.dumps`` definition with hypothesis."""
    canonical = {
        "currency": fields["currency"],
        "customerId": fields["customerId"],
        "lines": fields["lines"],
        "orderId": fields["orderId"],
        "placedAt": fields["placedAt"],
        "schemaVersion": fields["schemaVersion"],
    }
    return hashlib.sha256(pydantic_core.to_json(canonical)).hexdigest()


def _read_object(body: bytes, message_id: str | None) -> tuple[str, dict[str, Any]]:
    """The checks every message type shares, in the order a reader meets them: the kit's (a
    MessageId, the size, a JSON object: ``shared.kit.message``), then a ``schemaVersion`` this
    consumer reads. Returns the MessageId and the parsed object."""
    message_id, document = read_json_object(body, message_id, MAX_BODY_BYTES)
    version = document.get("schemaVersion")
    if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
        raise InvalidMessage(
            DeadletterReason.UNSUPPORTED_SCHEMA_VERSION,
            f"schemaVersion {bound(str(version), 40)} is not supported; this consumer reads "
            f"{SCHEMA_VERSION}",
        )
    return message_id, document


def _is_exact_int(value: Any, expected: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == expected


# ---------------------------------------------------------------------------------------------
# The lifecycle messages: OrderAmended and OrderCancelled, schemaVersion 1 (docs/events.md,
# "Messages the consumer reads"). The Service Bus Subject names the type; no Subject means
# OrderPlaced, so producers written before the lifecycle keep working.
#
# An amendment carries the order's whole new state (event-carried state transfer): applying it
# is a set, never an increment, so the highest version wins whatever the arrival order. Versions
# are the producer's: OrderPlaced is 1, each later change the next integer; a cancelled order
# changes no more.
# ---------------------------------------------------------------------------------------------

ORDER_PLACED = "OrderPlaced"
ORDER_AMENDED = "OrderAmended"
ORDER_CANCELLED = "OrderCancelled"
MAX_MESSAGE_ID_CHARS = 128  # Service Bus's own limit for a MessageId
MAX_ORDER_VERSION = 2**31 - 1
OrderVersion = Annotated[int, Field(ge=2, le=MAX_ORDER_VERSION)]
# The changes' schemas are built when the first change arrives (``defer_build``), not at import
# (module docstring).


@with_config(ConfigDict(strict=True, extra="ignore", defer_build=True))
class OrderAmended(TypedDict):
    schemaVersion: int
    orderId: OrderId
    orderVersion: OrderVersion
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    placedAt: Annotated[str, AfterValidator(normalise_timestamp)]
    lines: OrderLines
    amendedAt: Annotated[str, AfterValidator(normalise_timestamp)]


@with_config(ConfigDict(strict=True, extra="ignore", defer_build=True))
class OrderCancelled(TypedDict):
    schemaVersion: int
    orderId: OrderId
    orderVersion: OrderVersion
    cancelledAt: Annotated[str, AfterValidator(normalise_timestamp)]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=256)]


_CHANGE_SCHEMAS: dict[str, TypeAdapter[Any]] = {
    ORDER_AMENDED: TypeAdapter(OrderAmended),
    ORDER_CANCELLED: TypeAdapter(OrderCancelled),
}
# The fields each change's fingerprint covers, with the message type: the same MessageId sent
# as another type is another request (a mismatch), never a duplicate.
CHANGE_FIELDS: dict[str, tuple[str, ...]] = {
    ORDER_AMENDED: (
        "schemaVersion",
        "orderId",
        "orderVersion",
        "customerId",
        "currency",
        "placedAt",
        "lines",
        "amendedAt",
    ),
    ORDER_CANCELLED: ("schemaVersion", "orderId", "orderVersion", "cancelledAt", "reason"),
}


def fingerprint_change(message_type: str, fields: Mapping[str, Any]) -> str:
    """SHA-256 of the UTF-8 bytes of ``json.dumps({"messageType": message_type, **{name:
    fields[name] for name in CHANGE_FIELDS[message_type]}}, sort_keys=True, separators=(",",
    ":"), ensure_ascii=False)``: the same canonical form as ``fingerprint_v1`` (algorithm
    ``HASH_ALGORITHM``), over the change's own fields and its type."""
    return fingerprint(message_type, {name: fields[name] for name in CHANGE_FIELDS[message_type]})


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidChange(ValidMessage):
    """An OrderAmended or OrderCancelled that passed its contract, with its fingerprint."""

    message_type: str  # ORDER_AMENDED or ORDER_CANCELLED
    message_id: str

    @property
    def version(self) -> int:
        return int(self.fields["orderVersion"])

    @property
    def total_minor(self) -> int:
        """An amendment's total (a cancellation has no lines)."""
        return total_minor(self.fields["lines"])


def message_id_problem(
    message_type: str, message_id: str, order_id: object, order_version: object = None
) -> str | None:
    """Why this MessageId cannot carry a message of this type about ``order_id`` (the
    ``MessageIdMismatch`` description), or None: an OrderPlaced's MessageId is its orderId; a
    change's is its own, at most ``MAX_MESSAGE_ID_CHARS``. The one statement of the rule, for
    the consumer and for the operator tool, which reads it before resubmitting a dead letter."""
    if message_type == ORDER_PLACED:
        if order_id == message_id:
            return None
        return f"MessageId {bound(message_id, 80)!r} differs from orderId {order_id!r}"
    # With duplicate detection on, the queue would silently drop a change that reuses its
    # order's MessageId (the OrderPlaced's) inside the window: refuse it loudly instead.
    if len(message_id) > MAX_MESSAGE_ID_CHARS:
        problem = f"is longer than {MAX_MESSAGE_ID_CHARS} characters"
    elif message_id == order_id:
        example = f"{order_id}:v{order_version}" if order_version is not None else ""
        problem = f"equals the orderId; an {message_type} needs its own" + (
            f", e.g. '{example}'" if example else ""
        )
    else:
        return None
    return f"MessageId {bound(message_id, 80)!r} {problem}"


def lifecycle_message_id(order_id: str, version: int) -> str:
    """The MessageId of a change: ``{orderId}:v{orderVersion}`` (docs/events.md, "MessageId of
    a change"), what producers are advised to give one and what the public edge
    (``shared.edge``) gives each amendment and cancellation it sends. Never the orderId, at most
    ``MAX_MESSAGE_ID_CHARS`` for an orderId of the contract (64 + 11)."""
    return f"{order_id}:v{version}"


def parse_message(
    body: bytes, message_id: str | None, subject: str | None
) -> ValidOrder | ValidChange:
    """Validate a message of any type this consumer reads, chosen by its Subject, or raise
    ``InvalidMessage``: ``UnsupportedMessageType`` for another Subject, checked first (nothing
    of the body is read for a type this consumer does not know)."""
    message_type = subject or ORDER_PLACED
    if message_type == ORDER_PLACED:
        return parse_order(body, message_id)
    schema = _CHANGE_SCHEMAS.get(message_type)
    if schema is None:
        raise unsupported_type(reads=f"{ORDER_PLACED}, {ORDER_AMENDED}, {ORDER_CANCELLED}")
    message_id, document = _read_object(body, message_id)
    try:
        fields: dict[str, Any] = schema.validator.validate_python(document)
    except ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, schema_violations(error)) from None
    problem = message_id_problem(
        message_type, message_id, fields["orderId"], fields["orderVersion"]
    )
    if problem is not None:
        raise InvalidMessage(DeadletterReason.MESSAGE_ID_MISMATCH, problem)
    return ValidChange(
        message_type=message_type,
        message_id=message_id,
        fields=fields,
        request_hash=fingerprint_change(message_type, fields),
    )


# ---------------------------------------------------------------------------------------------
# The OrderAccepted event, schemaVersion 1: what the outbox relay publishes to the topic
# (docs/events.md is its description for downstream teams; change both together).
#
# Its body is built from the outbox document the consumer wrote with the order, validated here
# strictly: an outbox document that does not make a valid v1 event is not published half-formed,
# it is parked for an operator (shared/relay/core.py).
# ---------------------------------------------------------------------------------------------

ORDER_ACCEPTED_EVENT_TYPE = "OrderAccepted"
ORDER_ACCEPTED_SCHEMA_VERSION = 1
EVENT_CONTENT_TYPE = "application/json"


EventSchemaVersion = Literal[1]
TotalMinor = Annotated[int, Field(ge=0)]
LineCount = Annotated[int, Field(ge=1, le=100)]
_EventId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$")]
_Timestamp = Annotated[str, AfterValidator(normalise_timestamp)]
# The events' schemas are built when the relay first publishes (``defer_build``), not at import
# (module docstring); their payloads are built with them.


@with_config(ConfigDict(strict=True, extra="forbid"))
class OrderAcceptedPayload(TypedDict):
    orderId: OrderId
    # Added with the order lifecycle: always 1. Outbox documents written before it lack it; the
    # relay publishes them with it (``shared.relay.core.build_event``).
    orderVersion: NotRequired[Literal[1]]
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    totalMinor: TotalMinor
    placedAt: str
    lineCount: LineCount
    # Added for downstream consumers that act per line (stock, analytics): the order's lines.
    # Events of orders accepted before it lack it.
    lines: NotRequired[OrderLines]


@with_config(ConfigDict(strict=True, extra="forbid", defer_build=True))
class OrderAcceptedV1(TypedDict):
    """The event body. ``eventId`` is also the Service Bus MessageId; ``occurredAt`` is when the
    order was accepted (the outbox document's ``createdAt``), UTC, RFC 3339."""

    schemaVersion: EventSchemaVersion
    eventId: _EventId
    eventType: Literal["OrderAccepted"]
    occurredAt: _Timestamp
    payload: OrderAcceptedPayload


@with_config(ConfigDict(strict=True, extra="forbid"))
class OrderAmendedPayload(TypedDict):
    """The order's whole new state at ``orderVersion`` (event-carried state transfer)."""

    orderId: OrderId
    orderVersion: OrderVersion
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    totalMinor: TotalMinor
    placedAt: str
    amendedAt: str
    lineCount: LineCount
    lines: OrderLines


@with_config(ConfigDict(strict=True, extra="forbid", defer_build=True))
class OrderAmendedV1(TypedDict):
    schemaVersion: EventSchemaVersion
    eventId: _EventId
    eventType: Literal["OrderAmended"]
    occurredAt: _Timestamp
    payload: OrderAmendedPayload


@with_config(ConfigDict(strict=True, extra="forbid"))
class OrderCancelledPayload(TypedDict):
    orderId: OrderId
    orderVersion: OrderVersion
    cancelledAt: str
    reason: Annotated[str, StringConstraints(min_length=1, max_length=256)]


@with_config(ConfigDict(strict=True, extra="forbid", defer_build=True))
class OrderCancelledV1(TypedDict):
    schemaVersion: EventSchemaVersion
    eventId: _EventId
    eventType: Literal["OrderCancelled"]
    occurredAt: _Timestamp
    payload: OrderCancelledPayload


OrderEventV1 = OrderAcceptedV1 | OrderAmendedV1 | OrderCancelledV1
ORDER_AMENDED_EVENT_TYPE = ORDER_AMENDED
ORDER_CANCELLED_EVENT_TYPE = ORDER_CANCELLED
# The events the outbox carries, each validated by its own v1 schema.
EVENT_TYPES = (ORDER_ACCEPTED_EVENT_TYPE, ORDER_AMENDED_EVENT_TYPE, ORDER_CANCELLED_EVENT_TYPE)
_ORDER_ACCEPTED_V1: TypeAdapter[OrderAcceptedV1] = TypeAdapter(OrderAcceptedV1)
_EVENT_SCHEMAS: dict[str, TypeAdapter[Any]] = {
    ORDER_ACCEPTED_EVENT_TYPE: _ORDER_ACCEPTED_V1,
    ORDER_AMENDED_EVENT_TYPE: TypeAdapter(OrderAmendedV1),
    ORDER_CANCELLED_EVENT_TYPE: TypeAdapter(OrderCancelledV1),
}


def order_event_v1(candidate: Mapping[str, Any]) -> OrderEventV1:
    """Validate a v1 event body of any type the outbox carries (chosen by its ``eventType``), or
    raise ``InvalidMessage`` with reason ``InvalidPayload`` and a bounded description."""
    event_type = candidate.get("eventType")
    schema = _EVENT_SCHEMAS.get(event_type) if isinstance(event_type, str) else None
    if schema is None:
        raise InvalidMessage(
            DeadletterReason.INVALID_PAYLOAD,
            f"eventType {bound(repr(event_type), 80)} is not one of {', '.join(EVENT_TYPES)}",
        )
    try:
        event: OrderEventV1 = schema.validate_python(candidate)
    except ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, schema_violations(error)) from None
    return event


def order_accepted_v1(candidate: Mapping[str, Any]) -> OrderAcceptedV1:
    """Validate an OrderAccepted v1 body (a plain dict) or raise ``InvalidMessage`` with reason
    ``InvalidPayload`` and a bounded description."""
    try:
        return _ORDER_ACCEPTED_V1.validate_python(candidate)
    except ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, schema_violations(error)) from None


def encode_event(event: OrderEventV1) -> bytes:
    """The wire bytes: compact JSON, UTF-8, keys in the order of the contract."""
    return pydantic_core.to_json(event)
