"""Target 1: Cosmos DB requests per outcome, counted at the transport, through the real function.

Each path is one delivery through the stand-in's host, the real function, the app's Cosmos DB
adapter and the real azure-cosmos client against the local server (whose transactional batch is
atomic, with patch and filter predicates); the counting transport sees every request the SDK
sends. The client is warmed up first (an order of another id), so the SDK's one-off metadata reads
are not charged to a message; a metadata request during a path would still show in ``total``.

The floor is one request per applied message. Each path's verdict is its expected count (the
docs/lifecycle.md's table: an applied OrderPlaced or change 1, a change before its order 2, a
duplicate or mismatch 2, a stale change or OrderPlaced 3, an InvalidTransition 2: the refused
batch and the order's read), its settlement, and the outcome the consumer logged for it. The
paths run in one fixed sequence on two orders, each message's cost measured alone; it owns the
sequence and the counting, never the product's decisions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench.orders import INVALID_BODY, amended, cancelled, message, order_bytes
from bench.standin import StandIn
from local.standins.broker import OutgoingMessage
from shared.telemetry.names import LOGGER_NAME

# The floor: one request per applied message (the write that is the message's effect).
FLOOR = 1


@dataclass(frozen=True)
class Path:
    """One lifecycle path: the message that takes it and what it must cost and end in."""

    sent: OutgoingMessage
    requests: int
    outcome: str  # as the consumer logs it (``Outcome``)
    settlement: str = "complete"
    reason: str | None = None


def paths(order_id: str) -> dict[str, Path]:
    """Delivered in this order: each path finds the state the earlier ones left. ``order_id``
    is placed, amended (v2) and cancelled (v3); ``{order_id}-early`` gets its amendment before
    its OrderPlaced."""
    early = f"{order_id}-early"
    mismatch = ("dead_letter", "HashMismatch")
    return {
        "new": Path(message(order_id), 1, "processed"),
        "duplicate": Path(message(order_id), 2, "duplicate"),
        "mismatch": Path(
            message(order_id, order_bytes(order_id, quantity=3)), 2, "mismatch", *mismatch
        ),
        "invalid": Path(
            message(order_id, INVALID_BODY), 0, "invalid", "dead_letter", "InvalidPayload"
        ),
        "amended": Path(amended(order_id, 2), 1, "processed"),
        "change duplicate": Path(amended(order_id, 2), 2, "duplicate"),
        "change mismatch": Path(amended(order_id, 2, quantity=4), 2, "mismatch", *mismatch),
        # A producer's retry under a new MessageId: a first delivery of the applied version.
        "stale change": Path(amended(order_id, 2, message_id=f"{order_id}:v2:retry"), 3, "stale"),
        "cancelled": Path(cancelled(order_id, 3), 1, "processed"),
        "InvalidTransition": Path(
            amended(order_id, 4), 2, "invalid", "dead_letter", "InvalidTransition"
        ),
        "change before order": Path(amended(early, 2), 2, "processed"),
        "stale OrderPlaced": Path(message(early), 3, "stale"),
    }


EXPECTED = {name: path.requests for name, path in paths("expected").items()}


class _Outcomes(logging.Handler):
    """The outcome of each delivery, from the consumer's one log record per delivery (the record
    the exporter ships; ``shared.telemetry.consumer``)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        outcome = getattr(record, "outcome", None)
        if outcome is not None and not hasattr(record, "settlement_error"):
            self.seen.append(str(outcome))


@contextlib.contextmanager
def _logged_outcomes() -> Iterator[_Outcomes]:
    logger = logging.getLogger(LOGGER_NAME)
    handler = _Outcomes()
    level = logger.level
    logger.setLevel(logging.INFO)  # the bench raises the root's level to ERROR
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def count_outcomes(standin: StandIn, order_id: str = "bench-order-1") -> dict[str, Any]:
    """Deliver each path's message in turn; return the requests each cost, against its expected
    count and the floor, and how each was settled and classified."""
    await standin.deliver(message(f"{order_id}-warmup"))
    outcomes: dict[str, dict[str, Any]] = {}
    with _logged_outcomes() as logged:
        for name, path in paths(order_id).items():
            before = standin.transport.snapshot()
            seen = len(logged.seen)
            await standin.deliver(path.sent)
            delta = standin.transport.snapshot().minus(before)
            record = standin.queue.settlement_log[-1]
            settlement = record.operation if record.ok else f"{record.operation} (failed)"
            outcome = ", ".join(logged.seen[seen:]) or "none logged"
            outcomes[name] = {
                "message_type": path.sent.subject or "OrderPlaced",
                "outcome": outcome,
                "documents": delta.documents,
                "expected": path.requests,
                "floor_ratio": delta.documents / FLOOR,
                "total": delta.total,
                "kinds": delta.kinds(),
                "settlement": settlement,
                "reason": record.reason,
                "ok": delta.documents == path.requests
                and delta.total == delta.documents
                and (settlement, record.reason) == (path.settlement, path.reason)
                and outcome == path.outcome,
            }
    return {
        "outbox": standin.settings.outbox_enabled,
        "floor": FLOOR,
        "outcomes": outcomes,
        "ok": all(outcome["ok"] for outcome in outcomes.values()),
    }
