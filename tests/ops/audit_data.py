"""The audit's inputs as the consumer and Service Bus produce them, for the audit's tests: an
accepted order and its outbox event (the core's own ``build_documents``), a dead letter, an
event seen on the subscription."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from idempotent_consumer import IncomingMessage

from local.standins.broker import ManualClock
from local.standins.doubles import InMemoryOrderStore
from ops.audit import SeenEvent
from ops.port import DeadLetter
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents, decide
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


def lifecycle(*deliveries: tuple[str | None, dict[str, Any], str]) -> list[dict[str, Any]]:
    """The documents the core writes for these deliveries ((Subject, body, MessageId), in this
    order) of one or more orders: the orders, their outbox events and inbox markers."""
    store = InMemoryOrderStore()
    clock = ManualClock(NOW)
    for subject, body, message_id in deliveries:
        raw = json.dumps(body).encode()
        asyncio.run(
            decide(IncomingMessage(message_id, raw, "c", 1, subject=subject), store, clock=clock)
        )
        clock.advance(timedelta(seconds=1))
    return list(store.documents.values())


def of_type(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in documents if d.get("type") == kind]


def seen_events(documents: list[dict[str, Any]]) -> list[SeenEvent]:
    """The outbox events as a subscription holds them once published, in version order."""
    events = sorted(of_type(documents, "outbox"), key=lambda d: d["payload"]["orderVersion"])
    return [
        SeenEvent(
            d["eventId"],
            d["orderId"],
            d["payload"].get("totalMinor"),
            d["payload"].get("customerId"),
            d["payload"]["orderVersion"],
            d["eventType"],
        )
        for d in events
    ]
