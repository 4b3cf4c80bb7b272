"""OrderPlaced bodies for the benchmarks: by default ten lines, about 1 KB stored."""

from __future__ import annotations

import json
from typing import Any

from local.broker import OutgoingMessage

DEFAULT_LINES = 10


def order_body(order_id: str, *, lines: int = DEFAULT_LINES, quantity: int = 2) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "orderId": order_id,
        "customerId": "cust-000042",
        "currency": "EUR",
        "placedAt": "2026-11-29T10:15:00.1234567+01:00",
        "lines": [
            {"sku": f"SKU-{index:05d}", "quantity": quantity, "unitPriceMinor": 1250 + index}
            for index in range(lines)
        ],
    }


def encode(body: dict[str, Any]) -> bytes:
    """As a producer sends it: json.dumps with default separators, UTF-8."""
    return json.dumps(body).encode("utf-8")


def order_bytes(order_id: str, *, lines: int = DEFAULT_LINES, quantity: int = 2) -> bytes:
    return encode(order_body(order_id, lines=lines, quantity=quantity))


def outgoing(prefix: str, count: int, *, lines: int = DEFAULT_LINES) -> list[OutgoingMessage]:
    """``count`` orders with ids ``{prefix}-{index}``, as a sender puts them on the queue. The
    split host's child builds its messages with this too, so the floor variants can predict them."""
    ids = [f"{prefix}-{index}" for index in range(count)]
    return [
        OutgoingMessage(
            message_id=message_id,
            body=order_bytes(message_id, lines=lines),
            correlation_id=f"corr-{message_id}",
        )
        for message_id in ids
    ]


INVALID_BODY = b'{"schemaVersion": 1, "orderId": "x", "currency": "eur"}'
