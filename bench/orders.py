"""Order messages for the benchmarks: OrderPlaced by default ten lines, about 1 KB stored, and
its lifecycle changes (OrderAmended with the same ten lines, OrderCancelled) as a producer sends
them (Subject = message type, MessageId ``{orderId}:v{orderVersion}`` unless given)."""

from __future__ import annotations

import json
from typing import Any

from local.standins.broker import OutgoingMessage
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body

INVALID_BODY = b'{"schemaVersion": 1, "orderId": "x", "currency": "eur"}'


def _order_fields(lines: int, quantity: int) -> dict[str, Any]:
    return {
        "customerId": "cust-000042",
        "placedAt": "2026-11-29T10:15:00.1234567+01:00",
        "lines": [
            {"sku": f"SKU-{index:05d}", "quantity": quantity, "unitPriceMinor": 1250 + index}
            for index in range(lines)
        ],
    }


def order_bytes(order_id: str, *, lines: int = 10, quantity: int = 2) -> bytes:
    """As a producer sends it: ``json.dumps`` with default separators, UTF-8."""
    return json.dumps(order_body(order_id, **_order_fields(lines, quantity))).encode("utf-8")


def message(order_id: str, body: bytes | None = None) -> OutgoingMessage:
    return OutgoingMessage(
        message_id=order_id,
        body=order_bytes(order_id) if body is None else body,
        correlation_id=f"corr-{order_id}",
    )


def amended(
    order_id: str, version: int, *, message_id: str | None = None, quantity: int = 3
) -> OutgoingMessage:
    """OrderAmended: the order's whole new state at ``version`` (its ten lines, ``quantity``
    each)."""
    body = amended_body(order_id, version, **_order_fields(10, quantity))
    return _change(order_id, version, "OrderAmended", body, message_id)


def cancelled(order_id: str, version: int, *, message_id: str | None = None) -> OutgoingMessage:
    body = cancelled_body(order_id, version, reason="customer request")
    return _change(order_id, version, "OrderCancelled", body, message_id)


def _change(
    order_id: str, version: int, subject: str, body: dict[str, Any], message_id: str | None
) -> OutgoingMessage:
    return OutgoingMessage(
        message_id=message_id or lifecycle_message_id(order_id, version),
        body=json.dumps(body).encode("utf-8"),
        correlation_id=f"corr-{order_id}-v{version}",
        subject=subject,
    )


def outgoing(prefix: str, count: int) -> list[OutgoingMessage]:
    """``count`` new orders with ids ``{prefix}-{index}``, as a sender puts them on the queue."""
    return [message(f"{prefix}-{index}") for index in range(count)]
