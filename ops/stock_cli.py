"""``python -m ops stock ...``: the stock items' commands (``ops.stock``), their arguments and
what they print. The inventory container is ``--inventory-container`` (the app setting
``INVENTORY_CONTAINER``, default ``inventory``) in the account and database of the global
``--cosmos-*`` options.

- ``stock set SKU ON_HAND [SKU ON_HAND ...]`` and ``stock seed FILE.json`` (``{"SKU": onHand}``):
  create or set each SKU's ``onHand``; exit 1 when one was refused (below what is reserved);
- ``stock show [SKU ...]``: onHand, reserved, free, backordered and the reservations per SKU,
  each from one query of its partition, with what the reads cost;
- ``stock audit [SKU ...]``: the consumer's invariants per SKU (``reserved`` is the sum of the
  reservations, ``0 <= reserved <= onHand``); exit 1 and the SKUs when one is broken.

Without SKUs, ``show`` and ``audit`` take every stocked SKU.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ops.stock import (
    Inventory,
    SetResult,
    SkuStock,
    audit,
    chosen_skus,
    parse_pairs,
    parse_seed,
    read_sku,
    set_on_hand,
)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stock = commands.add_parser(
        "stock", help="stock items of the stock reservation: set, seed, show, audit"
    )
    stock.add_argument(
        "--inventory-container", default=os.environ.get("INVENTORY_CONTAINER", "inventory")
    )
    actions = stock.add_subparsers(dest="stock_command", required=True)
    setting = actions.add_parser("set", help="create or set onHand: SKU ON_HAND [...]")
    setting.add_argument("pairs", nargs="+", metavar="SKU ON_HAND")
    seeding = actions.add_parser("seed", help='create or set onHand from {"SKU": onHand, ...}')
    seeding.add_argument("file", type=Path, metavar="FILE.json")
    for name, text in (
        ("show", "onHand, reserved, free, backordered per SKU"),
        ("audit", "reserved == sum of reservations, 0 <= reserved <= onHand, per SKU"),
    ):
        reading = actions.add_parser(name, help=text)
        reading.add_argument("skus", nargs="*", metavar="SKU")
        reading.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, inventory: Inventory, console: Console) -> int:
    """Exit 0: everything asked was done and every invariant holds; 1: a SKU was refused or an
    invariant is broken; 2 (``ValueError``, by the caller): a usage error."""
    command = args.stock_command
    if command in {"set", "seed"}:
        wanted = parse_pairs(args.pairs) if command == "set" else _seed(args.file)
        results = [set_on_hand(inventory, sku, on_hand) for sku, on_hand in wanted.items()]
        return _print_set(results, console)
    skus = chosen_skus(inventory, args.skus)
    if command == "show":
        stocks = [read_sku(inventory, sku) for sku in skus]
        return _print_stock(stocks, console, as_json=args.json, auditing=False)
    return _print_stock(audit(inventory, skus), console, as_json=args.json, auditing=True)


def _seed(path: Path) -> dict[str, int]:
    try:
        return parse_seed(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error}") from None


def _print_set(results: list[SetResult], console: Console) -> int:
    table = Table("SKU", "done", "detail")
    for result in results:
        table.add_row(result.sku, "yes" if result.done else "NO", result.detail)
    console.print(table)
    refused = [result.sku for result in results if not result.done]
    console.print(f"{len(results) - len(refused)} of {len(results)} SKU(s) set")
    if refused:
        console.print(f"not set: {', '.join(refused)}")
    return 1 if refused else 0


def _row(stock: SkuStock) -> dict[str, Any]:
    return {
        "sku": stock.sku,
        "stocked": stock.on_hand is not None,
        "onHand": stock.on_hand,
        "reserved": stock.reserved,
        "free": stock.free,
        "backordered": stock.backordered,
        "reservations": stock.reservations,
        "reservedByOrders": stock.reserved_by_orders,
        "requestCharge": stock.request_charge,
        "problems": stock.problems,
    }


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def _print_stock(stocks: list[SkuStock], console: Console, *, as_json: bool, auditing: bool) -> int:
    broken = [stock.sku for stock in stocks if stock.problems]
    charge = sum(stock.request_charge for stock in stocks)
    if as_json:
        console.print_json(
            json.dumps(
                {"skus": [_row(s) for s in stocks], "broken": broken, "requestCharge": charge}
            )
        )
        return 1 if broken and auditing else 0
    columns = ["SKU", "onHand", "reserved", "free", "backordered", "orders", "RU"]
    table = Table(*columns, *(["audit"] if auditing else []))
    for stock in stocks:
        cells = [
            stock.sku,
            _cell(stock.on_hand) if stock.on_hand is not None else "not stocked",
            _cell(stock.reserved),
            _cell(stock.free),
            str(stock.backordered),
            str(stock.reservations),
            f"{stock.request_charge:.2f}",
        ]
        if auditing:
            cells.append("PASS" if not stock.problems else "FAIL: " + "; ".join(stock.problems))
        table.add_row(*cells)
    console.print(table)
    console.print(
        f"{len(stocks)} SKU(s), one query of each SKU's partition: {charge:.2f} RU in all"
    )
    if broken:
        console.print(f"broken SKU(s): {', '.join(broken)}")
    if not auditing:
        if broken:
            console.print("(python -m ops stock audit: what is wrong with each)")
        return 0
    return 1 if broken else 0
