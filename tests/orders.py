"""Sample OrderPlaced bodies for tests."""

from __future__ import annotations

import json
from typing import Any

from local.standins.broker import OutgoingMessage


def order_body(order_id: str = "ord-1001", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schemaVersion": 1,
        "orderId": order_id,
        "customerId": "cust-42",
        "currency": "EUR",
        "placedAt": "2026-11-29T10:15:00+01:00",
        "lines": [
            {"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1250},
            {"sku": "SKU-2", "quantity": 1, "unitPriceMinor": 999},
        ],
    }
    body.update(overrides)
    return body


def message(
    body: dict[str, Any] | bytes,
    message_id: str | None = "ord-1001",
    correlation_id: str | None = "corr-1",
    **properties: str,
) -> OutgoingMessage:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return OutgoingMessage(
        message_id=message_id,
        body=raw,
        correlation_id=correlation_id,
        application_properties=dict(properties),
    )
