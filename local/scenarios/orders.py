"""The orders in ``make demo`` and ``make chaos``: a seeded producer's stream through the
peek-lock queue to ``consume_order``, with realistic trouble, and the table of invariants over
what it left.

- ``plan``: what the producer will send, decided up front from the seed: the orders; producer
  retries, most inside the duplicate-detection window (dropped by the broker), some a day later
  (completed as duplicates); the same order id with another body after the window
  (dead-lettered ``HashMismatch``); poison (no id, not JSON, wrong schema, wrong version, id
  mismatch, too large); the lifecycles ``make chaos`` mixes in (``local.scenarios.lifecycle``),
  two of them with their order of arrival pinned (``send_after_stream``);
  and which deliveries get trouble: a crash after the commit, before the settlement reaches
  the broker (the redelivery is a duplicate), or a lock that expires while the delivery is
  still writing (a second delivery runs concurrently; one writes, the other sees a duplicate;
  ``local.scenarios.deliveries.Trouble`` applies it);
- ``orders_rows`` and ``orders_figures``: the table (``local.scenarios.invariants``: the live
  audit's, ``ops.audit.audit``, over the run's documents, dead letters and the events a
  downstream subscription received; the demo's expectations, with ``ops.audit``'s functions;
  the stand-in's own figures) and the figures above it.

Never imports the runner (``local.scenarios.demo``), which sends the plan and drives the phases.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from idempotent_consumer import MAX_BODY_BYTES

from local.scenarios.deliveries import OutcomeLog
from local.scenarios.invariants import (
    AUDIT,
    DEMO,
    STAND_IN,
    Expected,
    Row,
    expectations,
    flow_invariants,
    operator_audit_agrees,
    outbox_off,
)
from local.scenarios.lifecycle import LifecycleMix, converged, mix, published_in_order
from local.scenarios.options import DemoOptions
from local.scenarios.tool_runs import ToolRun
from local.standins.broker import OutgoingMessage, PeekLockQueue
from ops.audit import NO_ORDER_LOST, AuditData, Invariant
from ops.sample_orders import random_order
from shared.consumer.contract import (
    ORDER_ACCEPTED_EVENT_TYPE,
    ORDER_AMENDED,
    ORDER_CANCELLED,
    parse_order,
)

POISON_KINDS = {
    "no-message-id": "MissingMessageId",
    "not-json": "InvalidPayload",
    "schema": "InvalidPayload",
    "version": "UnsupportedSchemaVersion",
    "id-mismatch": "MessageIdMismatch",
    "too-large": "PayloadTooLarge",
}
# A subscription the demo adds for downstream (it receives and completes what it is sent), so
# the Bicep's ``retained`` subscription keeps every event for the audit's peek.
# A subscription the demo adds for downstream (it receives and completes what it is sent), so
# the Bicep's ``retained`` subscription keeps every event for the audit's peek.
DOWNSTREAM_SUBSCRIPTION = "downstream"


@dataclass
class Plan:
    """What the producer will do, decided up front from the seed."""

    bodies: dict[str, bytes]
    early_retries: list[str]
    late_retries: list[str]
    crash: set[str]
    lock_expiry: set[str]
    mismatches: dict[str, bytes]
    poison: list[tuple[str, OutgoingMessage]]
    lifecycles: LifecycleMix = field(default_factory=LifecycleMix)
    hot_sku_orders: list[str] = field(default_factory=list)  # the bursts' orders, in order


# One SKU many orders want at once (``hot_sku_bursts``): not one ``random_order`` draws.
HOT_SKU = "SKU-HOT"


def plan(options: DemoOptions) -> Plan:
    rng = random.Random(options.seed)
    start = datetime(2026, 11, 29, 8, 0, tzinfo=timezone(timedelta(hours=1)))
    bodies: dict[str, bytes] = {}
    for index in range(options.orders):
        order_id = f"ord-{options.seed}-{index:05d}"
        placed = start + timedelta(seconds=17 * index)
        bodies[order_id] = json.dumps(random_order(rng, order_id, placed)).encode()
    hot = hot_sku_bursts(bodies, options)
    ids = list(bodies)

    def pick(rate: float) -> list[str]:
        return [order_id for order_id in ids if rng.random() < rate]

    retried = pick(options.duplicate_rate)
    late = {order_id for order_id in retried if rng.random() < 0.25}
    lifecycles = mix(bodies, options.lifecycle_rate, options.seed)
    # Two orders' order of arrival pinned, whatever the timing: none whose OrderPlaced is retried.
    lifecycles.pin_order_of_arrival(set(retried))
    mismatches: dict[str, bytes] = {}
    # Not for an id that also has a late retry: both are sent a day later, and the broker's
    # duplicate detection would (rightly) drop the second one. Nor for an order with a
    # lifecycle: created by a change that came first, its other OrderPlaced would be stale.
    for order_id in (
        i for i in pick(options.mismatch_rate) if i not in late and i not in lifecycles.histories
    ):
        changed = json.loads(bodies[order_id])
        changed["lines"][0]["quantity"] += 1
        mismatches[order_id] = json.dumps(changed).encode()
    poison: list[tuple[str, OutgoingMessage]] = []
    kinds = list(POISON_KINDS)
    for number in range(round(options.orders * options.poison_rate)):
        kind = kinds[number % len(kinds)]
        poison.append((kind, _poison(kind, f"bad-{options.seed}-{number:04d}", rng, start)))
    changes = sorted(lifecycles.message_ids)
    trouble = random.Random(f"{options.seed}-lifecycle-trouble")
    return Plan(
        bodies=bodies,
        early_retries=[order_id for order_id in retried if order_id not in late],
        late_retries=sorted(late),
        crash=set(pick(options.crash_rate))
        | {i for i in changes if trouble.random() < options.crash_rate},
        lock_expiry=set(pick(options.lock_expiry_rate))
        | {i for i in changes if trouble.random() < options.lock_expiry_rate},
        mismatches=mismatches,
        poison=poison,
        lifecycles=lifecycles,
        hot_sku_orders=hot,
    )


def hot_sku_bursts(bodies: dict[str, bytes], options: DemoOptions) -> list[str]:
    """``options.hot_sku_bursts`` runs of ``options.hot_sku_burst`` orders next to each other in
    the stream, each of them given a line of ``HOT_SKU`` (in place, from an RNG of its own: the
    rest of the plan is drawn as without them). Sent together, their events reach the stock
    reservation together: every one of them a conditional write on that SKU's stock item, in
    one logical partition. Returns the bursts' order ids."""
    rng = random.Random(f"{options.seed}-hot-sku")
    ids = list(bodies)
    size = min(options.hot_sku_burst, len(ids))
    if options.hot_sku_bursts <= 0 or size <= 0:
        return []
    stride = len(ids) // options.hot_sku_bursts
    chosen: list[str] = []
    for burst in range(options.hot_sku_bursts):
        first = burst * stride + rng.randrange(0, max(1, stride - size + 1))
        for order_id in ids[first : first + size]:
            if order_id in chosen:
                continue
            order = json.loads(bodies[order_id])
            line = {"sku": HOT_SKU, "quantity": rng.randrange(1, 4), "unitPriceMinor": 1999}
            order["lines"] = [*order["lines"], line]
            bodies[order_id] = json.dumps(order).encode()
            chosen.append(order_id)
    return chosen


