"""Target 9: the stock reservation consumer (``shared.stock``): Cosmos DB requests per event and
per SKU for each path, counted at the transport, and the kit's CPU per event against the SDK's.

Requests: each path's event is decided by the kit (``shared.kit.consumer.decide``) through the
app's document store adapter (``CosmosDocumentStore``) and the production client
(``create_client``) on the stand-in's counting transport, against the local server's atomic
transactional batch, in an ``inventory`` container of its own (``/sku``). Not through the
function: ``reserve_stock`` is wired by another change; the requests are the adapter's either
way. Each request is told by its partition key header (``x-ms-documentdb-partitionkey``,
azure/cosmos/_base.py) as the order's index (``order:<id>``) or a SKU's. The floor: one batch
per SKU the event touches plus one request for the index; each path's expected count is what
``shared.stock.effects`` says it costs, and its verdict is that count, met exactly.

CPU: ``decide`` for new ``OrderAccepted`` events of two lines on stocked SKUs, over the kit's
in-memory store in its benchmark mode (no copies, no request log), CPU time of this thread per
event, against the SDK's process CPU for one ``create_item`` (``bench.cpu.create_item_cpu_us``)
times the event's floor requests (three: the index and two SKUs): what the kit adds to the
requests it makes, as target 2 compares the order consumer with its one create.

It owns the sequence and the counting, never the product's decisions.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import IncomingMessage, decide
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore

from bench import cpu
from bench.transport import CountingTransport
from local.standins.cosmos_server import ensure_container
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import STOCK_ITEM_ID, order_partition, stock_item

TARGET_SHARE = 0.10  # the kit's CPU per event ≤ 10% of the SDK's for its floor requests
MARKER_TTL_S = 600
NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
INDEX = "index"


def event(
    order_id: str,
    version: int,
    lines: Mapping[str, int] | None,
    *,
    cancelled: bool = False,
    event_id: str | None = None,
) -> IncomingMessage:
    """An order event as the relay publishes it (docs/events.md), the lines as the stock
    reservation reads them."""
    event_type = (
        "OrderCancelled" if cancelled else "OrderAccepted" if version == 1 else "OrderAmended"
    )
    payload: dict[str, Any] = {"orderId": order_id, "orderVersion": version}
    if not cancelled:
        payload["lines"] = [
            {"sku": sku, "quantity": quantity, "unitPriceMinor": 1250}
            for sku, quantity in (lines or {}).items()
        ]
    body: dict[str, Any] = {
        "schemaVersion": 1,
        "eventId": event_id or f"{order_id}:v{version}",
        "eventType": event_type,
        "occurredAt": "2026-12-01T10:00:00.000000Z",
        "payload": payload,
    }
    return IncomingMessage(body["eventId"], json.dumps(body).encode(), subject=event_type)


@dataclass(frozen=True)
class Path:
    """One path: its event, the SKUs it touches, and what it must cost and end in."""

    sent: IncomingMessage
    skus: int  # SKU partitions the event reaches
    index_requests: int
    sku_requests: int  # in each SKU it reaches
    outcome: str

    @property
    def expected(self) -> int:
        return self.index_requests + self.skus * self.sku_requests


def paths(order_id: str) -> dict[str, Path]:
    """Delivered in this order, on SKUs A, B, C (stocked 100) and S (stocked 1): each path finds
    what the earlier ones left. The costs are ``shared.stock.effects``'s."""
    other = f"{order_id}-2"
    return {
        # The index created blind with its marker; each SKU one batch: the floor.
        "accepted": Path(event(order_id, 1, {"A": 2, "B": 1}), 2, 1, 1, "processed"),
        # The index read and patched; each SKU of either version one batch, from what the index
        # read says its reservation holds (A 2, B 1, C none): the floor in every SKU.
        "amendment": Path(event(order_id, 2, {"A": 3, "C": 1}), 3, 2, 1, "processed"),
        # Every SKU the order ever wanted released, each in one batch (A 3, C 1, B v2's tombstone).
        "cancellation": Path(event(order_id, 3, None, cancelled=True), 3, 2, 1, "processed"),
        # S has 1 free for 3 wanted: the refused batch, the stock item's read, a second batch.
        "shortfall": Path(event(other, 1, {"S": 3}), 1, 1, 3, "processed"),
        # The index's batch refused on its marker, the marker read, read once more to learn
        # that the first delivery passed it, and the index read to find it still at this
        # version; in the SKU, a read that finds the reservation at this version (no marker
        # there, nothing written).
        "duplicate": Path(event(other, 1, {"S": 3}), 1, 4, 1, "duplicate"),
        # A version at or below the index's (a producer's resend under a new eventId): the
        # index read, its marker alone; no SKU is touched.
        "stale": Path(
            event(order_id, 2, {"A": 3, "C": 1}, event_id=f"{order_id}:v2:resent"),
            0,
            2,
            0,
            "stale",
        ),
    }


