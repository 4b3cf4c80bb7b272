"""``python -m ops stock``: the stock items of the stock reservation consumer (``shared.stock``),
for the demo and for a deployment: set or seed ``onHand``, show per SKU what is on hand,
reserved, free and backordered, and audit the consumer's invariants. Pure over the
``Inventory`` port (``ops.cosmos_inventory.CosmosInventory``); the stored shapes are
``shared.stock.inventory``'s, never copied here.

What it writes: a stock item's creation (``shared.stock.inventory.stock_item``, nothing
reserved) and its ``onHand``, nothing else. ``reserved`` belongs to the consumer, which moves
it by increments in the SKU's transactional batch, conditional on ``reserved + n <= onHand``.
So the tool never replaces a stock item (a replace would write back the ``reserved`` it read
and lose an increment committed meanwhile): it patches ``onHand`` alone, conditional on the
stored ``reserved`` being at most the new ``onHand``, checked by the store in the write
itself, the same mechanics as the consumer's (a partial document update with a filter
predicate). An ``onHand`` below what is reserved is refused (reserve less: the orders release
it, or cancel them); one the consumer reserved past while the tool decided is read again.

It must never make ``reserved`` exceed ``onHand``, never change ``reserved`` or a reservation,
and never delete a stock item.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol

from pydantic import Field as Constrained
from pydantic import StringConstraints, TypeAdapter, ValidationError

from shared.stock.inventory import (
    RESERVATION_TYPE,
    STOCK_ITEM_ID,
    STOCK_ITEM_TYPE,
    Field,
    stock_item,
    stored_int,
)

# As the consumer's contract takes a SKU (shared.stock.contract.Sku); onHand a JSON integer
# Cosmos DB stores exactly (below 2**53) and a person would type.
Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]
OnHand = Annotated[int, Constrained(ge=0, le=1_000_000_000)]
SEED_FILE = TypeAdapter(dict[Sku, OnHand])
# Attempts at one SKU when the consumer (or another operator) keeps changing it meanwhile.
MAX_ATTEMPTS = 5


class Patched(enum.Enum):
    APPLIED = "applied"
    REFUSED = "refused"  # the condition did not hold for what is stored now
    MISSING = "missing"


@dataclass(frozen=True)
class StockPartition:
    """A SKU's stock item and reservations, and what reading them cost (RU)."""

    documents: list[dict[str, Any]]
    request_charge: float


class Inventory(Protocol):
    def stock_item(self, sku: str) -> dict[str, Any] | None:
        """The SKU's stock item (a point read), or None."""
        ...

    def create_stock_item(self, document: Mapping[str, Any]) -> bool:
        """Create it; False when the SKU has one already."""
        ...

    def set_on_hand(self, sku: str, on_hand: int) -> Patched:
        """Set the stock item's ``onHand`` alone, if the stored ``reserved`` is at most
        ``on_hand`` (checked by the store, in the write)."""
        ...

    def partition(self, sku: str) -> StockPartition:
        """The SKU's stock item and reservations (one query of its partition)."""
        ...

    def stocked_skus(self) -> list[str]:
        """Every SKU with a stock item."""
        ...


@dataclass(frozen=True)
class SetResult:
    sku: str
    done: bool
    detail: str


def parse_seed(text: str) -> dict[str, int]:
    """A seed file: one JSON object, SKU to onHand (``{"SKU-1": 10, "SKU-2": 0}``)."""
    try:
        return SEED_FILE.validate_json(text, strict=True)
    except ValidationError as error:
        raise ValueError(
            f'a seed file is one JSON object {{"SKU": onHand, ...}}: {error}'
        ) from None


def parse_pairs(values: Sequence[str]) -> dict[str, int]:
    """``SKU ON_HAND [SKU ON_HAND ...]`` from the command line."""
    if not values or len(values) % 2:
        raise ValueError("give SKU ON_HAND pairs")
    pairs: dict[str, Any] = {}
    for sku, count in zip(values[::2], values[1::2], strict=True):
        try:
            pairs[sku] = int(count)
        except ValueError:
            raise ValueError(f"onHand of {sku!r} is not an integer: {count!r}") from None
    return SEED_FILE.validate_python(pairs)


