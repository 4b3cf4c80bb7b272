"""The logical partitions' rows (``local.scenarios.partitions``): each container's partitions as
a healthy run leaves them pass; each fails when the product keeps what the capacity plan says
must not stay: an inbox marker in a SKU's partition (the stock reservation before issue 32), a
second document of one order in a SKU's partition, more holding reservations than ``onHand``,
an outbox event or a payment call record per delivery instead of per version, a marker per
delivery in an order's index partition."""

from __future__ import annotations

from typing import Any

from local.scenarios.lifecycle import LifecycleMix
from local.scenarios.partitions import (
    ORDER_INDEXES_WITHIN,
    ORDERS_WITHIN,
    PAYMENTS_WITHIN,
    SKUS_WITHIN,
    partition_checks,
)
from local.standins.broker import OutgoingMessage

ORDERS = [
    {"orderId": "ord-1", "type": "order", "orderVersion": 1},
    {"orderId": "ord-2", "type": "order", "orderVersion": 2},
]


def doc(kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"{kind}-{len(fields)}-{sorted(fields.items())}", "type": kind, **fields}


ORDERS_CONTAINER = [
    *ORDERS,
    doc("outbox", orderId="ord-1", v=1),
    doc("outbox", orderId="ord-2", v=1),
    doc("outbox", orderId="ord-2", v=2),
    doc("inbox", orderId="ord-2", v=2),
    doc("inbox", orderId="ord-2", v=2, retry=True),  # the producer's retry, a MessageId of its own
]
CHANGE_MESSAGES = {"ord-2": 2}  # ord-2:v2 and ord-2:v2:retry
INVENTORY = [
    doc("stockItem", sku="SKU-1", onHand=2),
    doc("reservation", sku="SKU-1", orderId="ord-1", ttl=-1),
    doc("reservation", sku="SKU-1", orderId="ord-2", ttl=300),  # a tombstone
    doc("stockItem", sku="SKU-2", onHand=1),
    doc("reservation", sku="SKU-2", orderId="ord-2", ttl=-1),
    doc("orderIndex", sku="order:ord-1"),
    doc("inbox", sku="order:ord-1", v=1),
    doc("orderIndex", sku="order:ord-2"),
    doc("inbox", sku="order:ord-2", v=1),
    doc("inbox", sku="order:ord-2", v=2),
]
PAYMENTS = [
    doc("payment", orderId="ord-2"),
    doc("call", orderId="ord-2", v=1),
    doc("call", orderId="ord-2", v=2),
    doc("inbox", orderId="ord-2", v=1),
    doc("inbox", orderId="ord-2", v=2),
]


def verdicts(
    orders_container: list[dict[str, Any]] = ORDERS_CONTAINER,
    inventory: list[dict[str, Any]] = INVENTORY,
    payments: list[dict[str, Any]] = PAYMENTS,
) -> dict[str, bool]:
    checks = partition_checks(ORDERS, orders_container, inventory, payments, CHANGE_MESSAGES)
    return {check.name: check.passed for check in checks}


def test_the_partitions_a_healthy_run_leaves_pass_every_row() -> None:
    assert verdicts() == {
        ORDERS_WITHIN: True,
        SKUS_WITHIN: True,
        ORDER_INDEXES_WITHIN: True,
        PAYMENTS_WITHIN: True,
    }
    [skus] = [c for c in partition_checks(ORDERS, [], INVENTORY, None, {}) if c.name == SKUS_WITHIN]
    assert skus.detail.startswith("largest SKU-1: 3 documents (bound 3)")


def test_a_marker_in_a_sku_partition_fails_the_skus_row() -> None:
    # The stock reservation before issue 32: a marker per event in every SKU it touched.
    marker = doc("inbox", sku="SKU-1", orderId="ord-1", v=1)
    result = partition_checks(
        ORDERS, ORDERS_CONTAINER, [*INVENTORY, marker], PAYMENTS, CHANGE_MESSAGES
    )
    [skus] = [c for c in result if c.name == SKUS_WITHIN]
    assert not skus.passed and skus.offending == ["SKU-1"]
    assert "documents of type inbox" in skus.detail


def test_two_documents_of_one_order_in_a_sku_partition_fail() -> None:
    kept = doc("reservation", sku="SKU-2", orderId="ord-2", ttl=300, version=1)
    assert not verdicts(inventory=[*INVENTORY, kept])[SKUS_WITHIN]


def test_more_holding_reservations_than_on_hand_fail() -> None:
    holding = doc("reservation", sku="SKU-2", orderId="ord-1", ttl=-1)
    assert not verdicts(inventory=[*INVENTORY, holding])[SKUS_WITHIN]


def test_a_record_per_delivery_instead_of_per_version_fails_its_container() -> None:
    # A second outbox event of a one-version order, which had no change: 3 documents, bound 2.
    again = [doc("outbox", orderId="ord-1", copy=2)]
    assert verdicts(orders_container=[*ORDERS_CONTAINER, *again]) == {
        ORDERS_WITHIN: False,
        SKUS_WITHIN: True,
        ORDER_INDEXES_WITHIN: True,
        PAYMENTS_WITHIN: True,
    }
    calls = [doc("call", orderId="ord-1", copy=n) for n in range(4)]
    assert not verdicts(payments=[*PAYMENTS, *calls])[PAYMENTS_WITHIN]
    markers = [doc("inbox", sku="order:ord-1", copy=n) for n in range(2)]
    assert not verdicts(inventory=[*INVENTORY, *markers])[ORDER_INDEXES_WITHIN]


def test_an_order_s_change_messages_are_its_distinct_message_ids_sent() -> None:
    placed = OutgoingMessage("ord-2", b'{"orderId": "ord-2"}')
    v2 = OutgoingMessage("ord-2:v2", b'{"orderId": "ord-2"}')
    retry = OutgoingMessage("ord-2:v2:retry", b'{"orderId": "ord-2"}')
    v3 = OutgoingMessage("ord-2:v3", b'{"orderId": "ord-2"}')
    mix = LifecycleMix(sends={"ord-2": [v2, placed, retry, v2]}, late=[v2, v3])
    assert mix.change_messages() == {"ord-2": 3}
    # An OrderPlaced the mix held back until after the stream (``pin_order_of_arrival``) is no
    # change message.
    held_back = LifecycleMix(sends={"ord-2": [v2, retry]}, after_stream=[placed, v3])
    assert held_back.change_messages() == {"ord-2": 3}
