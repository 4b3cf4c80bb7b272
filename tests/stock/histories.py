"""Generated order histories for the stock reservation, delivered in any order, with duplicates,
stops between SKU batches, concurrent deliveries and answers that come late, on a model time
line; and the invariants they must converge on, the bound of a SKU's partition among them.

The time line (``ModelTime``): every store request takes one second of it, and a late answer
(``Case.pauses``) holds its delivery while the others go on and the time runs. The kit's write
window and the in-memory store's ttl both read it, so a delivery held past a later version's
release meets what the real service would: the tombstone expired. A read's answer may come
arbitrarily late (the delivery then plans on what it read, and must not write after its window:
the kit's check); a commit lands at most ``LANDING_S`` after it left, the premise the kit
states and the adapters' deadline enforces.

A read may also be answered by a replica one write behind (``Case.behind``): Cosmos DB's
session consistency promises a client its own writes, and another client's only eventually
(learn.microsoft.com/azure/cosmos-db/consistency-levels), and each delivery here stands for
another instance. How far behind a replica may be is not documented; one write is the model.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from idempotent_consumer import (
    INBOX_TYPE,
    LANDING_S,
    DocumentStore,
    IncomingMessage,
    Settlement,
    TransientStoreError,
    decide,
)
from idempotent_consumer.testing import InMemoryDocumentStore

from shared.config import DEFAULT_INBOX_MARKER_TTL_S
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import RELEASED_TTL_S, RESERVATION_TYPE, STOCK_ITEM_TYPE
from tests.stock.events import event_message

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SKUS = ("A", "B", "C")
# The markers' window as deployed (28 days): no marker expires within a history, as none may
# within the broker's redelivery horizon (shared.config).
MARKER_TTL_S = DEFAULT_INBOX_MARKER_TTL_S


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
    # Request number -> seconds its answer comes late (a commit's at most LANDING_S).
    pauses: Mapping[int, int] = field(default_factory=dict)
    # The read numbers a replica one write behind answers (in memory only).
    behind: Sequence[int] = ()


@st.composite
def cases(draw: st.DrawFn, *, paused: bool = True) -> Case:
    on_hand = {sku: draw(st.integers(0, 6)) for sku in SKUS}
    orders = [draw(order_history(f"o-{n}")) for n in range(draw(st.integers(1, 3)))]
    events = [version for history in orders for version in history]
    duplicates = draw(st.lists(st.sampled_from(events), max_size=3))
    deliveries = draw(st.permutations(events + duplicates))
    stops = draw(st.lists(st.integers(1, 40), max_size=3, unique=True))
    late = st.sampled_from([20, 90, 2 * RELEASED_TTL_S, 5 * RELEASED_TTL_S])
    pauses = draw(st.dictionaries(st.integers(1, 60), late, max_size=3)) if paused else {}
    behind = draw(st.lists(st.integers(1, 80), max_size=4, unique=True)) if paused else []
    return Case(on_hand, orders, deliveries, stops, pauses, behind)


class ModelTime:
    """Seconds on the model's time line (module docstring); a clock for the kit's write window
    and the store's ttl alike."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def wait(self, seconds: float) -> None:
        """Hold the caller ``seconds`` of model time while the other deliveries go on."""
        until = self.now + seconds
        while self.now < until:
            self.now += 1
            await asyncio.sleep(0)


