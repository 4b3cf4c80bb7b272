"""The outbox document: the one owner of its stored shape.

Each change applied to an order (accepted, amended, cancelled) writes its event with the change,
in the same transactional batch and partition (``shared.consumer.core``,
``shared.consumer.lifecycle``), as one outbox document; the relay publishes it and
marks it, the watchdog finds it when the change feed did not, the operator tool parks and
republishes it. Every one of them reads and writes it through this module: its field names
(``OutboxField``), its type and statuses, its ids, how it is built, how it is read, and the
patches that change it (dispatched, parked, pending again). Renaming a field is a change here.

Lifecycle: ``pending`` (written with the order) -> ``dispatched`` (published, with a ``ttl``) or
``parked`` (set aside for an operator, with a reason) -> ``pending`` again (an operator's
republish). Every change is a patch conditional on the version read (``OutboxRef``: id,
partition key, etag), so a replayed or concurrent writer never overwrites a newer state.

Pure: imports only the contract and the clock; never Azure, telemetry or an adapter.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from idempotent_consumer import document_timestamp, uuid5_text

from shared.consumer.contract import (
    ORDER_ACCEPTED_EVENT_TYPE,
    ORDER_AMENDED,
    ValidChange,
    ValidOrder,
)


class OutboxField:
    """The stored field names of an outbox document (its JSON keys)."""

    ID = "id"
    ORDER_ID = "orderId"  # the partition key, as for the order
    TYPE = "type"
    EVENT_TYPE = "eventType"
    EVENT_ID = "eventId"
    STATUS = "status"
    PAYLOAD = "payload"
    CORRELATION_ID = "correlationId"
    CAUSATION_ID = "causationId"
    CREATED_AT = "createdAt"
    TRACEPARENT = "traceparent"
    DISPATCHED_AT = "dispatchedAt"
    TTL = "ttl"
    PARKED_AT = "parkedAt"
    PARKED_REASON = "parkedReason"
    PARKED_DESCRIPTION = "parkedDescription"
    ETAG = "_etag"  # the store's version, set by Cosmos DB on every write


OUTBOX_TYPE = "outbox"
STATUS_PENDING = "pending"
STATUS_DISPATCHED = "dispatched"
STATUS_PARKED = "parked"
# A dispatched outbox document expires a week after its dispatch (the container's defaultTtl is
# -1: orders, which carry no ttl, never expire). Longer than the topic's duplicate detection
# window, so an operator can still see what was sent while a duplicate could still arrive.
DISPATCHED_TTL_S = 7 * 24 * 3600
# Fixed namespace so the outbox event id is the same on every delivery and every replica. Part of
# the downstream contract (docs/events.md, "The eventId"): never change it.
EVENT_ID_NAMESPACE = uuid.UUID("6f3a9f0e-2d3c-4f6a-9a51-2a0f3c1b7e11")

PatchOperation = dict[str, Any]


# ---- ids -------------------------------------------------------------------------------------


def order_event_id(order_id: str, event_type: str = ORDER_ACCEPTED_EVENT_TYPE) -> str:
    """The event's id (its MessageId): UUIDv5 of ``EVENT_ID_NAMESPACE`` and the UTF-8 name
    ``<orderId>/<eventType>``, lower-case, as downstream teams recompute it (docs/events.md)."""
    return uuid5_text(EVENT_ID_NAMESPACE, f"{order_id}/{event_type}")


def version_event_id(order_id: str, order_version: int) -> str:
    """The id of the event of a later version (OrderAmended, OrderCancelled): UUIDv5 of
    ``EVENT_ID_NAMESPACE`` and ``<orderId>/v<orderVersion>`` (docs/events.md). One version has
    one event, so the version identifies it; OrderAccepted keeps ``order_event_id``."""
    return uuid5_text(EVENT_ID_NAMESPACE, f"{order_id}/v{order_version}")


def outbox_document_id(order_id: str, order_version: int = 1) -> str:
    # Cannot collide with an order: ids are unique per partition, and this partition's order id
    # is ``order_id`` itself. Version 1 (OrderAccepted) keeps the id it always had.
    if order_version == 1:
        return f"{order_id}:{ORDER_ACCEPTED_EVENT_TYPE}"
    return f"{order_id}:v{order_version}"


# ---- building --------------------------------------------------------------------------------


def new_outbox_document(
    valid: ValidOrder,
    *,
    correlation_id: str | None,
    causation_id: str | None,
    created_at: str,
    traceparent: str | None = None,
) -> dict[str, Any]:
    """The pending ``OrderAccepted`` outbox document of an accepted order, in the order's
    partition. ``created_at`` is the order's ``acceptedAt`` (``document_timestamp``);
    ``traceparent`` the consumer span's W3C trace context, which the relay's publish span links
    back to."""
    order_id = valid.order_id
    document: dict[str, Any] = {
        OutboxField.ID: outbox_document_id(order_id),
        OutboxField.ORDER_ID: order_id,
        OutboxField.TYPE: OUTBOX_TYPE,
        OutboxField.EVENT_TYPE: ORDER_ACCEPTED_EVENT_TYPE,
        OutboxField.EVENT_ID: order_event_id(order_id),
        OutboxField.STATUS: STATUS_PENDING,
        OutboxField.PAYLOAD: {
            "orderId": order_id,
            "orderVersion": 1,
            "customerId": valid.fields["customerId"],
            "currency": valid.fields["currency"],
            "totalMinor": valid.total_minor,
            "placedAt": valid.fields["placedAt"],
            "lineCount": len(valid.fields["lines"]),
            "lines": valid.fields["lines"],
        },
        # What a relay needs to publish with trace continuity and idempotence downstream.
        OutboxField.CORRELATION_ID: correlation_id,
        OutboxField.CAUSATION_ID: causation_id,
        OutboxField.CREATED_AT: created_at,
    }
    if traceparent:
        document[OutboxField.TRACEPARENT] = traceparent
    return document


def new_change_outbox_document(
    change: ValidChange,
    *,
    correlation_id: str | None,
    created_at: str,
    traceparent: str | None = None,
) -> dict[str, Any]:
    """The pending OrderAmended or OrderCancelled outbox document of an applied change, in the
    order's partition; its causation is the change's MessageId. An amendment's payload is the
    order's whole new state."""
    order_id, version, fields = change.order_id, change.version, change.fields
    payload: dict[str, Any]
    if change.message_type == ORDER_AMENDED:
        payload = {
            "orderId": order_id,
            "orderVersion": version,
            "customerId": fields["customerId"],
            "currency": fields["currency"],
            "totalMinor": change.total_minor,
            "placedAt": fields["placedAt"],
            "amendedAt": fields["amendedAt"],
            "lineCount": len(fields["lines"]),
            "lines": fields["lines"],
        }
    else:
        payload = {
            "orderId": order_id,
            "orderVersion": version,
            "cancelledAt": fields["cancelledAt"],
            "reason": fields["reason"],
        }
    document: dict[str, Any] = {
        OutboxField.ID: outbox_document_id(order_id, version),
        OutboxField.ORDER_ID: order_id,
        OutboxField.TYPE: OUTBOX_TYPE,
        OutboxField.EVENT_TYPE: change.message_type,
        OutboxField.EVENT_ID: version_event_id(order_id, version),
        OutboxField.STATUS: STATUS_PENDING,
        OutboxField.PAYLOAD: payload,
        OutboxField.CORRELATION_ID: correlation_id,
        OutboxField.CAUSATION_ID: change.message_id,
        OutboxField.CREATED_AT: created_at,
    }
    if traceparent:
        document[OutboxField.TRACEPARENT] = traceparent
    return document


