"""The demo's table of invariants, with one definition of each: ``ops.audit``'s.

Every row says who checks it (``Row.checked_by``):

- ``audit``: ``ops.audit.audit``, the function ``python -m ops audit`` runs on a live deployment,
  here over the demo's own data: every document of its container, the broker model's dead-letter
  sub-queue, and the OrderAccepted messages a downstream subscription received. Nothing may be
  pending at all (grace 0): the demo checks once its relay is idle;
- ``demo``: what only the demo can check, because it sent every message: each valid order stored
  as it was sent, each mismatch and poison message dead-lettered with its reason and no valid
  order dead-lettered (``ops.audit``'s functions that take expectations), and the claims of its
  phases (the watchdog's, the parked events', and that ``python -m ops audit`` over the same
  data says what this table says: ``operator_audit_agrees``);
- ``stand-in``: the stand-in's own figures, not invariants of the flow (a live deployment has no
  such figure to audit): its queue drained, no invocation of its host failed.

Reads nothing: the demo hands it what it read (``demo_data``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from idempotent_consumer import is_marker

from local.scenarios.tool_runs import ToolRun
from local.standins.broker import DeadLetteredMessage, OutgoingMessage
from ops.audit import (
    NO_EVENT_FOR_REJECTED,
    NOTHING_PENDING,
    ONE_EVENT_PER_ORDER,
    AuditData,
    Invariant,
    SeenEvent,
    audit,
    dead_lettered_as,
    no_dead_letter_for,
    no_order_lost,
    orders_are_the_requests,
)
from ops.port import DeadLetter
from shared.consumer.order import ORDER_TYPE
from shared.relay.outbox import STATUS_PARKED, STATUS_PENDING, OutboxField, is_outbox

AUDIT, DEMO, STAND_IN = "audit", "demo", "stand-in"
# Without an outbox nothing is published: these live invariants do not apply (``outbox_off``).
OUTBOX_INVARIANTS = frozenset({ONE_EVENT_PER_ORDER, NO_EVENT_FOR_REJECTED, NOTHING_PENDING})
# What ``python -m ops audit --json`` reports it read, against what the demo read.
READ_FIGURES = {
    "orders": "orders",
    "outboxEvents": "outbox events",
    "markers": "inbox markers",
    "deadLetters": "dead letters",
    "deliveredEvents": "delivered events",
}


@dataclass(frozen=True)
class Row:
    invariant: Invariant
    checked_by: str  # AUDIT, DEMO or STAND_IN


@dataclass(frozen=True)
class Expected:
    """What the demo sent, which a live audit cannot know."""

    request_hashes: Mapping[str, str]  # each valid order id -> the fingerprint of its body
    mismatches: Collection[str]  # ids sent again, a day later, with another body
    poison: Sequence[tuple[str | None, str]]  # (MessageId, reason) of each poison message
    # make chaos: orders with a lifecycle mixed in (stored at their highest version, perhaps
    # created by a change: not the original request), and the MessageIds of their changes.
    lifecycle_orders: Collection[str] = ()
    lifecycle_messages: Collection[str] = ()


def demo_data(
    documents: Iterable[Mapping[str, Any]],
    dead_letters: Iterable[DeadLetteredMessage],
    delivered: Iterable[OutgoingMessage] | None,
) -> AuditData:
    """The demo's data as the audit reads it: every document of the container (the demo's own
    container, so no window), the model's dead letters, the messages downstream received
    (None: none read)."""
    documents = list(documents)
    orders = [dict(d) for d in documents if d.get(OutboxField.TYPE) == ORDER_TYPE]
    outbox = [dict(d) for d in documents if is_outbox(d)]
    return AuditData(
        orders=orders,
        outbox=outbox,
        stuck=[d for d in outbox if d.get(OutboxField.STATUS) in (STATUS_PARKED, STATUS_PENDING)],
        referenced={},
        dead_letters=[
            DeadLetter(
                x.sequence_number,
                x.message.message_id,
                x.enqueued_time or x.dead_lettered_at,
                x.delivery_count,
                x.reason,
                x.description,
                x.message.body,
            )
            for x in dead_letters
        ],
        events=None
        if delivered is None
        else [SeenEvent.from_body(m.message_id, m.body) for m in delivered],
        markers=[dict(d) for d in documents if is_marker(d)],
    )


def flow_invariants(
    data: AuditData, *, now: datetime, outbox_enabled: bool = True
) -> list[Invariant]:
    """``ops.audit.audit`` over the demo's data; with the outbox off, without those about
    events (``outbox_off`` checks that there are none)."""
    checked = audit(data, now=now, pending_grace=timedelta(0))
    return checked if outbox_enabled else [i for i in checked if i.name not in OUTBOX_INVARIANTS]


def outbox_off(data: AuditData) -> Invariant:
    """``--no-outbox``: the order is written alone, so there is nothing to publish."""
    events = data.events or []
    return Invariant(
        "no outbox event and no OrderAccepted (outbox off)",
        not data.outbox and not events,
        sorted(
            {str(d.get(OutboxField.ORDER_ID)) for d in data.outbox}
            | {str(e.order_id) for e in events}
        ),
        f"{len(data.outbox)} outbox events, {len(events)} delivered",
    )


def expectations(data: AuditData, expected: Expected) -> list[Invariant]:
    """What the demo meant, with ``ops.audit``'s functions: no valid order lost, each stored as
    sent (and no other; an order with a lifecycle is its highest version's:
    ``local.scenarios.lifecycle.converged``), each mismatch and poison message dead-lettered
    exactly with its reason, no other valid order or change dead-lettered at all."""
    mismatches = set(expected.mismatches)
    changed = set(expected.lifecycle_orders)
    return [
        no_order_lost(data.orders, expected.request_hashes),
        orders_are_the_requests(
            [d for d in data.orders if str(d.get("orderId")) not in changed],
            {i: h for i, h in expected.request_hashes.items() if i not in changed},
        ),
        dead_lettered_as(
            data.dead_letters,
            [(order_id, "HashMismatch") for order_id in sorted(mismatches)],
            "every mismatch dead-lettered HashMismatch",
        ),
        dead_lettered_as(
            data.dead_letters, expected.poison, "every poison message dead-lettered with its reason"
        ),
        no_dead_letter_for(
            data.dead_letters,
            (set(expected.request_hashes) - mismatches) | set(expected.lifecycle_messages),
        ),
    ]


def stand_in_checks(
    *, active_messages: int, failed_invocations: int, errors: Sequence[str]
) -> list[Invariant]:
    """The stand-in's own figures: its queue model holds nothing undelivered or locked, and its
    host saw no invocation fail (a live deployment's are the alerts of docs/operations.md)."""
    return [
        Invariant("queue drained", active_messages == 0, [], f"{active_messages} still active"),
        Invariant(
            "no invocation failed",
            failed_invocations == 0,
            [],
            "; ".join(errors[:3]) or "none",
        ),
    ]


def operator_audit_agrees(
    flow: Sequence[Invariant], data: AuditData, audited: ToolRun
) -> Invariant:
    """``python -m ops audit ... --json`` over the demo's data, run when the table is read,
    says what this table says: for each of the table's ``flow`` invariants the same verdict and
    offending ids, and it read what the demo read (as many orders, outbox events, dead letters
    and delivered events), so an audit that reads too little cannot agree by passing over
    nothing."""
    name = "python -m ops audit agrees with this table"
    try:
        report = json.loads(audited.output)
    except ValueError:
        return Invariant(name, False, [], f"exit {audited.exit_status}: {audited.output[:200]}")
    rows = {str(row["name"]): row for row in report.get("invariants", [])}
    differ = sorted(
        i.name
        for i in flow
        if i.name not in rows
        or (rows[i.name].get("verdict"), rows[i.name].get("offending")) != (i.verdict, i.offending)
    )
    ours = {
        "orders": len(data.orders),
        "outboxEvents": len(data.outbox),
        "markers": len(data.markers),
        "deadLetters": len(data.dead_letters),
        "deliveredEvents": None if data.events is None else len(data.events),
    }
    read = report.get("read", {})
    misread = [
        f"{k} {read.get(k)}, table {ours[k]}" for k in READ_FIGURES if read.get(k) != ours[k]
    ]
    if differ or misread:
        found = [*(f"differs on {n!r}" for n in differ), *(f"read {m}" for m in misread)]
        return Invariant(name, False, differ, "; ".join(found))
    counts = ", ".join(f"{ours[k]} {label}" for k, label in READ_FIGURES.items())
    return Invariant(name, True, [], f"the same verdicts and ids, having read {counts}")
