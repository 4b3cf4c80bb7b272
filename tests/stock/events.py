"""Order events as the relay publishes them (docs/events.md), for the stock consumer's tests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from idempotent_consumer import IncomingMessage

_NAMESPACE = uuid.UUID("6f3a9f0e-2d3c-4f6a-9a51-2a0f3c1b7e11")


def event_id(order_id: str, version: int) -> str:
    name = f"{order_id}/OrderAccepted" if version == 1 else f"{order_id}/v{version}"
    return str(uuid.uuid5(_NAMESPACE, name))


def event_body(
    order_id: str, version: int, lines: Mapping[str, int] | None, *, cancelled: bool = False
) -> tuple[str, dict[str, Any]]:
    """The (Subject, body) of version ``version`` of ``order_id`` wanting ``lines``."""
    event_type = (
        "OrderCancelled" if cancelled else "OrderAccepted" if version == 1 else "OrderAmended"
    )
    payload: dict[str, Any] = {"orderId": order_id, "orderVersion": version}
    if cancelled:
        payload |= {"cancelledAt": "2026-12-01T10:00:00Z", "reason": "customer"}
    else:
        payload |= {
            "customerId": "cust-1",
            "currency": "EUR",
            "totalMinor": 100,
            "placedAt": "2026-12-01T09:00:00Z",
            "lineCount": len(lines or {}),
            "lines": [
                {"sku": sku, "quantity": quantity, "unitPriceMinor": 100}
                for sku, quantity in (lines or {}).items()
            ],
        }
    body = {
        "schemaVersion": 1,
        "eventId": event_id(order_id, version),
        "eventType": event_type,
        "occurredAt": "2026-12-01T10:00:00.000000Z",
        "payload": payload,
    }
    return event_type, body


def event_message(
    order_id: str, version: int, lines: Mapping[str, int] | None = None, *, cancelled: bool = False
) -> IncomingMessage:
    subject, body = event_body(order_id, version, lines, cancelled=cancelled)
    return IncomingMessage(
        message_id=body["eventId"], body=json.dumps(body).encode(), subject=subject
    )
