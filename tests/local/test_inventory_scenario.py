"""The demo's inventory table: each row fails when what it guards is broken, from documents as a
broken consumer (or a hand edit) would leave them, each case breaking one thing; and the stock
the demo seeds is short where it says."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from local.scenarios.inventory import (
    AT_HIGHEST_VERSION,
    NO_INVOCATION_FAILED,
    RESERVED_IS_THE_SUM,
    SHORT_SKUS,
    SHORTFALL_COUNTED,
    SUBSCRIPTION_DRAINED,
    WITHIN_ON_HAND,
    at_highest_versions,
    nothing_dead_lettered,
    read_stock,
    reserved_is_the_sum,
    shortfall_counted,
    stock_audit_agrees,
    stock_plan,
    stock_rows,
    subscription_checks,
    wanted_per_sku,
    within_on_hand,
)
from local.scenarios.tool_runs import ToolRun
from local.standins.broker import DeadLetteredMessage, OutgoingMessage
from ops.audit import Invariant
from ops.sample_orders import amended_body, order_body
from shared.stock.inventory import order_index, reservation, stock_item

Document = dict[str, Any]


def order(order_id: str, version: int = 1, *, cancelled: bool = False, **lines: int) -> Document:
    """An order document as consume_order stores it (the fields the inventory reads)."""
    return {
        "id": order_id,
        "orderId": order_id,
        "type": "order",
        "orderVersion": version,
        "status": "cancelled" if cancelled else "accepted",
        "lines": [{"sku": s, "quantity": q, "unitPriceMinor": 100} for s, q in lines.items()],
    }


def healthy() -> tuple[list[Document], list[Document]]:
    """Two orders racing for A (3 on hand: ord-1 got 2, ord-2 got 1 of 2), ord-2 also wanting
    B; ord-3 cancelled at v2 after reserving 1 of C at v1; the consumer's documents."""
    orders = [order("ord-1", A=2), order("ord-2", A=2, B=1), order("ord-3", 2, cancelled=True)]
    documents = [
        stock_item("A", 3, reserved=3),
        stock_item("B", 5, reserved=1),
        stock_item("C", 4, reserved=0),
        reservation("A", "ord-1", 1, 2, 2),
        reservation("A", "ord-2", 1, 2, 1),
        reservation("B", "ord-2", 1, 1, 1),
        reservation("C", "ord-3", 2, 0, 0),
        order_index("ord-1", 1, ["A"]),
        order_index("ord-2", 1, ["A", "B"]),
        order_index("ord-3", 2, ["C"]),
    ]
    return orders, documents


def replaced(documents: list[Document], new: Document) -> list[Document]:
    """``documents`` with the one of ``new``'s id and partition replaced by it."""
    key = (new["id"], new["sku"])
    return [new if (d["id"], d["sku"]) == key else d for d in documents]


def failures(orders: list[Document], documents: list[Document], counted: int = 1) -> list[str]:
    stocks = read_stock(documents)
    checks = [
        reserved_is_the_sum(stocks),
        within_on_hand(stocks),
        at_highest_versions(orders, documents),
        shortfall_counted(stocks, counted),
    ]
    return [check.name for check in checks if not check.passed]


def test_the_healthy_inventory_passes_every_row() -> None:
    orders, documents = healthy()
    assert failures(orders, documents) == []
    detail = at_highest_versions(orders, documents).detail
    assert detail == "3 orders (1 wanting nothing), 4 reservations"


def test_reserved_not_the_sum_of_the_reservations_fails() -> None:
    orders, documents = healthy()
    # An increment lost (or applied twice) apart from its reservation: not one batch.
    assert failures(orders, replaced(documents, stock_item("B", 5, reserved=2))) == [
        RESERVED_IS_THE_SUM
    ]
    broken = reserved_is_the_sum(read_stock(replaced(documents, stock_item("B", 5, reserved=0))))
    assert broken.offending == ["B"]


