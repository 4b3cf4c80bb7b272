"""The largest logical partition of each container the run wrote, against the bound the capacity
plan states for it (docs/capacity.md, "Storage per logical partition"), measured from the Cosmos
DB server by partition key once the run is over.

The bounds, in documents (what the plan's byte figures multiply), each from that table's row:

- ``orders`` (``/orderId``): the order, one outbox event per version, one inbox marker per
  change message: at most 1 + its highest version + the change messages of the order the run
  sent (distinct MessageIds: a producer's retry under a new MessageId is a message of its own);
- ``inventory``, a SKU (``/sku``): its stock item, one reservation per order holding stock
  there (together at most ``onHand``: each holds at least one unit) and the tombstones (at most
  one per order); no marker: at most one stock item, one document per order, nothing else, and
  its holding reservations at most ``onHand``. The tombstones' 300 s lifetime is not measured:
  the local server runs on no clock of the run's (the manual clock), so here a tombstone stays;
- ``inventory``, an order (``order:<orderId>``): the order's index and one marker per event of
  the order: at most 1 + its highest version;
- ``payments`` (``/orderId``): the payment's state, one call record per version that moves
  money, one marker per event: at most 1 + 2 x its highest version.

An order's highest version is its order document's (``orderVersion``, 1 without one). Each
container one row: its largest partition and the bound it had, every partition over its bound
offending. Reads through the clients it is handed (the trigger's, below no fault); computes,
never writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from azure.cosmos.aio import ContainerProxy

from local.scenarios.invariants import DEMO, Row
from ops.audit import Invariant
from shared.consumer.order import ORDER_TYPE, ORDER_VERSION
from shared.stock.inventory import RESERVATION_TYPE, STOCK_ITEM_TYPE, order_partition

ORDERS_WITHIN = (
    "orders: each order's partition within 1 + its versions + its change messages (capacity.md)"
)
SKUS_WITHIN = (
    "inventory: each SKU's partition its stock item and one document per order, holding "
    "reservations within onHand, no marker (capacity.md)"
)
ORDER_INDEXES_WITHIN = (
    "inventory: each order's partition within its index + 1 marker per version (capacity.md)"
)
PAYMENTS_WITHIN = "payments: each order's partition within 1 + 2 x its versions (capacity.md)"
_ORDER_PREFIX = order_partition("")
PARTITIONS_CAPTION = (
    "checked by: demo = every logical partition the run left, counted by partition key on the "
    "Cosmos DB server, against docs/capacity.md's bound (Storage per logical partition)"
)


@dataclass(frozen=True)
class Partition:
    """One logical partition's documents, as the projection read them (``id``, ``type``, the
    fields a bound needs), and the bound it is held to."""

    key: str
    documents: Sequence[Mapping[str, Any]]
    bound: int
    why: str = ""  # what breaks the bound besides the count (a marker in a SKU's partition)

    @property
    def within(self) -> bool:
        return len(self.documents) <= self.bound and not self.why


def by_key(
    documents: Iterable[Mapping[str, Any]], field: str
) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for document in documents:
        grouped[str(document.get(field))].append(document)
    return dict(grouped)


def versions(orders: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Each stored order's highest version."""
    return {
        str(o.get("orderId")): int(o.get(ORDER_VERSION, 1))
        for o in orders
        if o.get("type") == ORDER_TYPE
    }


def per_order(
    partitions: Mapping[str, Sequence[Mapping[str, Any]]],
    highest: Mapping[str, int],
    bound: Callable[[int], int],
    key_of: Callable[[str], str] = lambda key: key,
) -> list[Partition]:
    return [
        Partition(key, docs, bound(highest.get(key_of(key), 1))) for key, docs in partitions.items()
    ]


