"""The order document: the one owner of its stored shape and of how each message changes it.

One document per order, ``id`` = ``orderId`` (the partition key). It holds the state of the
highest version applied: the contract's fields, ``orderVersion`` and ``status`` (``accepted``,
or ``cancelled`` with ``cancelledAt`` and ``cancellationReason``). What identifies the placed
request (``requestHash``, ``hashAlgorithm``, ``messageId``) is written by the OrderPlaced only
and never changed, so after amendments a redelivered OrderPlaced is still a duplicate and one
with other content still a mismatch. An order created by an amendment, or a cancellation's
tombstone, has no ``requestHash``: a late OrderPlaced then meets a newer version and is stale.

A change applies only over an older version of an order still accepted: ``APPLIES_OVER``
(``Condition``) is checked by the store inside the same atomic commit as the change's marker and
event, so concurrent deliveries of any versions can never write an older state over a newer one.
Orders written before versions existed carry no ``orderVersion``: they are version 1
(``stored_version``), and the condition lets a change apply over them.

Pure: no Azure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from idempotent_consumer import Condition, PatchOperation, document_timestamp, set_field

from shared.consumer.contract import ORDER_AMENDED, ORDER_CANCELLED, ValidChange, ValidOrder

ORDER_TYPE = "order"
STATUS_ACCEPTED = "accepted"
STATUS_CANCELLED = "cancelled"
ORDER_VERSION = "orderVersion"
STATUS = "status"
# The fields an amendment sets (its whole new state) besides the version.
_AMENDED_FIELDS = ("customerId", "currency", "placedAt", "lines", "amendedAt")


def stored_version(order: Mapping[str, Any]) -> int:
    """The version of a stored order; one written before versions existed is version 1."""
    version = order.get(ORDER_VERSION, 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def is_cancelled(order: Mapping[str, Any]) -> bool:
    return order.get(STATUS) == STATUS_CANCELLED


def applies_over(version: int) -> Condition:
    """The condition a change of ``version`` needs of the stored order: an older version (a
    missing ``orderVersion`` counts as 1) of an order that is still accepted."""
    return Condition(
        below={ORDER_VERSION: version},
        equals={STATUS: STATUS_ACCEPTED},
        defaults={ORDER_VERSION: 1},
    )


def placed_order(
    valid: ValidOrder,
    *,
    message_id: str | None,
    correlation_id: str | None,
    delivery_count: int | None,
    accepted_at: str,
) -> dict[str, Any]:
    """The order an OrderPlaced creates, version 1."""
    return {
        "id": valid.order_id,
        "type": ORDER_TYPE,
        STATUS: STATUS_ACCEPTED,
        **valid.fields,
        ORDER_VERSION: 1,
        "totalMinor": valid.total_minor,
        "requestHash": valid.request_hash,
        "hashAlgorithm": valid.hash_algorithm,
        "messageId": message_id,
        "correlationId": correlation_id,
        "firstDeliveryCount": delivery_count,
        "acceptedAt": accepted_at,
    }


def change_patch(change: ValidChange) -> list[PatchOperation]:
    """What a change sets on an existing order (at most 10 operations: Cosmos DB's limit for one
    patch, learn.microsoft.com/azure/cosmos-db/partial-document-update)."""
    fields = change.fields
    if change.message_type == ORDER_AMENDED:
        operations = [set_field(name, fields[name]) for name in _AMENDED_FIELDS]
        operations.append(set_field("totalMinor", change.total_minor))
    else:
        operations = [
            set_field(STATUS, STATUS_CANCELLED),
            set_field("cancelledAt", fields["cancelledAt"]),
            set_field("cancellationReason", fields["reason"]),
        ]
    operations.append(set_field(ORDER_VERSION, change.version))
    operations.append(set_field("lastMessageId", change.message_id))
    return operations


def order_from_change(
    change: ValidChange, *, correlation_id: str | None, accepted_at: datetime
) -> dict[str, Any]:
    """The order a change creates when it arrives before the order exists: an amendment carries
    the whole state, so it creates the order at its version; a cancellation creates the
    cancelled order (a tombstone at its version). Neither has a ``requestHash``."""
    fields = change.fields
    order: dict[str, Any] = {
        "id": change.order_id,
        "type": ORDER_TYPE,
        "schemaVersion": fields["schemaVersion"],
        "orderId": change.order_id,
        ORDER_VERSION: change.version,
        "createdBy": change.message_type,
        "lastMessageId": change.message_id,
        "correlationId": correlation_id,
        "acceptedAt": document_timestamp(accepted_at),
    }
    if change.message_type == ORDER_CANCELLED:
        order[STATUS] = STATUS_CANCELLED
        order["cancelledAt"] = fields["cancelledAt"]
        order["cancellationReason"] = fields["reason"]
    else:
        order[STATUS] = STATUS_ACCEPTED
        order.update({name: fields[name] for name in _AMENDED_FIELDS})
        order["totalMinor"] = change.total_minor
    return order
