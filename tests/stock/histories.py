"""Generated order histories for the stock reservation, delivered in any order, with duplicates,
stops between SKU batches and concurrent deliveries, and the invariants they must converge on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from shared.kit.consumer import decide
from shared.kit.decision import DocumentStore, IncomingMessage, Settlement
from shared.kit.errors import TransientStoreError
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import RESERVATION_TYPE, STOCK_ITEM_TYPE
from tests.stock.events import event_message

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SKUS = ("A", "B", "C")


@dataclass(frozen=True)
class Version:
    order_id: str
    version: int
    lines: Mapping[str, int]  # empty when cancelled
    cancelled: bool

    def message(self) -> IncomingMessage:
        lines = None if self.cancelled else dict(self.lines)
        return event_message(self.order_id, self.version, lines, cancelled=self.cancelled)


_lines = st.dictionaries(st.sampled_from(SKUS), st.integers(1, 4), min_size=1, max_size=3)


@st.composite
def order_history(draw: st.DrawFn, order_id: str) -> list[Version]:
    versions = [Version(order_id, 1, draw(_lines), False)]
    for version in range(2, draw(st.integers(1, 4)) + 1):
        versions.append(Version(order_id, version, draw(_lines), False))
    if draw(st.booleans()):
        versions.append(Version(order_id, len(versions) + 1, {}, True))
    # A producer skips versions at times: the consumer sees only some of them (never
    # none, and the highest always, as the relay promises: docs/events.md).
    kept = [v for v in versions[:-1] if draw(st.booleans())]
    return [*kept, versions[-1]]


@dataclass(frozen=True)
class Case:
    on_hand: Mapping[str, int]
    orders: Sequence[Sequence[Version]]
    deliveries: Sequence[Version]  # in arrival order, duplicates included
    stops: Sequence[int]  # the request numbers at which the store fails (a stop)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    on_hand = {sku: draw(st.integers(0, 6)) for sku in SKUS}
    orders = [draw(order_history(f"o-{n}")) for n in range(draw(st.integers(1, 3)))]
    events = [version for history in orders for version in history]
    duplicates = draw(st.lists(st.sampled_from(events), max_size=3))
    deliveries = draw(st.permutations(events + duplicates))
    stops = draw(st.lists(st.integers(1, 40), max_size=3, unique=True))
    return Case(on_hand, orders, deliveries, stops)


class Stopping:
    """A store that fails its n-th requests (a stop: the delivery ends there, abandoned) and
    yields at every request, so that concurrent deliveries interleave."""

    def __init__(self, store: DocumentStore, stops: Sequence[int]) -> None:
        self._store = store
        self._stops = set(stops)
        self._count = 0

    def _tick(self) -> None:
        self._count += 1
        if self._count in self._stops:
            raise TransientStoreError(f"stopped at request {self._count}")

    async def commit(self, partition_key: str, writes: Sequence[Any]) -> None:
        await asyncio.sleep(0)
        self._tick()
        await self._store.commit(partition_key, writes)

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        await asyncio.sleep(0)
        self._tick()
        return await self._store.read(partition_key, document_id)


async def deliver_all(store: DocumentStore, case: Case, *, concurrency: int = 3) -> None:
    """Deliver every event (``concurrency`` at a time) until each is completed; an abandoned
    delivery is redelivered later, as the broker does."""
    stopping = Stopping(store, case.stops)
    queue: list[IncomingMessage] = [version.message() for version in case.deliveries]
    for _ in range(50):
        if not queue:
            return
        batch, queue = queue[:concurrency], queue[concurrency:]
        decisions = await asyncio.gather(
            *(
                decide(stock_reservation, message, stopping, marker_ttl_s=600, now=NOW)
                for message in batch
            )
        )
        for message, decision in zip(batch, decisions, strict=True):
            assert decision.settlement is not Settlement.DEADLETTER, decision
            if decision.settlement is Settlement.ABANDON:
                queue.append(message)
    raise AssertionError(f"not settled after 50 rounds: {queue}")


def check_converged(documents: Sequence[Mapping[str, Any]], case: Case) -> None:
    """Every SKU's ``reserved`` is the sum of the orders' reservations, within [0, onHand]; each
    order's reservations are at its highest version and ask what that version wants."""
    stock = {d["sku"]: d for d in documents if d.get("type") == STOCK_ITEM_TYPE}
    records = [d for d in documents if d.get("type") == RESERVATION_TYPE]
    for sku, item in stock.items():
        held = sum(r["reserved"] for r in records if r["sku"] == sku)
        assert item["reserved"] == held, (sku, item, records)
        assert 0 <= item["reserved"] <= item["onHand"] == case.on_hand[sku], item
    for history in case.orders:
        highest = history[-1]
        mine = [r for r in records if r["orderId"] == highest.order_id]
        for record in mine:
            assert record["orderVersion"] == highest.version, (record, highest)
            assert record["requested"] == highest.lines.get(record["sku"], 0), (record, highest)
            assert 0 <= record["reserved"] <= record["requested"], record
            assert record["backordered"] == record["requested"] - record["reserved"], record
        # Every SKU the highest version wants has its reservation (unless cancelled).
        assert {r["sku"] for r in mine} >= set(highest.lines), (mine, highest)
