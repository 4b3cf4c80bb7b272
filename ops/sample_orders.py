"""The one sample-order factory: OrderPlaced v1 bodies for ``python -m ops send`` (a smoke test
of a deployment), the demo, the tests and the benchmarks. Builds dicts only (the caller
encodes them); never sends anything itself."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

# The MessageId producers are advised to give a change, re-exported: the contract owns it.
from shared.consumer.contract import lifecycle_message_id

__all__ = ["amended_body", "cancelled_body", "lifecycle_message_id", "order_body", "random_order"]


def order_body(order_id: str = "ord-1001", **fields: Any) -> dict[str, Any]:
    """A valid OrderPlaced v1 body: two lines, EUR. ``fields`` (wire names) replace or add
    fields, unknown ones included (the contract ignores them)."""
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
    body.update(fields)
    return body


def random_order(rng: random.Random, order_id: str, placed: datetime) -> dict[str, Any]:
    """An order drawn from ``rng``: one of 199 customers, three currencies, 1-10 lines. The
    draws come in a fixed order, so a seed always gives the same orders (the demo's plan)."""
    customer = f"cust-{rng.randrange(1, 200):04d}"
    currency = rng.choice(["EUR", "USD", "GBP"])
    lines = [
        {
            "sku": f"SKU-{rng.randrange(1, 5000):05d}",
            "quantity": rng.randrange(1, 5),
            "unitPriceMinor": rng.randrange(100, 50_000),
        }
        for _ in range(rng.randrange(1, 11))
    ]
    return order_body(
        order_id,
        customerId=customer,
        currency=currency,
        placedAt=placed.isoformat(timespec="seconds"),
        lines=lines,
    )


def amended_body(order_id: str = "ord-1001", version: int = 2, **fields: Any) -> dict[str, Any]:
    """A valid OrderAmended v1 body: the order's whole new state at ``version`` (the sample
    order's, with one more unit of its first line per version past 1). Send it with Subject
    ``OrderAmended`` and a MessageId of its own (``lifecycle_message_id``)."""
    base = order_body(order_id)
    lines = [dict(line) for line in base["lines"]]
    lines[0]["quantity"] += version - 1
    body: dict[str, Any] = {
        **base,
        "orderVersion": version,
        "lines": lines,
        "amendedAt": f"2026-11-29T{10 + min(version, 13):02d}:30:00Z",
    }
    body.update(fields)
    return body


def cancelled_body(
    order_id: str = "ord-1001", version: int = 2, reason: str = "customer request", **fields: Any
) -> dict[str, Any]:
    """A valid OrderCancelled v1 body at ``version``. Subject ``OrderCancelled``."""
    body: dict[str, Any] = {
        "schemaVersion": 1,
        "orderId": order_id,
        "orderVersion": version,
        "cancelledAt": "2026-11-29T23:00:00Z",
        "reason": reason,
    }
    body.update(fields)
    return body
