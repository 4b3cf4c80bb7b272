"""OrderPlaced messages for the benchmarks: by default ten lines, about 1 KB stored."""

from __future__ import annotations

import json

from local.standins.broker import OutgoingMessage
from ops.sample_orders import order_body

INVALID_BODY = b'{"schemaVersion": 1, "orderId": "x", "currency": "eur"}'


def order_bytes(order_id: str, *, lines: int = 10, quantity: int = 2) -> bytes:
    """As a producer sends it: ``json.dumps`` with default separators, UTF-8."""
    body = order_body(
        order_id,
        customerId="cust-000042",
        placedAt="2026-11-29T10:15:00.1234567+01:00",
        lines=[
            {"sku": f"SKU-{index:05d}", "quantity": quantity, "unitPriceMinor": 1250 + index}
            for index in range(lines)
        ],
    )
    return json.dumps(body).encode("utf-8")


def message(order_id: str, body: bytes | None = None) -> OutgoingMessage:
    return OutgoingMessage(
        message_id=order_id,
        body=order_bytes(order_id) if body is None else body,
        correlation_id=f"corr-{order_id}",
    )


def outgoing(prefix: str, count: int) -> list[OutgoingMessage]:
    """``count`` new orders with ids ``{prefix}-{index}``, as a sender puts them on the queue."""
    return [message(f"{prefix}-{index}") for index in range(count)]