EXPECTED = {name: path.expected for name, path in paths("expected").items()}


class _Partitions:
    """The document requests of one path, by the partition they went to."""

    def __init__(self, transport: CountingTransport) -> None:
        self._transport = transport

    def __enter__(self) -> Counter[tuple[str, str | None]]:
        self.seen: Counter[tuple[str, str | None]] = Counter()
        self._transport.partitions = self.seen
        return self.seen

    def __exit__(self, *exc: object) -> None:
        self._transport.partitions = None


def _where(partition_key: str | None, orders: set[str]) -> str:
    if partition_key is None:
        return "none"
    value = json.loads(partition_key)[0]
    return INDEX if value in orders else "sku"


async def count_paths(client: Any, database: str, transport: CountingTransport) -> dict[str, Any]:
    """Each path's event decided once through the SDK; the requests it sent, by partition."""
    name = f"inventory-{uuid.uuid4().hex[:8]}"
    container = await ensure_container(client, database, name, "/sku")
    try:
        for stocked, on_hand in (("A", 100), ("B", 100), ("C", 100), ("S", 1)):
            await container.create_item(stock_item(stocked, on_hand))
        await container.read_item(STOCK_ITEM_ID, partition_key="A")  # warm: metadata reads
        store = CosmosDocumentStore(container)
        order_id = f"bench-{uuid.uuid4().hex[:6]}"
        orders = {order_partition(order_id), order_partition(f"{order_id}-2")}
        outcomes: dict[str, dict[str, Any]] = {}
        for path_name, path in paths(order_id).items():
            with _Partitions(transport) as seen:
                decision = await decide(
                    stock_reservation, path.sent, store, marker_ttl_s=MARKER_TTL_S, now=NOW
                )
            by_partition: Counter[str] = Counter()
            kinds: Counter[str] = Counter()
            for (kind, partition_key), count in seen.items():
                by_partition[_where(partition_key, orders)] += count
                kinds[kind] += count
            index, sku = by_partition[INDEX], by_partition["sku"]
            total = sum(kinds.values())
            outcomes[path_name] = {
                "message_type": path.sent.subject,
                "outcome": decision.outcome.value,
                "skus": path.skus,
                "index_requests": index,
                "sku_requests": sku,
                "per_sku": sku / path.skus if path.skus else 0.0,
                "total": total,
                "expected": path.expected,
                "floor": path.skus + 1 if path.skus else 1,
                "kinds": dict(sorted(kinds.items())),
                "measures": dict(decision.measures),
                "ok": (index, sku, total)
                == (
                    path.index_requests,
                    path.skus * path.sku_requests,
                    path.expected,
                )
                and decision.outcome.value == path.outcome,
            }
    finally:
        await client.get_database_client(database).delete_container(name)
    return {"outcomes": outcomes, "ok": all(o["ok"] for o in outcomes.values())}


async def kit_cpu(events: int) -> dict[str, Any]:
    """The kit's CPU per new ``OrderAccepted`` of two lines, over the in-memory store."""
    store = InMemoryDocumentStore(keep=0)
    skus = [f"SKU-{index:03d}" for index in range(50)]
    for sku in skus:
        store.documents[(sku, STOCK_ITEM_ID)] = stock_item(sku, 1_000_000_000)
    warmup = max(1, min(500, events // 10))
    prefix = uuid.uuid4().hex[:8]
    incoming = [
        event(f"cpu-{prefix}-{n}", 1, {skus[n % 50]: 1, skus[(n * 7 + 1) % 50]: 2})
        for n in range(warmup + events)
    ]
    return await cpu.decide_cpu_us(
        lambda message: decide(
            stock_reservation, message, store, marker_ttl_s=MARKER_TTL_S, now=NOW
        ),
        incoming,
        warmup,
    )


async def measure(
    client: Any,
    database: str,
    container: Any,
    transport: CountingTransport,
    *,
    events: int,
    creates: int,
) -> dict[str, Any]:
    """``client``: the bench's production client on ``transport``; ``container``: the app's
    orders container (the SDK's creates of target 2's documents)."""
    requests = await count_paths(client, database, transport)
    decide_us = await kit_cpu(events)
    create_us = await cpu.create_item_cpu_us(container, creates)
    floor_requests = 3  # the index and two SKUs: one request each
    share = decide_us["mean"] / (create_us * floor_requests)
    return {
        "requests": requests,
        "events": events,
        "decide_cpu_us": decide_us,
        "creates": creates,
        "create_item_cpu_us": create_us,
        "floor_requests": floor_requests,
        "share": share,
        "target_share": TARGET_SHARE,
        "ok": requests["ok"] and share <= TARGET_SHARE,
    }