class Stopping:
    """A store that fails its n-th requests (a stop: the delivery ends there, abandoned), makes
    every request take a second of model time, answers late or from a replica behind where the
    case says, and yields at every request, so that concurrent deliveries interleave."""

    def __init__(self, store: DocumentStore, case: Case, time_line: ModelTime | None) -> None:
        self._store = store
        self._stops = set(case.stops)
        self._pauses = case.pauses
        self._behind = set(case.behind) if isinstance(store, InMemoryDocumentStore) else set()
        self._before: dict[tuple[str, str], Mapping[str, Any] | None] = {}
        self._time = time_line
        self._count = 0

    def _tick(self) -> int:
        self._count += 1
        if self._time is not None:
            self._time.now += 1
        if self._count in self._stops:
            raise TransientStoreError(f"stopped at request {self._count}")
        return self._count

    async def _late(self, number: int, limit: float | None = None) -> None:
        if self._time is not None and number in self._pauses:
            seconds = self._pauses[number]
            await self._time.wait(seconds if limit is None else min(seconds, limit))

    async def commit(self, partition_key: str, writes: Sequence[Any]) -> None:
        await asyncio.sleep(0)
        number = self._tick()
        await self._late(number, LANDING_S)  # lands late, within the premise
        before = {
            write.document_id: self._stored(partition_key, write.document_id) for write in writes
        }
        await self._store.commit(partition_key, writes)
        for document_id, document in before.items():
            self._before[partition_key, document_id] = document

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        await asyncio.sleep(0)
        number = self._tick()
        document = await self._store.read(partition_key, document_id)
        if number in self._behind and (partition_key, document_id) in self._before:
            document = self._before[partition_key, document_id]  # a replica one write behind
        await self._late(number)  # read now, answered late
        return document

    def _stored(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        if not self._behind:
            return None
        assert isinstance(self._store, InMemoryDocumentStore)
        document = self._store.documents.get((partition_key, document_id))
        return None if document is None or self._store.expired(document) else dict(document)


async def deliver_all(
    store: DocumentStore,
    case: Case,
    *,
    concurrency: int = 3,
    time_line: ModelTime | None = None,
) -> None:
    """Deliver every event (``concurrency`` at a time, each worker taking the next as soon as
    it is free) until each is completed; an abandoned delivery is redelivered later, as the
    broker does. ``time_line``: the model's (the kit's window reads it), else real time."""
    stopping = Stopping(store, case, time_line)
    clock: Callable[[], float] = time_line or time.monotonic
    queue: deque[IncomingMessage] = deque(version.message() for version in case.deliveries)
    budget = 50 * len(queue)

    async def worker() -> None:
        nonlocal budget
        while queue:
            message = queue.popleft()
            budget -= 1
            assert budget >= 0, f"not settled after many redeliveries: {[*queue, message]}"
            decision = await decide(
                stock_reservation,
                message,
                stopping,
                marker_ttl_s=MARKER_TTL_S,
                now=NOW,
                clock=clock,
            )
            assert decision.settlement is not Settlement.DEADLETTER, decision
            if decision.settlement is Settlement.ABANDON:
                queue.append(message)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def live(documents: Sequence[Mapping[str, Any]], at: float) -> list[Mapping[str, Any]]:
    """The documents the service still has at ``at`` (seconds, the clock of ``_ts``): those
    without a positive ``ttl``, and those whose ``_ts + ttl`` is still ahead
    (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live)."""
    return [d for d in documents if not _expires(d) or d["_ts"] + d["ttl"] > at]


def _expires(document: Mapping[str, Any]) -> bool:
    ttl = document.get("ttl")
    return isinstance(ttl, int) and ttl > 0


def check_converged(documents: Sequence[Mapping[str, Any]], case: Case, *, at: float) -> None:
    """Over what is live at ``at``: every SKU's ``reserved`` is the sum of the orders'
    reservations, within [0, onHand]; each order's reservations are at its highest version and
    ask what that version wants; and every SKU its highest version wants has that version's
    reservation, or had its tombstone (it held nothing there), now expired."""
    present = live(documents, at)
    stock = {d["sku"]: d for d in present if d.get("type") == STOCK_ITEM_TYPE}
    records = [d for d in present if d.get("type") == RESERVATION_TYPE]
    for sku, item in stock.items():
        held = sum(r["reserved"] for r in records if r["sku"] == sku)
        assert item["reserved"] == held, (sku, item, records)
        assert 0 <= item["reserved"] <= item["onHand"] == case.on_hand[sku], item
    expired = [d for d in documents if d.get("type") == RESERVATION_TYPE and d not in present]
    for history in case.orders:
        highest = history[-1]
        mine = [r for r in records if r["orderId"] == highest.order_id]
        for record in mine:
            assert record["orderVersion"] == highest.version, (record, highest)
            assert record["requested"] == highest.lines.get(record["sku"], 0), (record, highest)
            assert 0 <= record["reserved"] <= record["requested"], record
            assert record["backordered"] == record["requested"] - record["reserved"], record
        gone = {
            r["sku"]
            for r in expired
            if r["orderId"] == highest.order_id
            and (r["orderVersion"], r["reserved"]) == (highest.version, 0)
        }
        # Every SKU the highest version wants has its reservation (unless cancelled).
        assert {r["sku"] for r in mine} | gone >= set(highest.lines), (mine, highest)


def check_bounded(documents: Sequence[Mapping[str, Any]], case: Case, *, at: float) -> None:
    """A SKU's partition holds only its stock item, the reservations of orders whose highest
    version wants the SKU that hold stock (never expiring), and tombstones (holding nothing)
    whose ttl has not passed at ``at``: no marker, nothing per event received. And once their
    ttl has passed, only the stock item and the holding reservations: back to the business's
    bound, at most ``onHand`` reservations."""
    wanted = {(history[-1].order_id, sku) for history in case.orders for sku in history[-1].lines}
    skus = [d for d in live(documents, at) if not str(d["sku"]).startswith("order:")]
    for document in skus:
        kind = document.get("type")
        assert kind != INBOX_TYPE, f"a marker in a SKU's partition: {document}"
        if kind == STOCK_ITEM_TYPE:
            assert not _expires(document), document
            continue
        assert kind == RESERVATION_TYPE, document
        if document["reserved"] > 0:
            assert not _expires(document), f"a holding reservation that expires: {document}"
            assert (document["orderId"], document["sku"]) in wanted, document
        else:
            assert document["ttl"] == RELEASED_TTL_S, f"a tombstone that stays: {document}"
    after = [d for d in live(documents, at + RELEASED_TTL_S) if d in skus]
    for sku in {d["sku"] for d in skus}:
        kept = [d for d in after if d["sku"] == sku and d.get("type") == RESERVATION_TYPE]
        assert all(d["reserved"] > 0 for d in kept), kept
        assert len(kept) <= case.on_hand.get(sku, 0), kept