def set_on_hand(inventory: Inventory, sku: str, on_hand: int) -> SetResult:
    """Create the SKU's stock item with ``on_hand``, or set its ``onHand`` (module docstring)."""
    for _ in range(MAX_ATTEMPTS):
        stored = inventory.stock_item(sku)
        if stored is None:
            if inventory.create_stock_item(stock_item(sku, on_hand)):
                return SetResult(sku, True, f"created, onHand {on_hand}")
            continue  # another operator created it meanwhile: decide on what it wrote
        try:
            old, reserved = stored_int(stored, Field.ON_HAND), stored_int(stored, Field.RESERVED)
        except ValueError as error:
            return SetResult(
                sku, False, f"refused: not a stock item as the consumer keeps it: {error}"
            )
        if on_hand < reserved:
            return SetResult(
                sku,
                False,
                f"refused: {reserved} reserved, more than onHand {on_hand} (onHand stays {old}; "
                "the orders holding it must release it first)",
            )
        if on_hand == old:
            return SetResult(sku, True, f"unchanged, onHand {old} ({reserved} reserved)")
        if inventory.set_on_hand(sku, on_hand) is Patched.APPLIED:
            return SetResult(sku, True, f"onHand {old} -> {on_hand} ({reserved} reserved)")
        # The consumer reserved more meanwhile (or the item went away): decide again.
    return SetResult(sku, False, f"not set: the stock item changed under {MAX_ATTEMPTS} attempts")


@dataclass(frozen=True)
class SkuStock:
    """One SKU as its partition says, and what its invariants find wrong."""

    sku: str
    on_hand: int | None  # None: not stocked (no stock item)
    reserved: int | None
    reservations: int  # orders with a reservation here
    reserved_by_orders: int
    backordered: int
    request_charge: float
    problems: list[str] = field(default_factory=list)

    @property
    def free(self) -> int | None:
        if self.on_hand is None or self.reserved is None:
            return None
        return self.on_hand - self.reserved


def _int(document: Mapping[str, Any], name: str, problems: list[str]) -> int:
    try:
        return stored_int(document, name)
    except ValueError as error:
        problems.append(str(error))
        return 0


def read_sku(inventory: Inventory, sku: str) -> SkuStock:
    """One query of the SKU's partition, and the invariants over what it returned:
    ``reserved`` equals the sum of the reservations' (the consumer moves both in one batch),
    ``0 <= reserved <= onHand``, and each reservation's ``reserved + backordered ==
    requested``, none negative."""
    read = inventory.partition(sku)
    problems: list[str] = []
    item: dict[str, Any] | None = None
    by_orders = backordered = count = 0
    for document in read.documents:
        kind = document.get(Field.TYPE)
        if kind == STOCK_ITEM_TYPE and document.get(Field.ID) == STOCK_ITEM_ID:
            item = document
        elif kind == RESERVATION_TYPE:
            count += 1
            held = _int(document, Field.RESERVED, problems)
            short = _int(document, Field.BACKORDERED, problems)
            requested = _int(document, Field.REQUESTED, problems)
            by_orders += held
            backordered += short
            if held < 0 or short < 0 or held + short != requested:
                problems.append(
                    f"{document.get(Field.ID)}: reserved {held} + backordered {short} "
                    f"!= requested {requested}"
                )
    on_hand = reserved = None
    if item is not None:
        on_hand, reserved = (
            _int(item, Field.ON_HAND, problems),
            _int(item, Field.RESERVED, problems),
        )
        if reserved != by_orders:
            problems.append(f"reserved {reserved} != {by_orders}, the sum of its reservations")
        if not 0 <= reserved <= on_hand:
            problems.append(f"reserved {reserved} is not within 0..onHand {on_hand}")
    elif by_orders:
        problems.append(f"no stock item, yet its reservations hold {by_orders}")
    return SkuStock(
        sku, on_hand, reserved, count, by_orders, backordered, read.request_charge, problems
    )


def chosen_skus(inventory: Inventory, named: Iterable[str]) -> list[str]:
    """The SKUs named, else every stocked one (a SKU never stocked is shown when named)."""
    skus = list(dict.fromkeys(named))
    return skus or sorted(inventory.stocked_skus())


def audit(inventory: Inventory, skus: Sequence[str]) -> list[SkuStock]:
    """Every SKU read and checked; one found broken is read once more, and reported broken only
    if the second read is too (a partition read in several pages may straddle a batch the
    consumer commits meanwhile: the sums then disagree for a moment)."""
    checked: list[SkuStock] = []
    for sku in skus:
        stock = read_sku(inventory, sku)
        if stock.problems:
            stock = read_sku(inventory, sku)
        checked.append(stock)
    return checked
