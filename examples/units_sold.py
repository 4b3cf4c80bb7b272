"""Units sold per SKU per day, counted from the OrderAccepted events: a pure increment, made safe
by the kit. Each SKU is a partition; each event adds its line's quantity to the SKU's counter of
the order's day, once, whatever the redeliveries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from idempotent_consumer import (
    Again,
    ConsumerDefinition,
    Create,
    DocumentMissing,
    IncomingMessage,
    InvalidMessage,
    KitReason,
    Patch,
    Read,
    Resolution,
    Retry,
    ValidEvent,
    Write,
    WriteRefused,
    increment,
    read_json_object,
    schema_violations,
    unsupported_type,
)
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict


class Line(TypedDict):
    sku: str
    quantity: int


class Payload(TypedDict):
    orderId: str
    placedAt: str  # RFC 3339, UTC: its first ten characters are the day
    lines: list[Line]


class OrderAccepted(TypedDict):
    payload: Payload  # what this consumer reads of the event (docs/events.md)


_ORDER_ACCEPTED = TypeAdapter(OrderAccepted)


def parse(message: IncomingMessage) -> ValidEvent:
    """The contract: an OrderAccepted event with its lines, or the reason it is not one."""
    if message.subject != "OrderAccepted":
        raise unsupported_type(reads="OrderAccepted")
    message_id, body = read_json_object(message.body, message.message_id)
    try:
        payload = _ORDER_ACCEPTED.validate_python(body, strict=True)["payload"]
    except ValidationError as error:
        raise InvalidMessage(KitReason.INVALID_PAYLOAD, schema_violations(error)) from None
    units: dict[str, int] = {}
    for line in payload["lines"]:
        units[line["sku"]] = units.get(line["sku"], 0) + line["quantity"]
    fields = {"day": payload["placedAt"][:10], "units": units}
    return ValidEvent(message_id, "OrderAccepted", payload["orderId"], 1, fields)


@dataclass(frozen=True)
class CountUnits:
    """The effect in one SKU's partition: add the line's units to the day's counter."""

    sku: str
    day: str
    units: int

    async def writes(self, sold: ValidEvent, read: Read) -> Sequence[Write]:
        return [Patch(f"units:{self.day}", [increment("units", self.units)])]

    async def resolve(
        self, sold: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        if isinstance(refused, DocumentMissing):  # the day's first sale of this SKU
            counter = {"id": f"units:{self.day}", "sku": self.sku, "day": self.day}
            return Retry([Create({**counter, "units": self.units})])
        return Again()  # created by another sale meanwhile: increment it


units_sold = ConsumerDefinition(
    name="analytics.units-sold",  # part of every marker's key: never rename it
    partition_field="sku",  # the container's partition key
    parse=parse,
    partitions=lambda sold: list(sold.fields["units"]),
    effect=lambda sold, sku: CountUnits(sku, sold.fields["day"], sold.fields["units"][sku]),
)
