"""What the payment capture consumer reads: the order events of docs/events.md (``OrderAccepted``,
``OrderAmended``, ``OrderCancelled``, schemaVersion 1), by their Subject, strict on the fields it
uses, tolerant of every other.

A valid event is the kit's ``ValidEvent``: keyed by its MessageId (the eventId), versioned by
``payload.orderVersion`` (1 when an old ``OrderAccepted`` has none), fingerprinted over what this
consumer uses: the order, its version, the total its version asks to have captured (zero when
cancelled), the customer and the currency (none on a cancellation: the payment's state has
them). No Azure imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired

from idempotent_consumer import IncomingMessage, InvalidMessage, KitReason, ValidEvent, read_event
from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, with_config
from typing_extensions import TypedDict

ORDER_ACCEPTED = "OrderAccepted"
ORDER_AMENDED = "OrderAmended"
ORDER_CANCELLED = "OrderCancelled"
EVENT_TYPES = (ORDER_ACCEPTED, ORDER_AMENDED, ORDER_CANCELLED)

OrderId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
# Bounded, because a call resumed from its stored request must send the very amount its key was
# first sent with. Above 2**53 a JSON integer is not read back exactly by every reader of the
# document: the local Cosmos DB server (JavaScript) reads 2**53 + 1 as 2**53, as the JavaScript
# SDK and Data Explorer would (IEEE 754 doubles); the service's own query language speaks of 64-bit
# integers (learn.microsoft.com/cosmos-db/query/is-integer) but no page found here promises a stored
# integer above 2**53 round-trips. 10**15 is the most the order contract can produce (100 lines of
# 10,000 units at 10**9 minor units each), well inside the doubles' exact integers, as ``onHand``
# is bounded (ops/stock.py).
MAX_TOTAL_MINOR = 10**15


class Payload(TypedDict):
    orderId: OrderId
    orderVersion: NotRequired[Annotated[int, Field(ge=1, le=2**31 - 1)]]
    customerId: NotRequired[Annotated[str, StringConstraints(min_length=1, max_length=64)]]
    currency: NotRequired[Currency]
    totalMinor: NotRequired[Annotated[int, Field(ge=0, le=MAX_TOTAL_MINOR)]]


# Built on the first event this consumer reads, not at import: a cold start for another function
# of the app never pays for it (docs/benchmarks.md, target 4).
@with_config(ConfigDict(defer_build=True))
class Event(TypedDict):
    schemaVersion: Literal[1]
    eventType: str
    payload: Payload


_EVENT = TypeAdapter(Event)
_CHARGED_FIELDS = ("customerId", "currency", "totalMinor")


def target_minor(event: ValidEvent) -> int:
    """What the event's version of the order has captured in the end: its total, or zero."""
    total: int = event.fields["totalMinor"]
    return total


def charged(event: ValidEvent) -> Mapping[str, Any]:
    """The customer and currency of an accepted or amended order (empty for a cancellation)."""
    return {name: event.fields[name] for name in ("customerId", "currency") if name in event.fields}


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
    fields: dict[str, Any] = {"orderId": payload["orderId"], "orderVersion": version}
    if event_type == ORDER_CANCELLED:
        fields["totalMinor"] = 0
    else:
        missing = [name for name in _CHARGED_FIELDS if name not in payload]
        if missing:
            raise InvalidMessage(
                KitReason.INVALID_PAYLOAD, f"{event_type} lacks {', '.join(missing)}"
            )
        fields |= {name: payload[name] for name in _CHARGED_FIELDS}  # type: ignore[literal-required]
    return ValidEvent(message_id, event_type, payload["orderId"], version, fields)
