"""The audit's inputs as the consumer and Service Bus produce them, for the audit's tests: an
accepted order and its outbox event (the core's own ``build_documents``), a dead letter, an
event seen on the subscription."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ops.audit import SeenEvent
from ops.port import DeadLetter
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.kit.decision import IncomingMessage
from tests.orders import order_body

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def accepted(order_id: str, **overrides: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """An order and its outbox event, as the consumer writes them."""
    raw = json.dumps(order_body(order_id, **overrides)).encode()
    order, event = build_documents(
        parse_order(raw, order_id),
        IncomingMessage(order_id, raw),
        outbox_enabled=True,
        accepted_at=NOW,
    )
    return order, event


def letter(message_id: str | None, reason: str, sequence: int = 1) -> DeadLetter:
    return DeadLetter(sequence, message_id, NOW, 10, reason, None, b"{}")


def seen_event(order: dict[str, Any], **changes: Any) -> SeenEvent:
    """The order's event as the subscription holds it; ``changes`` alter its payload."""
    return SeenEvent(
        "e-" + order["orderId"],
        order["orderId"],
        changes.get("total_minor", order["totalMinor"]),
        changes.get("customer_id", order["customerId"]),
    )
