"""The inventory container's documents, and the one owner of their shapes. The container is
partitioned on ``/sku``; each SKU's partition holds what the business bounds, never a record per
event received:

- its **stock item**, id ``stock``: ``onHand`` (seeded by ``python -m ops stock``) and
  ``reserved`` (moved only by this consumer, by increments, never above ``onHand`` and never
  below zero: conditions in the same transactional batch);
- one **reservation** per order that holds stock there, id ``reservation:<orderId>``: the order
  version it reflects, the quantity ``requested``, ``reserved`` and ``backordered`` (requested
  and not reserved for lack of stock), ``ttl`` -1 (never expires). Each holds at least one
  unit and together they hold at most ``onHand``, so there are at most ``onHand`` of them;
- a reservation that holds **nothing** (released by an amendment, cancelled, or wholly
  backordered) is a **tombstone** of the order's version with ``ttl`` ``RELEASED_TTL_S``: it
  tells a delivery of an older version still running that it is stale, then Cosmos DB removes
  it (per-item ttl from the item's last write, learn.microsoft.com/azure/cosmos-db/nosql/
  time-to-live; the container's ``defaultTtl`` is -1, infra/app/cosmos.bicep, so items without
  a positive ttl never expire). Its backorder is then kept only in the telemetry
  (``stock.shortfall``): nothing here allocates a backorder later; the order's next event does.

No inbox marker: the reservation's version tells a repeat from a change
(``shared.kit.consumer``, the gate). A SKU's partition is therefore at most its stock item,
``onHand`` holding reservations and the tombstones of the last ``RELEASED_TTL_S`` (docs/
capacity.md, "Storage per logical partition"; ``make bench``, target 11). ``onHand`` bounds it
as long as stock leaves it when it ships: the events carry no fulfilment, so a delivered order's
reservation holds until an amendment or a cancellation releases it (capacity.md says the cost).

And each order has an **index** in a partition of its own, ``order:<orderId>`` (the partition
key value; no SKU partition holds a document of that id): the highest version of the order this
consumer has seen, every SKU any of its versions wanted, so an amendment also releases the
SKUs only an earlier version had, and what that version wants per SKU (``lines``: the next
version writes each reservation from it before it reads it; an index written before it had them
has none, and its next version reads first); a version lower than the index's is stale
everywhere. It
holds the consumer's inbox markers too, one per event of the order (kept the marker window,
``INBOX_MARKER_TTL_SECONDS``): bounded by the order's own versions.

Pure data: no Azure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PARTITION_FIELD = "sku"
STOCK_ITEM_ID = "stock"
ORDER_INDEX_ID = "orderIndex"
STOCK_ITEM_TYPE = "stockItem"
RESERVATION_TYPE = "reservation"
ORDER_INDEX_TYPE = "orderIndex"
# How long a reservation that holds nothing is kept after its last write: it must outlive every
# delivery of an older version that could still write (shared.kit.consumer.OUTLIVES_DELIVERIES_S,
# 90 s from the write that left it), plus the store's ``_ts`` in whole seconds; five minutes leaves
# room to spare (tests/stock hold it above). A partition's tombstones are the last five minutes'
# releases (docs/capacity.md).
RELEASED_TTL_S = 300
# A reservation that holds stock never expires ("ttl -1: the item never expires": the page above).
HOLDING_TTL = -1


class Field:
    """The stored field names (JSON keys)."""

    ID = "id"
    SKU = PARTITION_FIELD
    TYPE = "type"
    ORDER_ID = "orderId"
    ORDER_VERSION = "orderVersion"
    ON_HAND = "onHand"
    RESERVED = "reserved"
    REQUESTED = "requested"
    BACKORDERED = "backordered"
    SKUS = "skus"
    LINES = "lines"
    TTL = "ttl"


def order_partition(order_id: str) -> str:
    """The partition key value of an order's index."""
    return f"order:{order_id}"


def reservation_id(order_id: str) -> str:
    return f"{RESERVATION_TYPE}:{order_id}"


def stock_item(sku: str, on_hand: int, reserved: int = 0) -> dict[str, Any]:
    return {
        Field.ID: STOCK_ITEM_ID,
        Field.SKU: sku,
        Field.TYPE: STOCK_ITEM_TYPE,
        Field.ON_HAND: on_hand,
        Field.RESERVED: reserved,
    }


def reservation(
    sku: str, order_id: str, version: int, requested: int, reserved: int
) -> dict[str, Any]:
    """The order's reservation at ``version``: kept while it holds stock, a tombstone that
    expires (``RELEASED_TTL_S``) once it holds none."""
    return {
        Field.ID: reservation_id(order_id),
        Field.SKU: sku,
        Field.TYPE: RESERVATION_TYPE,
        Field.ORDER_ID: order_id,
        Field.ORDER_VERSION: version,
        Field.REQUESTED: requested,
        Field.RESERVED: reserved,
        Field.BACKORDERED: requested - reserved,
        Field.TTL: HOLDING_TTL if reserved > 0 else RELEASED_TTL_S,
    }


def order_index(
    order_id: str, version: int, skus: Iterable[str], lines: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The order's index at ``version``: every SKU any version wanted, and what ``version``
    wants per SKU (``lines``: what the next version assumes its reservations hold, so that it
    writes them before it reads them: ``shared.stock.effects``; None: an index as written
    before it kept them)."""
    index = {
        Field.ID: ORDER_INDEX_ID,
        Field.SKU: order_partition(order_id),
        Field.TYPE: ORDER_INDEX_TYPE,
        Field.ORDER_ID: order_id,
        Field.ORDER_VERSION: version,
        Field.SKUS: sorted({*skus, *(lines or {})}),
    }
    if lines is not None:
        index[Field.LINES] = dict(lines)
    return index


def stored_int(document: Mapping[str, Any], name: str) -> int:
    """An integer field of a stored document; a document without it was not written by this
    consumer (a hand edit) and is refused loudly rather than read as zero."""
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{document.get(Field.ID)!r} has no integer {name!r}: {value!r}")
    return value
