"""Target 1: Cosmos DB requests per outcome, counted at the transport, through the real function.

Each scenario is one delivery through the stand-in's host, the real function and the real
azure-cosmos client; the counting transport sees every request the SDK sends. The client is warmed
up first (an order of another id), so the SDK's one-off metadata reads are not charged to a
message; a metadata request during a scenario would still show in ``total``.
"""

from __future__ import annotations

from typing import Any

from bench.orders import INVALID_BODY, message, order_bytes
from bench.standin import StandIn

EXPECTED = {"new": 1, "duplicate": 2, "mismatch": 2, "invalid": 0}
EXPECTED_SETTLEMENT = {
    "new": ("complete", None),
    "duplicate": ("complete", None),
    "mismatch": ("dead_letter", "HashMismatch"),
    "invalid": ("dead_letter", "InvalidPayload"),
}


async def count_outcomes(standin: StandIn, order_id: str = "bench-order-1") -> dict[str, Any]:
    """Deliver a new order, its duplicate, a changed body under its id, and an invalid body;
    return the requests each cost and how each was settled."""
    await standin.deliver(message(f"{order_id}-warmup"))
    scenarios = {
        "new": message(order_id),
        "duplicate": message(order_id),
        "mismatch": message(order_id, order_bytes(order_id, quantity=3)),
        "invalid": message(order_id, INVALID_BODY),
    }
    outcomes: dict[str, dict[str, Any]] = {}
    for scenario, sent in scenarios.items():
        before = standin.transport.snapshot()
        await standin.deliver(sent)
        delta = standin.transport.snapshot().minus(before)
        record = standin.queue.settlement_log[-1]
        settlement = record.operation if record.ok else f"{record.operation} (failed)"
        outcomes[scenario] = {
            "documents": delta.documents,
            "total": delta.total,
            "kinds": delta.kinds(),
            "settlement": settlement,
            "reason": record.reason,
            "ok": delta.documents == EXPECTED[scenario]
            and delta.total == delta.documents
            and (settlement, record.reason) == EXPECTED_SETTLEMENT[scenario],
        }
    return {
        "outbox": standin.settings.outbox_enabled,
        "outcomes": outcomes,
        "ok": all(outcome["ok"] for outcome in outcomes.values()),
    }
