"""Target 1: Cosmos DB requests per outcome, counted at the transport, through the real function.

Each scenario is one delivery through the local Functions host, the real function and the real
azure-cosmos client; the counting transport sees every request the SDK sends. The client is warmed
up first (one order of another id), so the SDK's one-off metadata reads are not charged to a
message; any metadata request during a scenario would still show up in ``total``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.orders import INVALID_BODY, order_bytes
from bench.peer import TwoPhaseIdempotency
from bench.standin import StandIn
from bench.transport import RequestSnapshot
from local.broker import OutgoingMessage
from shared.contract import parse_order
from shared.core import IncomingMessage, build_documents

EXPECTED = {"new": 1, "duplicate": 2, "mismatch": 2, "invalid": 0}
EXPECTED_SETTLEMENT = {
    "new": ("complete", None),
    "duplicate": ("complete", None),
    "mismatch": ("dead_letter", "HashMismatch"),
    "invalid": ("dead_letter", "InvalidPayload"),
}


@dataclass(frozen=True)
class OutcomeRequests:
    scenario: str
    documents: int  # requests on /docs: the message's cost
    total: int  # all requests, metadata included (0 extra once warmed up)
    kinds: dict[str, int]
    settlement: str
    reason: str | None

    @property
    def ok(self) -> bool:
        return (
            self.documents == EXPECTED[self.scenario]
            and self.total == self.documents
            and (self.settlement, self.reason) == EXPECTED_SETTLEMENT[self.scenario]
        )


def _message(order_id: str, body: bytes) -> OutgoingMessage:
    return OutgoingMessage(message_id=order_id, body=body, correlation_id=f"corr-{order_id}")


async def count_outcomes(standin: StandIn, order_id: str = "bench-order-1") -> dict[str, Any]:
    """Deliver a new order, its duplicate, a changed body under its id, and an invalid body;
    return the requests each cost. Used by ``python -m bench`` and by tests/bench."""
    transport, queue = standin.transport, standin.queue
    # Let a re-sent message through, as after the broker's duplicate-detection window.
    queue.settings = dataclasses.replace(queue.settings, duplicate_detection_window=timedelta(0))
    await standin.deliver(_message(f"{order_id}-warmup", order_bytes(f"{order_id}-warmup")))
    scenarios = {
        "new": _message(order_id, order_bytes(order_id)),
        "duplicate": _message(order_id, order_bytes(order_id)),
        "mismatch": _message(order_id, order_bytes(order_id, quantity=3)),
        "invalid": _message(order_id, INVALID_BODY),
    }
    results: dict[str, OutcomeRequests] = {}
    for scenario, message in scenarios.items():
        before = transport.snapshot()
        await standin.deliver(message)
        delta = transport.snapshot().minus(before)
        record = queue.settlement_log[-1]
        results[scenario] = OutcomeRequests(
            scenario=scenario,
            documents=delta.documents,
            total=delta.total,
            kinds=delta.kinds(),
            settlement=record.operation if record.ok else f"{record.operation} (failed)",
            reason=record.reason,
        )
    return {
        "outbox": standin.settings.outbox_enabled,
        "outcomes": {name: {**asdict(result), "ok": result.ok} for name, result in results.items()},
        "ok": all(result.ok for result in results.values()),
    }


async def count_two_phase_peer(standin: StandIn, order_id: str = "peer-order-1") -> dict[str, Any]:
    """The peer model's requests for a new order and its duplicate, on the same client."""
    peer = TwoPhaseIdempotency(standin.container)
    body = order_bytes(order_id)
    valid = parse_order(body, order_id)
    documents = build_documents(
        valid,
        IncomingMessage(order_id, body),
        outbox_enabled=standin.settings.outbox_enabled,
        accepted_at=datetime.now(UTC),
    )
    counts: dict[str, Any] = {}
    for scenario in ("new", "duplicate"):
        before: RequestSnapshot = standin.transport.snapshot()
        outcome = await peer.handle(documents, valid.request_hash)
        delta = standin.transport.snapshot().minus(before)
        counts[scenario] = {
            "documents": delta.documents,
            "outcome": outcome,
            "kinds": delta.kinds(),
        }
    return counts


async def run(standin: StandIn) -> dict[str, Any]:
    consumer = await count_outcomes(standin)
    peer = await count_two_phase_peer(standin)
    return {**consumer, "peer_two_phase": peer}