def test_reserved_above_on_hand_or_below_zero_fails() -> None:
    orders, documents = healthy()
    over = replaced(
        replaced(documents, stock_item("A", 3, reserved=4)), reservation("A", "ord-2", 1, 2, 2)
    )
    # Both orders got all they wanted: no backorder is left, and A holds more than it has.
    assert within_on_hand(read_stock(over)).offending == ["A"]
    assert WITHIN_ON_HAND in failures(orders, over, counted=0)
    negative = replaced(
        replaced(documents, stock_item("C", 4, reserved=-1)), reservation("C", "ord-3", 2, 0, -1)
    )
    assert within_on_hand(read_stock(negative)).offending == ["C"]


def test_a_reservation_not_at_the_orders_highest_version_fails() -> None:
    orders, documents = healthy()
    without_b = [d for d in documents if (d["id"], d["sku"]) != ("reservation:ord-2", "B")]
    cases = {
        # The cancellation never reached C: ord-3 still holds its v1 reservation.
        "ord-3 stale": replaced(
            replaced(documents, stock_item("C", 4, reserved=1)),
            reservation("C", "ord-3", 1, 1, 1),
        ),
        "ord-2 requests 2 of B, wants 1": replaced(
            documents, reservation("B", "ord-2", 1, 2, 1) | {"backordered": 1}
        ),
        "ord-2 without its B": replaced(without_b, stock_item("B", 5)),
        "ord-3's index behind": replaced(documents, order_index("ord-3", 1, ["C"])),
        "ord-1 without an index": [d for d in documents if d["sku"] != "order:ord-1"],
        "ord-2's A not adding up": replaced(
            documents, reservation("A", "ord-2", 1, 2, 1) | {"backordered": 0}
        ),
    }
    for case, broken in cases.items():
        check = at_highest_versions(orders, broken)
        assert (check.passed, check.offending) == (False, [case[:5]]), case
    assert failures(orders, cases["ord-1 without an index"]) == [AT_HIGHEST_VERSION]
    stranger = [*documents, reservation("A", "ord-9", 1, 0, 0)]
    assert at_highest_versions(orders, stranger).offending == ["ord-9"]
    # An order the orders container holds at v2, whose amendment the inventory never applied.
    amended = [order("ord-1", 2, A=1), *orders[1:]]
    assert at_highest_versions(amended, documents).offending == ["ord-1"]


def test_a_shortfall_not_counted_or_with_stock_left_free_fails() -> None:
    orders, documents = healthy()
    assert shortfall_counted(read_stock(documents), 1).passed
    assert failures(orders, documents, counted=0) == [SHORTFALL_COUNTED]  # not counted
    assert failures(orders, documents, counted=2) == [SHORTFALL_COUNTED]  # counted twice
    # ord-2 backordered while A had stock free: the consumer did not reserve what was there.
    free = replaced(
        replaced(documents, stock_item("A", 4, reserved=3)), stock_item("A", 4, reserved=3)
    )
    check = shortfall_counted(read_stock(free), 1)
    assert (check.passed, check.offending) == (False, ["A"])
    # No shortfall at all: the short SKUs showed nothing.
    enough = replaced(
        replaced(documents, stock_item("A", 4, reserved=4)), reservation("A", "ord-2", 1, 2, 2)
    )
    assert not shortfall_counted(read_stock(enough), 0).passed


def test_a_dead_lettered_event_and_the_stand_in_s_figures_fail() -> None:
    assert nothing_dead_lettered([]).passed
    when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    letter = DeadLetteredMessage(OutgoingMessage("e-1", b"{}"), 7, 1, "MissingLines", None, when)
    check = nothing_dead_lettered([letter])
    assert (check.passed, check.offending, check.detail) == (False, ["e-1"], "MissingLines")

    def failed(active: int, invocations: int) -> list[str]:
        checks = subscription_checks(
            active_messages=active, failed_invocations=invocations, errors=["e"]
        )
        return [c.name for c in checks if not c.passed]

    assert failed(0, 0) == []
    assert failed(2, 0) == [SUBSCRIPTION_DRAINED]
    assert failed(0, 1) == [NO_INVOCATION_FAILED]