def _poison(kind: str, message_id: str, rng: random.Random, start: datetime) -> OutgoingMessage:
    valid = random_order(rng, message_id, start)
    if kind == "no-message-id":
        return OutgoingMessage(message_id=None, body=json.dumps(valid).encode())
    if kind == "not-json":
        return OutgoingMessage(message_id=message_id, body=b"<order id='" + message_id.encode())
    if kind == "schema":
        valid["lines"] = []
    elif kind == "version":
        valid["schemaVersion"] = 2
    elif kind == "id-mismatch":
        return OutgoingMessage(message_id=message_id + "-x", body=json.dumps(valid).encode())
    elif kind == "too-large":
        valid["notes"] = "x" * MAX_BODY_BYTES
    return OutgoingMessage(message_id=message_id, body=json.dumps(valid).encode())


def extra_orders(options: DemoOptions, tag: str, count: int) -> dict[str, bytes]:
    """A later phase's orders (``ord-<seed>-<tag><n>``), from an RNG of their own (the plan of
    phases 1 and 2 is unchanged)."""
    rng = random.Random(f"{options.seed}-{tag}")
    placed = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
    return {
        f"ord-{options.seed}-{tag}{index:03d}": json.dumps(
            random_order(rng, f"ord-{options.seed}-{tag}{index:03d}", placed)
        ).encode()
        for index in range(count)
    }


def send_stream(the_plan: Plan, queue: PeekLockQueue) -> None:
    """Phase 1: the stream (a lifecycle in its permutation), immediate producer retries,
    poison."""
    lifecycles = the_plan.lifecycles
    for order_id, body in the_plan.bodies.items():
        for message in lifecycles.sends.get(order_id, []):
            queue.send(message)
        if order_id not in lifecycles.sends:
            queue.send(OutgoingMessage(order_id, body, correlation_id=f"checkout-{order_id}"))
    for order_id in the_plan.early_retries:
        queue.send(OutgoingMessage(order_id, the_plan.bodies[order_id], correlation_id="retry"))
    for _, message in the_plan.poison:
        queue.send(message)


