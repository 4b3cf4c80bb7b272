"""Target 11: what one SKU's logical partition holds in steady state, against its bound, and
how long it takes to reach Cosmos DB's 20 GB per logical partition at each tier.

A seeded mix of orders on one hot SKU (``HOT``, ``ON_HAND`` units, sold out early: most orders
are then backordered there) and a second SKU (``COLD``): each order is accepted wanting 1 to 3
of ``HOT`` (and at times ``COLD``), ``AMENDED`` of them amended later (another quantity, or
``HOT`` dropped for ``COLD``), ``CANCELLED`` of them cancelled later still; the events of
different orders interleave. Each event is decided by the kit (``shared.kit.consumer.decide``)
through the app's document store adapter (``CosmosDocumentStore``) and the production client,
against the local server's atomic transactional batch, in an ``inventory`` container of its own.

What is measured, in the ``HOT`` partition, halfway and at the end: every document, its bytes
the compact JSON the server returns (system fields included: a proxy for the item's stored size;
the index's share is not known here, docs/capacity.md), split by Cosmos DB's ttl rule into
**retained** (no positive ``ttl``: never expires) and **expiring** (a tombstone: gone
``RELEASED_TTL_S`` after its last write, learn.microsoft.com/azure/cosmos-db/nosql/time-to-live).
The local server keeps no ttl (its items are never removed), so nothing is deleted here: the
documents live after the burst are those the rule keeps at ``_ts + RELEASED_TTL_S``.

The bound (``shared.stock.inventory``): a SKU's partition is its stock item, at most ``onHand``
holding reservations, and the tombstones of the last ``RELEASED_TTL_S``: at most one per order
per SKU (a tombstone is the order's reservation document). In bytes, with the largest
reservation measured, ``stock + onHand x reservation + rate x RELEASED_TTL_S x reservation``.
The verdict: the retained bytes within the stock item and ``onHand`` reservations both halfway
and at the end (they do not grow with the orders received), no document of another kind (no
marker), and the steady state at the most orders per second one partition serves
(``PARTITION_ORDERS_PER_S``) within the bound and below 20 GB: the time to 20 GB at every tier
is then "never". It owns the mix and the counting, never the product's decisions.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import INBOX_TYPE, IncomingMessage, Outcome, decide
from idempotent_consumer.cosmos import CosmosDocumentStore

from bench.relay import tier_needs
from bench.stock import event
from local.standins.cosmos_server import ensure_container
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import (
    RELEASED_TTL_S,
    RESERVATION_TYPE,
    STOCK_ITEM_TYPE,
    order_partition,
    stock_item,
)

HOT, COLD = "HOT", "COLD"
ON_HAND = 50
AMENDED = 0.3
CANCELLED = 0.2
SEED = 11
MARKER_TTL_S = 28 * 86_400
NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
LOGICAL_PARTITION_BYTES = 20 * 1024**3  # learn.microsoft.com/azure/cosmos-db/concepts-limits
# The most orders per second one SKU's partition takes: a logical partition is served by one
# physical partition of at most 10,000 RU/s, and an event costs it about 12 RU (docs/capacity.md).
PARTITION_ORDERS_PER_S = 800


def mix(orders: int, prefix: str, rng: random.Random) -> list[IncomingMessage]:
    """The orders' events in arrival order: an acceptance at its order's turn, its amendment
    up to 20 turns later, its cancellation 20 to 40 turns later (module docstring)."""
    timed: list[tuple[float, int, IncomingMessage]] = []
    for number in range(orders):
        order_id = f"{prefix}-{number:06d}"
        lines = {HOT: rng.randint(1, 3)} | ({COLD: 1} if rng.random() < 0.3 else {})
        timed.append((number, 1, event(order_id, 1, lines)))
        version = 1
        if rng.random() < AMENDED:
            version = 2
            amended = {COLD: 2} if rng.random() < 0.5 else {HOT: rng.randint(1, 3)}
            timed.append((number + rng.uniform(0, 20), version, event(order_id, version, amended)))
        if rng.random() < CANCELLED:
            cancelled = event(order_id, version + 1, None, cancelled=True)
            timed.append((number + rng.uniform(20, 40), version + 1, cancelled))
    return [message for _, _, message in sorted(timed, key=lambda item: (item[0], item[1]))]


def _bytes(document: Mapping[str, Any]) -> int:
    return len(json.dumps(document, separators=(",", ":")).encode())


def _expires(document: Mapping[str, Any]) -> bool:
    ttl = document.get("ttl")
    return isinstance(ttl, int) and ttl > 0


def partition_summary(documents: Sequence[Mapping[str, Any]], at: float) -> dict[str, Any]:
    """One partition's documents: bytes retained and expiring, by kind; and what the ttl rule
    keeps ``RELEASED_TTL_S`` after ``at`` (the burst over)."""
    retained = [d for d in documents if not _expires(d)]
    expiring = [d for d in documents if _expires(d)]
    after = [d for d in documents if not _expires(d) or d["_ts"] + d["ttl"] > at + RELEASED_TTL_S]
    kinds: dict[str, int] = {}
    for document in documents:
        kind = str(document.get("type"))
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "documents": len(documents),
        "kinds": kinds,
        "retained_bytes": sum(map(_bytes, retained)),
        "retained_reservations": sum(d.get("type") == RESERVATION_TYPE for d in retained),
        "expiring_bytes": sum(map(_bytes, expiring)),
        "expiring_documents": len(expiring),
        "after_ttl_bytes": sum(map(_bytes, after)),
        "largest_bytes": max(map(_bytes, documents), default=0),
        "stock_bytes": sum(_bytes(d) for d in documents if d.get("type") == STOCK_ITEM_TYPE),
    }


async def _partition(container: Any, key: str) -> list[dict[str, Any]]:
    """Every document of one logical partition (a filter on its key: the local server does not
    serve an async query scoped by ``partition_key``)."""
    query = "SELECT * FROM c WHERE c.sku = @key"
    parameters = [{"name": "@key", "value": key}]
    return [item async for item in container.query_items(query, parameters=parameters)]


async def measure(client: Any, database: str, *, orders: int) -> dict[str, Any]:
    """``orders`` orders of the mix through the SDK (module docstring); the partition halfway
    and at the end, the bound, the steady state per tier."""
    name = f"inventory-{uuid.uuid4().hex[:8]}"
    container = await ensure_container(client, database, name, "/sku")
    prefix = f"st-{uuid.uuid4().hex[:6]}"
    messages = mix(orders, prefix, random.Random(SEED))
    halfway = f"{prefix}-{orders // 2:06d}:v1"  # the acceptance of the middle order
    try:
        await container.create_item(stock_item(HOT, ON_HAND))
        await container.create_item(stock_item(COLD, 1_000_000))
        store = CosmosDocumentStore(container)
        outcomes: dict[str, int] = {}
        middle: dict[str, Any] = {}
        started = time.perf_counter()
        for message in messages:
            if message.message_id == halfway:
                middle = partition_summary(await _partition(container, HOT), time.time())
            decision = await decide(
                stock_reservation, message, store, marker_ttl_s=MARKER_TTL_S, now=NOW
            )
            outcomes[decision.outcome.value] = outcomes.get(decision.outcome.value, 0) + 1
        run_s = time.perf_counter() - started
        end = partition_summary(await _partition(container, HOT), time.time())
        order_partitions = [
            sum(map(_bytes, await _partition(container, order_partition(f"{prefix}-{n:06d}"))))
            for n in range(0, orders, max(1, orders // 50))
        ]
    finally:
        await client.get_database_client(database).delete_container(name)
    return summarise(orders, len(messages), outcomes, middle, end, order_partitions, run_s)


def summarise(
    orders: int,
    events: int,
    outcomes: Mapping[str, int],
    halfway: Mapping[str, Any],
    end: Mapping[str, Any],
    order_partitions: Sequence[int],
    run_s: float,
) -> dict[str, Any]:
    """The figures, the bound and the verdict (module docstring)."""
    reservation_bytes = end["largest_bytes"]
    retained_bound = end["stock_bytes"] + ON_HAND * reservation_bytes
    # Bytes per order that live RELEASED_TTL_S after their last write: at most one tombstone
    # per order in the SKU (measured: the tombstones left by the orders received).
    expiring_per_order = end["expiring_bytes"] / orders
    growth_per_order = (end["retained_bytes"] - halfway["retained_bytes"]) / (orders / 2)

    def steady(rate: float) -> float:
        return float(end["retained_bytes"] + rate * RELEASED_TTL_S * expiring_per_order)

    def bound(rate: float) -> float:
        return float(retained_bound + rate * RELEASED_TTL_S * reservation_bytes)

    tiers = {}
    for tier, need in tier_needs().items():
        # Every order of the tier on one SKU, as far as one partition takes them.
        rate = min(need["orders_per_s"], PARTITION_ORDERS_PER_S)
        tiers[tier] = {
            "orders_per_s": need["orders_per_s"],
            "sku_orders_per_s": rate,
            "steady_bytes": steady(rate),
            "bound_bytes": bound(rate),
            "to_20_gb": "never" if bound(rate) < LOGICAL_PARTITION_BYTES else "bounded above",
        }
    foreign = {
        kind: count
        for kind, count in end["kinds"].items()
        if kind not in (STOCK_ITEM_TYPE, RESERVATION_TYPE)
    }
    problems = []
    if outcomes.get(Outcome.PROCESSED.value, 0) != events:
        problems.append(f"not every event was processed: {dict(outcomes)}")
    if foreign:
        problems.append(f"documents of another kind in the SKU's partition: {foreign}")
    if INBOX_TYPE in end["kinds"]:
        problems.append("markers in the SKU's partition")
    within = (
        halfway["retained_bytes"] <= retained_bound
        and end["after_ttl_bytes"] <= retained_bound
        and steady(PARTITION_ORDERS_PER_S) <= bound(PARTITION_ORDERS_PER_S)
        and bound(PARTITION_ORDERS_PER_S) < LOGICAL_PARTITION_BYTES
    )
    return {
        "orders": orders,
        "events": events,
        "on_hand": ON_HAND,
        "released_ttl_s": RELEASED_TTL_S,
        "outcomes": dict(outcomes),
        "halfway": dict(halfway),
        "end": dict(end),
        "reservation_bytes": reservation_bytes,
        "retained_bound_bytes": retained_bound,
        "retained_growth_per_order": growth_per_order,
        "expiring_bytes_per_order": expiring_per_order,
        "partition_orders_per_s": PARTITION_ORDERS_PER_S,
        "steady_bytes_at_partition_rate": steady(PARTITION_ORDERS_PER_S),
        "bound_bytes_at_partition_rate": bound(PARTITION_ORDERS_PER_S),
        "order_partition_bytes": {
            "mean": sum(order_partitions) / max(1, len(order_partitions)),
            "max": max(order_partitions, default=0),
        },
        "tiers": tiers,
        "run_s": run_s,
        "problems": problems,
        "ok": within and not problems,
    }