# ---- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboxRef:
    """The version of an outbox document a writer read: what every conditional patch names."""

    document_id: str
    partition_key: str
    etag: str | None


def reference(document: Mapping[str, Any]) -> OutboxRef:
    """The version of ``document`` as it was read (its id, partition key and etag)."""
    return OutboxRef(
        str(document.get(OutboxField.ID)),
        str(document.get(OutboxField.ORDER_ID)),
        optional_text(document.get(OutboxField.ETAG)),
    )


def is_outbox(document: Mapping[str, Any]) -> bool:
    return document.get(OutboxField.TYPE) == OUTBOX_TYPE


def is_pending_outbox(document: Mapping[str, Any]) -> bool:
    """The documents the relay publishes: outbox entries not yet dispatched, of any event type
    (one that is no valid event, an unknown type included, is parked loudly, never skipped:
    ``shared.relay.core.build_event``). Orders, inbox markers, dispatched and parked entries (the
    relay's own marks come back through the change feed) are ignored."""
    return (
        document.get(OutboxField.TYPE) == OUTBOX_TYPE
        and document.get(OutboxField.STATUS) == STATUS_PENDING
    )


def created_at(document: Mapping[str, Any]) -> datetime | None:
    """``createdAt`` as a time; None when missing or unreadable."""
    value = document.get(OutboxField.CREATED_AT)
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def optional_text(value: Any) -> str | None:
    """A stored string field, None when missing, empty or not a string."""
    return value if isinstance(value, str) and value else None


# ---- the patches -----------------------------------------------------------------------------


def _set(field: str, value: Any) -> PatchOperation:
    return {"op": "set", "path": f"/{field}", "value": value}


def dispatched_patch(dispatched_at: datetime, ttl_s: int) -> list[PatchOperation]:
    """Published: ``status: dispatched``, ``dispatchedAt`` and the ``ttl`` that expires it."""
    return [
        _set(OutboxField.STATUS, STATUS_DISPATCHED),
        _set(OutboxField.DISPATCHED_AT, document_timestamp(dispatched_at)),
        _set(OutboxField.TTL, ttl_s),
    ]


def parked_patch(parked_at: datetime, reason: str, description: str) -> list[PatchOperation]:
    """Set aside for an operator: ``status: parked``, ``parkedAt``, ``parkedReason``,
    ``parkedDescription`` (no ttl: a parked event never expires)."""
    return [
        _set(OutboxField.STATUS, STATUS_PARKED),
        _set(OutboxField.PARKED_AT, document_timestamp(parked_at)),
        _set(OutboxField.PARKED_REASON, reason),
        _set(OutboxField.PARKED_DESCRIPTION, description),
    ]


def republish_patch() -> list[PatchOperation]:
    """An operator's republish: ``status`` back to ``pending`` and nothing else (the parked
    fields stay, as the record of what happened; the eventId never changes)."""
    return [_set(OutboxField.STATUS, STATUS_PENDING)]