def send_after_stream(the_plan: Plan, queue: PeekLockQueue) -> bool:
    """Phase 1, once the stream is consumed: the messages the lifecycles held back to pin two
    orders' order of arrival (``LifecycleMix.pin_order_of_arrival``). Whether any was sent."""
    for message in the_plan.lifecycles.after_stream:
        queue.send(message)
    return bool(the_plan.lifecycles.after_stream)


def send_a_day_later(the_plan: Plan, queue: PeekLockQueue) -> None:
    """Phase 2, after the duplicate-detection window: late retries (duplicates), mismatches
    (another body), the lifecycles' late copies."""
    for order_id in the_plan.late_retries:
        queue.send(OutgoingMessage(order_id, the_plan.bodies[order_id], correlation_id="late"))
    for order_id, body in the_plan.mismatches.items():
        queue.send(OutgoingMessage(order_id, body, correlation_id="changed"))
    for message in the_plan.lifecycles.late:
        queue.send(message)


def orders_figures(data: AuditData, queue: PeekLockQueue, log: OutcomeLog) -> dict[str, int]:
    """The orders' figures: the queue's, the consumer's outcomes, the documents and events."""
    stats = queue.stats
    stored = Counter(str(d.get("orderId")) for d in data.orders)
    return {
        "sent": stats.sent,  # every send, including those duplicate detection dropped
        "dropped by duplicate detection": stats.dropped_duplicates,
        "deliveries": stats.deliveries,
        "processed": log.outcomes["processed"],
        "duplicates": log.outcomes["duplicate"],
        "dead-lettered": stats.dead_lettered,
        "abandoned": stats.abandoned,
        "settlements lost (crash / lock expiry)": log.settlement_failures,
        "in-delivery retries": log.retries,
        "order documents": len(data.orders),
        "outbox documents": len(data.outbox),
        "duplicate order documents": sum(stored.values()) - len(stored),
        "OrderAccepted delivered to the subscription": sum(
            e.event_type in (None, ORDER_ACCEPTED_EVENT_TYPE) for e in data.events or []
        ),
        "OrderAmended and OrderCancelled delivered": sum(
            e.event_type in (ORDER_AMENDED, ORDER_CANCELLED) for e in data.events or []
        ),
        "stale": log.outcomes["stale"],
    }


def orders_rows(
    the_plan: Plan,
    data: AuditData,
    *,
    now: datetime,
    outbox_enabled: bool,
    phases: Sequence[Invariant],
    operator_audit: ToolRun,
    stand_in: Sequence[Invariant],
) -> list[Row]:
    """The orders' table: ``ops.audit``'s over the run's data, the demo's expectations (and,
    when lifecycles were mixed in, their convergence), the phases' claims, the operator's audit
    agreeing, the stand-in's own figures."""
    flow = flow_invariants(data, now=now, outbox_enabled=outbox_enabled)
    demo = expectations(data, expected(the_plan))
    if the_plan.lifecycles.histories:  # make chaos: the lifecycles it mixed in converged
        highest = the_plan.lifecycles.highest
        demo += [converged(data.orders, highest), published_in_order(data.events or [], highest)]
    agreement = operator_audit_agrees(flow, data, operator_audit)
    return [
        *(Row(invariant, AUDIT) for invariant in flow),
        *([] if outbox_enabled else [Row(outbox_off(data), DEMO)]),
        *(Row(invariant, DEMO) for invariant in [*demo, *phases, agreement]),
        *(Row(invariant, STAND_IN) for invariant in stand_in),
    ]


def expected(the_plan: Plan) -> Expected:
    """What the plan sent, which a live audit cannot know."""
    return Expected(
        request_hashes={
            order_id: parse_order(body, order_id).request_hash
            for order_id, body in the_plan.bodies.items()
        },
        mismatches=set(the_plan.mismatches),
        poison=[(message.message_id, POISON_KINDS[kind]) for kind, message in the_plan.poison],
        lifecycle_orders=set(the_plan.lifecycles.histories),
        lifecycle_messages=the_plan.lifecycles.message_ids,
    )


def lost_orders(rows: Sequence[Row]) -> int:
    """The figure "lost valid orders": the offending ids of ``NO_ORDER_LOST``'s row."""
    return sum(len(row.invariant.offending) for row in rows if row.invariant.name == NO_ORDER_LOST)