def sku_partition(key: str, documents: Sequence[Mapping[str, Any]]) -> Partition:
    """A SKU's partition: one stock item, one document per order, holding reservations within
    ``onHand``; any other document breaks it (``why``)."""
    items = [d for d in documents if d.get("type") == STOCK_ITEM_TYPE]
    reservations = [d for d in documents if d.get("type") == RESERVATION_TYPE]
    others = sorted({str(d.get("type")) for d in documents} - {STOCK_ITEM_TYPE, RESERVATION_TYPE})
    orders = {str(d.get("orderId")) for d in reservations}
    on_hand = sum(int(d.get("onHand") or 0) for d in items)
    holding = sum(1 for d in reservations if d.get("ttl") in (None, -1))
    why = "; ".join(
        [
            *([f"documents of type {', '.join(others)}"] if others else []),
            *([f"{len(items)} stock items"] if len(items) > 1 else []),
            *([f"{holding} holding reservations, onHand {on_hand}"] if holding > on_hand else []),
        ]
    )
    return Partition(key, documents, min(len(items), 1) + len(orders), why)


def within_bounds(name: str, partitions: Sequence[Partition]) -> Invariant:
    over = sorted((p for p in partitions if not p.within), key=lambda p: p.key)
    if not partitions:
        return Invariant(name, True, [], "no partition")
    largest = max(partitions, key=lambda p: (len(p.documents), p.key))
    detail = (
        f"largest {largest.key}: {len(largest.documents)} documents (bound {largest.bound}); "
        f"{len(partitions)} partitions"
    )
    if over:
        first = over[0]
        detail = (
            f"{len(over)} over their bound, e.g. {first.key}: {len(first.documents)} documents, "
            f"bound {first.bound}" + (f", {first.why}" if first.why else "")
        )
    return Invariant(name, not over, [p.key for p in over], detail)


def partition_checks(
    orders: Sequence[Mapping[str, Any]],
    orders_container: Sequence[Mapping[str, Any]],
    inventory: Sequence[Mapping[str, Any]] | None,
    payments: Sequence[Mapping[str, Any]] | None,
    change_messages: Mapping[str, int],
) -> list[Invariant]:
    """Each container's row: every partition within its bound (module docstring);
    ``change_messages``: per order, the distinct MessageIds of its changes the run sent."""
    highest = versions(orders)
    checks = [
        within_bounds(
            ORDERS_WITHIN,
            [
                Partition(key, docs, 1 + highest.get(key, 1) + change_messages.get(key, 0))
                for key, docs in by_key(orders_container, "orderId").items()
            ],
        )
    ]
    if inventory is not None:
        grouped = by_key(inventory, "sku")
        skus = {k: d for k, d in grouped.items() if not k.startswith(_ORDER_PREFIX)}
        indexes = {k: d for k, d in grouped.items() if k.startswith(_ORDER_PREFIX)}
        checks.append(within_bounds(SKUS_WITHIN, [sku_partition(k, d) for k, d in skus.items()]))
        checks.append(
            within_bounds(
                ORDER_INDEXES_WITHIN,
                per_order(indexes, highest, lambda v: 1 + v, lambda key: key[len(_ORDER_PREFIX) :]),
            )
        )
    if payments is not None:
        checks.append(
            within_bounds(
                PAYMENTS_WITHIN,
                per_order(by_key(payments, "orderId"), highest, lambda v: 1 + 2 * v),
            )
        )
    return checks


# Only what a bound reads: the local server scans the container once per query either way.
_PROJECTION = "SELECT c.id, c.type, c.orderId, c.sku, c.onHand, c.ttl FROM c"


async def projected(container: ContainerProxy) -> list[dict[str, Any]]:
    return [item async for item in container.query_items(_PROJECTION)]


async def partition_rows(
    orders: Sequence[Mapping[str, Any]],
    orders_container: Sequence[Mapping[str, Any]],
    inventory: ContainerProxy | None,
    payments: ContainerProxy | None,
    change_messages: Mapping[str, int],
) -> list[Row]:
    """Reads the inventory and payments containers once each (``_PROJECTION``; the orders
    container's documents are the runner's, read once for every table), then
    ``partition_checks``."""
    checks = partition_checks(
        orders,
        orders_container,
        await projected(inventory) if inventory is not None else None,
        await projected(payments) if payments is not None else None,
        change_messages,
    )
    return [Row(check, DEMO) for check in checks]
