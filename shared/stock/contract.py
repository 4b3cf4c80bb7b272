"""What the stock reservation consumer reads: the order events of docs/events.md (``OrderAccepted``,
``OrderAmended``, ``OrderCancelled``, schemaVersion 1), by their Subject, validated strictly for
the fields it uses and tolerant of every other (a tolerant reader, as docs/events.md asks).

A valid event is the kit's ``ValidEvent``: keyed by its MessageId (the eventId), versioned by
``payload.orderVersion`` (an ``OrderAccepted`` of before the lifecycle has none: version 1), and
fingerprinted over what this consumer uses: the order, its version and the quantity wanted per
SKU (lines of one SKU summed). A cancellation wants nothing.

Its own dead-letter reason beyond the kit's: ``MissingLines``, an ``OrderAccepted`` or
``OrderAmended`` without ``payload.lines`` (published before the lines were added to the events:
docs/events.md): an operator decides what it reserves. No Azure imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, NotRequired

from idempotent_consumer import IncomingMessage, InvalidMessage, KitReason, ValidEvent, read_event
from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, with_config
from typing_extensions import TypedDict

ORDER_ACCEPTED = "OrderAccepted"
ORDER_AMENDED = "OrderAmended"
ORDER_CANCELLED = "OrderCancelled"
EVENT_TYPES = (ORDER_ACCEPTED, ORDER_AMENDED, ORDER_CANCELLED)
MISSING_LINES = "MissingLines"

OrderId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]
Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Version = Annotated[int, Field(ge=1, le=2**31 - 1)]


class Line(TypedDict):
    sku: Sku
    quantity: Annotated[int, Field(ge=1, le=10_000)]


class Payload(TypedDict):
    orderId: OrderId
    orderVersion: NotRequired[Version]
    lines: NotRequired[Annotated[list[Line], Field(min_length=1, max_length=100)]]


# Built on the first event this consumer reads, not at import: a cold start for another function
# of the app never pays for it (docs/benchmarks.md, target 4).
@with_config(ConfigDict(defer_build=True))
class Event(TypedDict):
    schemaVersion: Literal[1]
    eventType: str
    payload: Payload


_EVENT = TypeAdapter(Event)


def wanted(event: ValidEvent) -> Mapping[str, int]:
    """The quantity the event's version of the order wants, per SKU (none when cancelled)."""
    lines: Mapping[str, int] = event.fields["lines"]
    return lines


def parse_event(message: IncomingMessage) -> ValidEvent:
    """The contract (module docstring): the valid event, or the reason it is not one."""
    message_id, event_type, event = read_event(message, _EVENT, EVENT_TYPES)
    payload = event["payload"]
    version = payload.get("orderVersion", 1)
    if (event_type == ORDER_ACCEPTED) != (version == 1):
        raise InvalidMessage(
            KitReason.INVALID_PAYLOAD,
            f"{event_type} cannot be version {version} (OrderAccepted is 1, a change 2 or more)",
        )
    lines: dict[str, int] = {}
    if event_type != ORDER_CANCELLED:
        if "lines" not in payload:
            raise InvalidMessage(
                MISSING_LINES,
                f"{event_type} of order {payload['orderId']} carries no lines: nothing says "
                "what to reserve (an event published before the lines were added)",
            )
        for line in payload["lines"]:
            lines[line["sku"]] = lines.get(line["sku"], 0) + line["quantity"]
    fields = {"orderId": payload["orderId"], "orderVersion": version, "lines": lines}
    return ValidEvent(message_id, event_type, payload["orderId"], version, fields)
