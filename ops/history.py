"""``python -m ops history ORDER_ID``: one order's history, as the consumer and the relay left it
in the order's partition: the order document (status, version, which message created it), this
consumer's inbox markers (each handled OrderAmended and OrderCancelled, and a stale OrderPlaced:
MessageId, type, version, outcome, handledAt, ttl) and the outbox events (type, version,
eventId, status, createdAt, dispatchedAt or parked), in version order.

What it answers: which versions arrived, which were applied and which were stale, and whether
each applied version's event went out. What it cannot show: a marker past its ``ttl`` (expired:
its redelivery would now be stale, not duplicate), a dispatched event past its week (expired),
and a message dead-lettered before it was handled (``python -m ops list``).

It reads through the ``OrderPartition`` port (``ops.cosmos.CosmosOrderHistory``: one query scoped
to the order's partition key, never a cross-partition scan) and never writes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from idempotent_consumer import INBOX_TYPE, InboxField
from rich.console import Console
from rich.table import Table

from shared.consumer.contract import ORDER_PLACED
from shared.consumer.order import ORDER_TYPE, STATUS, stored_version
from shared.relay.outbox import OUTBOX_TYPE, OutboxField


@dataclass(frozen=True)
class PartitionRead:
    """Every document stored under one order id, and what reading them cost (RU)."""

    documents: list[dict[str, Any]]
    request_charge: float


class OrderPartition(Protocol):
    def read(self, order_id: str) -> PartitionRead:
        """Every document whose partition key is ``order_id`` (one single-partition query)."""
        ...


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser(
        "history", help="an order's document, inbox markers and outbox events, by version"
    )
    history.add_argument("order_id", metavar="ORDER_ID")
    history.add_argument("--json", action="store_true")


def _order_row(order: Mapping[str, Any]) -> dict[str, Any]:
    # An OrderPlaced created it unless a change arrived first (``createdBy``, shared.consumer.
    # order.order_from_change); orders written before the lifecycle have neither: OrderPlaced.
    return {
        "status": order.get(STATUS),
        "orderVersion": stored_version(order),
        "createdBy": order.get("createdBy", ORDER_PLACED),
        "messageId": order.get("messageId"),
        "lastMessageId": order.get("lastMessageId"),
        "acceptedAt": order.get("acceptedAt"),
        "amendedAt": order.get("amendedAt"),
        "cancelledAt": order.get("cancelledAt"),
        "cancellationReason": order.get("cancellationReason"),
        "requestHash": order.get("requestHash"),
    }


def _marker_row(marker: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: marker.get(name)
        for name in (
            InboxField.MESSAGE_ID,
            InboxField.MESSAGE_TYPE,
            InboxField.ORDER_VERSION,
            InboxField.OUTCOME,
            InboxField.HANDLED_AT,
            InboxField.TTL,
            InboxField.REQUEST_HASH,
        )
    }


def _event_row(event: Mapping[str, Any]) -> dict[str, Any]:
    payload = event.get(OutboxField.PAYLOAD)
    version = payload.get("orderVersion", 1) if isinstance(payload, dict) else None
    return {
        "eventType": event.get(OutboxField.EVENT_TYPE),
        "orderVersion": version,
        "eventId": event.get(OutboxField.EVENT_ID),
        "status": event.get(OutboxField.STATUS),
        "createdAt": event.get(OutboxField.CREATED_AT),
        "dispatchedAt": event.get(OutboxField.DISPATCHED_AT),
        "parkedReason": event.get(OutboxField.PARKED_REASON),
        "parkedAt": event.get(OutboxField.PARKED_AT),
        "causationId": event.get(OutboxField.CAUSATION_ID),
    }


def _by_version(rows: Iterable[dict[str, Any]], when: str) -> list[dict[str, Any]]:
    def key(row: dict[str, Any]) -> tuple[int, str]:
        version = row.get("orderVersion")
        return (version if isinstance(version, int) else -1, str(row.get(when) or ""))

    return sorted(rows, key=key)


def order_history(order_id: str, read: PartitionRead) -> dict[str, Any]:
    """The history of one order, from its partition's documents; a document of another kind
    (none today) is counted, not shown."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for document in read.documents:
        kinds.setdefault(str(document.get("type")), []).append(document)
    orders = kinds.pop(ORDER_TYPE, [])
    return {
        "orderId": order_id,
        "order": _order_row(orders[0]) if orders else None,
        "markers": _by_version(map(_marker_row, kinds.pop(INBOX_TYPE, [])), InboxField.HANDLED_AT),
        "events": _by_version(map(_event_row, kinds.pop(OUTBOX_TYPE, [])), "createdAt"),
        "otherDocuments": sum(len(documents) for documents in kinds.values()),
        "documentsRead": len(read.documents),
        "requestCharge": round(read.request_charge, 2),
    }


def run(args: argparse.Namespace, partition: OrderPartition, console: Console) -> int:
    history = order_history(args.order_id, partition.read(args.order_id))
    if args.json:
        console.print_json(json.dumps(history))
    else:
        _print(history, console)
    return 0 if history["documentsRead"] else 1


def _print(history: dict[str, Any], console: Console) -> None:
    order = history["order"]
    if order is None:
        console.print(f"order {history['orderId']}: no order document")
    else:
        cancelled = (
            f" at {order['cancelledAt']} ({order['cancellationReason']})"
            if order["status"] == "cancelled"
            else ""
        )
        console.print(
            f"order {history['orderId']}: {order['status']}{cancelled}, version "
            f"{order['orderVersion']}, created by {order['createdBy']} at {order['acceptedAt']}"
        )
    table = Table("version", "record", "MessageId / eventId", "type", "outcome / status", "at")
    rows: list[tuple[int, int, tuple[Any, ...]]] = []
    if order is not None and order["requestHash"] is not None:
        # The OrderPlaced's own record: the order document is its marker (no inbox marker).
        placed = (str(order["messageId"]), ORDER_PLACED, "processed", str(order["acceptedAt"]))
        rows.append((1, 0, ("1", "order", *placed)))
    for marker in history["markers"]:
        handled_at = f"{marker['handledAt']} (ttl {marker['ttl']} s)"
        cells = (marker["messageId"], marker["messageType"], marker["outcome"], handled_at)
        rows.append((_version(marker), 0, (str(marker["orderVersion"]), "marker", *cells)))
    for event in history["events"]:
        status = event["status"]
        when = event["dispatchedAt"] or event["parkedAt"] or event["createdAt"]
        if event["parkedReason"]:
            status = f"{status} ({event['parkedReason']})"
        cells = (event["eventId"], event["eventType"], status, when)
        rows.append((_version(event), 1, (str(event["orderVersion"]), "event", *cells)))
    for _, _, row in sorted(rows, key=lambda row: (row[0], row[1])):
        table.add_row(*(str(cell) for cell in row))
    console.print(table)
    console.print(
        f"{len(history['markers'])} marker(s), {len(history['events'])} event(s); "
        f"{history['documentsRead']} document(s) read from one partition, "
        f"{history['requestCharge']} RU"
    )


def _version(row: Mapping[str, Any]) -> int:
    version = row.get("orderVersion")
    return version if isinstance(version, int) else -1
