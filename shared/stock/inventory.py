"""The inventory container's documents, and the one owner of their shapes. The container is
partitioned on ``/sku``; each SKU's partition holds:

- its **stock item**, id ``stock``: ``onHand`` (seeded by ``python -m ops stock``) and
  ``reserved`` (moved only by this consumer, by increments, never above ``onHand`` and never
  below zero: conditions in the same transactional batch);
- one **reservation** per order that wanted the SKU, id ``reservation:<orderId>``: the order
  version it reflects, the quantity ``requested``, ``reserved`` and ``backordered`` (requested
  and not reserved for lack of stock);
- the consumer's inbox markers for the events it applied there (``shared.kit.inbox``).

And each order has an **index** in a partition of its own, ``order:<orderId>`` (the partition
key value; no SKU partition holds a document of that id): the highest version of the order this
consumer has seen and every SKU any of its versions wanted, so an amendment also releases the
SKUs only an earlier version had, and a version lower than the index's is stale everywhere.

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
    return {
        Field.ID: reservation_id(order_id),
        Field.SKU: sku,
        Field.TYPE: RESERVATION_TYPE,
        Field.ORDER_ID: order_id,
        Field.ORDER_VERSION: version,
        Field.REQUESTED: requested,
        Field.RESERVED: reserved,
        Field.BACKORDERED: requested - reserved,
    }


def order_index(order_id: str, version: int, skus: Iterable[str]) -> dict[str, Any]:
    return {
        Field.ID: ORDER_INDEX_ID,
        Field.SKU: order_partition(order_id),
        Field.TYPE: ORDER_INDEX_TYPE,
        Field.ORDER_ID: order_id,
        Field.ORDER_VERSION: version,
        Field.SKUS: sorted(set(skus)),
    }


def stored_int(document: Mapping[str, Any], name: str) -> int:
    """An integer field of a stored document; a document without it was not written by this
    consumer (a hand edit) and is refused loudly rather than read as zero."""
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{document.get(Field.ID)!r} has no integer {name!r}: {value!r}")
    return value