def test_the_operator_s_stock_audit_must_pass_and_read_what_the_table_read() -> None:
    _, documents = healthy()
    shown = [s for s in read_stock(documents) if s.sku in ("A", "B")]

    def row(sku: str, on_hand: int, reserved: int, backordered: int, orders: int) -> Document:
        return {
            "sku": sku,
            "onHand": on_hand,
            "reserved": reserved,
            "backordered": backordered,
            "reservations": orders,
            "problems": [],
        }

    good = [row("A", 3, 3, 1, 2), row("B", 5, 1, 0, 1)]

    def agrees(rows: list[Document], exit_status: int = 0) -> Invariant:
        output = json.dumps({"skus": rows, "broken": [], "requestCharge": 2.0})
        return stock_audit_agrees(shown, ToolRun(("stock", "audit"), exit_status, output))

    assert agrees(good).passed
    assert agrees(good[:1]).offending == ["B"]  # a SKU the tool did not read
    assert agrees([good[0], row("B", 5, 2, 0, 1)]).offending == ["B"]  # another reserved
    failing = {**good[0], "problems": ["reserved 3 != 2, the sum of its reservations"]}
    assert agrees([failing, good[1]], exit_status=1).offending == ["A"]
    unreadable = stock_audit_agrees(shown, ToolRun(("stock", "audit"), 2, "error: no container"))
    assert not unreadable.passed and "error: no container" in unreadable.detail
    assert not stock_audit_agrees([], ToolRun(("stock", "audit"), 0, '{"skus": []}')).passed


def test_the_demo_seeds_the_most_wanted_skus_short_one_sku_not_at_all_and_the_rest_enough() -> None:
    bodies = [
        json.dumps(order_body(f"ord-{n}", lines=lines)).encode()
        for n, lines in enumerate(
            [
                [{"sku": "HOT", "quantity": 3, "unitPriceMinor": 1}] * 2,  # one order, 6 of HOT
                [{"sku": "HOT", "quantity": 2, "unitPriceMinor": 1}],
                [{"sku": "HOT", "quantity": 1, "unitPriceMinor": 1}],
                *([{"sku": f"S-{i}", "quantity": 2, "unitPriceMinor": 1}] for i in range(8)),
            ]
        )
    ]
    # An amendment of ord-1 wanting more of HOT than its OrderPlaced: the most counts.
    more = [{"sku": "HOT", "quantity": 5, "unitPriceMinor": 1}]
    bodies.append(json.dumps(amended_body("ord-1", 2, lines=more)).encode())
    wanted = wanted_per_sku(bodies)
    assert wanted["HOT"] == {"ord-0": 6, "ord-1": 5, "ord-2": 1}
    plan = stock_plan(wanted, seed=3)
    assert plan.short[0] == "HOT" and len(plan.short) == SHORT_SKUS
    assert plan.on_hand["HOT"] == 6  # half of 12
    [unstocked] = plan.unstocked
    assert unstocked not in plan.on_hand and unstocked not in plan.short
    for sku, orders in wanted.items():
        if sku not in plan.shown:
            assert sum(orders.values()) <= plan.on_hand[sku] <= sum(orders.values()) + 3
    assert stock_plan(wanted, seed=3) == plan  # seeded: the same every run


def test_the_stock_table_shows_the_short_and_unstocked_skus_and_sums_the_rest() -> None:
    _, documents = healthy()
    plan = stock_plan({"A": {"ord-1": 2, "ord-2": 2}, "B": {"ord-2": 1}, "C": {"ord-3": 1}}, 1)
    rows = stock_rows(read_stock(documents), plan)
    assert [r.sku for r in rows[:-1]] == plan.shown
    rest = rows[-1]
    others = [s for s in read_stock(documents) if s.sku not in plan.shown]
    assert rest.sku == f"{len(others)} other SKUs"
    assert rest.reserved == sum(s.reserved or 0 for s in others)
