"""OrderPlaced bodies for the benchmarks: by default ten lines, about 1 KB stored."""

from __future__ import annotations

import json
from typing import Any

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


INVALID_BODY = b'{"schemaVersion": 1, "orderId": "x", "currency": "eur"}'
