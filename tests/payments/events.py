"""Order events as the relay publishes them (docs/events.md), for the payment consumer's tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

from idempotent_consumer import IncomingMessage

_NAMESPACE = uuid.UUID("6f3a9f0e-2d3c-4f6a-9a51-2a0f3c1b7e11")


def event_id(order_id: str, version: int) -> str:
    name = f"{order_id}/OrderAccepted" if version == 1 else f"{order_id}/v{version}"
    return str(uuid.uuid5(_NAMESPACE, name))


def payment_event(
    order_id: str,
    version: int,
    total_minor: int | None,
    *,
    customer_id: str = "customer-1",
    currency: str = "EUR",
    delivery_count: int = 1,
) -> IncomingMessage:
    """Version ``version`` of ``order_id`` with its total; ``None`` is its cancellation."""
    if total_minor is None:
        event_type = "OrderCancelled"
        payload: dict[str, Any] = {
            "orderId": order_id,
            "orderVersion": version,
            "cancelledAt": "2026-12-01T10:00:00Z",
            "reason": "customer",
        }
    else:
        event_type = "OrderAccepted" if version == 1 else "OrderAmended"
        payload = {
            "orderId": order_id,
            "orderVersion": version,
            "customerId": customer_id,
            "currency": currency,
            "totalMinor": total_minor,
            "placedAt": "2026-12-01T09:00:00Z",
            "lineCount": 1,
            "lines": [{"sku": "A", "quantity": 1, "unitPriceMinor": total_minor}],
        }
    body = {
        "schemaVersion": 1,
        "eventId": event_id(order_id, version),
        "eventType": event_type,
        "occurredAt": "2026-12-01T10:00:00.000000Z",
        "payload": payload,
    }
    return IncomingMessage(
        message_id=event_id(order_id, version),
        body=json.dumps(body).encode(),
        subject=event_type,
        delivery_count=delivery_count,
    )
