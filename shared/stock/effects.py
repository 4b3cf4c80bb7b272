"""The stock reservation's effects on the kit (``shared.kit.apply.Effect``): the order's index
(the gate: one version and MessageId check for the whole event, and the SKUs it concerns) and
the reservation in one SKU's partition. No Azure imports.

In a SKU's partition one event is one transactional batch (``apply_once``, no marker): the
order's reservation changed only from the ``reserved`` the difference is counted from and only
by a newer version, and the stock item's ``reserved`` moved by the difference (an increment).
The reservation's version is the record of what was applied: the event's own version there is a
duplicate, a higher one makes it stale, and neither writes anything. What the reservation holds
is taken from the order's index before it is read (``OrderIndex.foreseen``: the quantity the
version it replaces wanted there), so a change writes first; a refused write (a shortfall
reserved less than was wanted, a delivery of that version still on its way, the reservation
already at this version) reads it and decides again. What an event reserves is what its version
wants, as far as stock allows: ``reserved + difference <= onHand`` is the increment's condition,
checked by the store in the batch, so two orders racing for the last unit cannot both get it;
the loser reads what is left, reserves that and records the rest as backordered. Shortfall is a
business outcome (``Decision.measures["stock.shortfall"]``), not an error. A release is
conditional on ``reserved`` holding at least what it gives back: a stock item with less reserved
than an order's reservation says was changed by hand, and the event is held (systemic) rather
than driving ``reserved`` below zero.

Why a reservation that holds nothing is a tombstone and not deleted (the gate's trap,
``shared.kit.consumer``): v1 passes the order's index, then v2 passes it and releases SKU A; a
delivery of v1 still running reads A and must find v2 there, or it would reserve for v1 again,
for good: stock held by nobody. So the release writes v2's zero reservation with a ``ttl``
(``inventory.RELEASED_TTL_S``) longer than any older delivery may still write after v2 passed
the gate (the kit's write window, enforced by each delivery); a SKU the index knows and v2 does
not want gets v2's tombstone even when nothing is there yet, since an older delivery may be on
its way to it. Then the tombstone expires and the partition is back to the orders holding stock.

Requests per event and SKU (make bench, target 9): one batch in each SKU it reaches (the floor)
when the reservation holds what the index's version wanted there (nothing for an
``OrderAccepted``, nothing for a SKU no version wanted, zero in a SKU only an earlier version
wanted: its tombstone); otherwise the refused batch, a read of the reservation and one batch
(a SKU whose last version was short of stock, a tombstone already expired); a shortfall, one
read of the stock item and one more batch; a duplicate, the read that finds its version (a
redelivery reads first: ``shared.kit.consumer.Blind``). The index: one create for an
``OrderAccepted``, a read and a patch for a change (the read is what the SKUs' writes are
taken from: the SKUs and lines of the version it replaces); a redelivery reads it once more to
find it still at its version, and patches it (the same version set again) before its first
write behind the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from idempotent_consumer import (
    Again,
    Condition,
    ConditionFailed,
    Create,
    DocumentMissing,
    Patch,
    Read,
    Resolution,
    Retry,
    Room,
    Stale,
    SystemicStoreError,
    TransientStoreError,
    ValidEvent,
    Write,
    WriteRefused,
    increment,
    set_field,
)

from shared.stock.contract import ORDER_ACCEPTED, wanted
from shared.stock.inventory import (
    ORDER_INDEX_ID,
    STOCK_ITEM_ID,
    Field,
    order_index,
    order_partition,
    reservation,
    reservation_id,
    stored_int,
)

SHORTFALL = "stock.shortfall"


class OrderIndex:
    """The gate: the order's index committed first (``shared.kit.consumer.Gate``). A version at
    or below the index's is stale for the whole event; otherwise the index takes this version,
    its lines and the union of the SKUs, and the event then visits every SKU in it."""

    def __init__(self, event: ValidEvent) -> None:
        self.partition_key = order_partition(event.order_id)
        # An OrderAccepted is version 1: the common case is no index yet, so no read first.
        self._blind = event.message_type == ORDER_ACCEPTED
        self._skus: list[str] = list(wanted(event))
        self._seen_version: int | None = None  # the index's version, as last read
        self.foreseen: Mapping[str, int | None] | None = {} if self._blind else None
        """What the index this event replaces says each SKU's reservation holds for the order:
        the quantity its version wanted, 0 for a SKU only an earlier version wanted (released),
        absent (None) for a SKU no version wanted; None as a whole when unknown (an index
        written before it kept its lines, or a redelivery's: its own). What ``Reserve``
        assumes, never trusts: each of its writes is conditional on it."""

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write] | Stale:
        own = wanted(event)
        if self._blind:
            return [Create(order_index(event.order_id, event.version, own, own))]
        stored = await read(ORDER_INDEX_ID)
        if stored is None:
            self.foreseen = {}  # no version passed the gate: no SKU holds anything for it
            return [Create(order_index(event.order_id, event.version, own, own))]
        version = self._saw(stored, event)
        if version >= event.version:
            return Stale(version)
        self.foreseen = _foreseen(stored)
        updated = order_index(event.order_id, event.version, self._skus, own)
        operations = [
            set_field(Field.ORDER_VERSION, event.version),
            set_field(Field.SKUS, updated[Field.SKUS]),
            set_field(Field.LINES, updated[Field.LINES]),
        ]
        # From the version it was read at: a concurrent version's SKUs are never overwritten,
        # and what ``foreseen`` took from it is the index this version replaces.
        return [Patch(ORDER_INDEX_ID, operations, Condition(equals={Field.ORDER_VERSION: version}))]

    async def resolve(
        self, event: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        self._blind = False  # an index exists (or changed): read it
        return Again()

    async def partitions(
        self, event: ValidEvent, read: Read, *, again: bool
    ) -> Sequence[str] | None:
        # What the last plan saw (the stored index's SKUs with this version's): every SKU an
        # earlier version could have reserved in. A redelivery needs the index at its own
        # version (its SKUs are then exactly those this version committed); read it unless the
        # plan just did.
        if not again:
            return self._skus
        self.foreseen = None  # the index is this version's: it says nothing of the one before
        if self._seen_version != event.version:
            stored = await read(ORDER_INDEX_ID)
            if stored is None:
                raise TransientStoreError(
                    f"the index of order {event.order_id} is not readable yet, though its "
                    "marker is: a replica behind"
                )
            self._saw(stored, event)
        if self._seen_version is not None and self._seen_version > event.version:
            return None  # a later version passed the gate: it takes over every SKU
        if self._seen_version != event.version:
            raise TransientStoreError(
                f"the index of order {event.order_id} reads version {self._seen_version}, "
                f"behind version {event.version} its marker says it applied: a replica behind"
            )
        return self._skus

    def still_at(self, event: ValidEvent) -> Sequence[Write]:
        # The version set again, on the condition that it is still this one.
        at = Condition(equals={Field.ORDER_VERSION: event.version})
        return [Patch(ORDER_INDEX_ID, [set_field(Field.ORDER_VERSION, event.version)], at)]

    def _saw(self, stored: Mapping[str, Any], event: ValidEvent) -> int:
        """Remember the stored index's version and its SKUs with this event's; its version."""
        version = stored_int(stored, Field.ORDER_VERSION)
        self._seen_version = version
        self._skus = sorted({*stored.get(Field.SKUS, ()), *wanted(event)})
        return version


def _foreseen(stored: Mapping[str, Any]) -> dict[str, int | None] | None:
    """What each SKU's reservation holds for the order by the stored index (``OrderIndex.
    foreseen``): its version's lines, 0 in the SKUs only earlier versions wanted."""
    lines = stored.get(Field.LINES)
    if not isinstance(lines, Mapping):
        return None  # an index written before it kept its lines: read each reservation
    released: dict[str, int | None] = dict.fromkeys(stored.get(Field.SKUS, ()), 0)
    return {**released, **{sku: stored_int(lines, sku) for sku in lines}}


class Reserve:
    """The event's reservation in one SKU's partition (module docstring)."""

    def __init__(self, event: ValidEvent, sku: str) -> None:
        self.sku = sku
        self.requested = wanted(event).get(sku, 0)
        self._record_id = reservation_id(event.order_id)
        # What the reservation holds for the order (None: there is none), assumed until read:
        # an OrderAccepted first reaching a SKU finds none (no read first); a change assumes
        # what the index it replaces says (``foresee``), or reads.
        self._read = event.message_type != ORDER_ACCEPTED
        self._held: int | None = None
        self._stocked = True
        self.measures: dict[str, int] = {}

    def foresee(self, gate: object) -> None:
        """``shared.kit.consumer.Foreseeing``: assume what the order's index said."""
        if isinstance(gate, OrderIndex) and gate.foreseen is not None:
            self._read = False
            self._held = gate.foreseen.get(self.sku)

    def read_first(self) -> None:
        self._read = True  # a redelivery (shared.kit.consumer.Blind)

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write] | Stale:
        if self._read:
            record = await read(self._record_id)
            self._held = None if record is None else stored_int(record, Field.RESERVED)
            if record is not None:
                version = stored_int(record, Field.ORDER_VERSION)
                if version >= event.version:
                    return Stale(version)
        return self._moving(event, self.requested)

    def _moving(self, event: ValidEvent, granted: int) -> list[Write]:
        """Reserve ``granted`` for the order in this SKU: the reservation and the difference."""
        record = reservation(self.sku, event.order_id, event.version, self.requested, granted)
        writes: list[Write]
        if self._held is None:
            # Even a zero one: the tombstone an older delivery on its way here must meet.
            writes = [Create(record)]
        else:
            # Its ttl too: a tombstone taken up again holds stock and must never expire.
            changed = [
                Field.ORDER_VERSION,
                Field.REQUESTED,
                Field.RESERVED,
                Field.BACKORDERED,
                Field.TTL,
            ]
            operations = [set_field(name, record[name]) for name in changed]
            # Only from what the difference is counted from (``reserved`` as read or assumed)
            # and from an older version: whatever version wrote it meanwhile, the stock item
            # then moves by what the reservation really changes, and a newer version's
            # reservation (a tombstone included) is never overwritten.
            condition = Condition(
                below={Field.ORDER_VERSION: event.version}, equals={Field.RESERVED: self._held}
            )
            writes = [Patch(self._record_id, operations, condition)]
        difference = granted - (self._held or 0)
        if difference > 0 and self._stocked:
            room = Room(Field.RESERVED, difference, Field.ON_HAND)
            condition = Condition(room=(room,))
            writes.append(Patch(STOCK_ITEM_ID, [increment(Field.RESERVED, difference)], condition))
        elif difference < 0 and self._stocked:
            condition = Condition(at_least={Field.RESERVED: -difference})
            writes.append(Patch(STOCK_ITEM_ID, [increment(Field.RESERVED, difference)], condition))
        shortfall = self.requested - granted
        self.measures = {SHORTFALL: shortfall} if shortfall else {}
        return writes

    async def resolve(
        self, event: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        if write.document_id != STOCK_ITEM_ID:
            # The reservation is not what was assumed or read (a change reached this SKU first,
            # a shortfall reserved less than the index's lines, or it moved on since): read it;
            # a newer version there makes this one stale.
            self._read = True
            return Again()
        # The reservation's write, first in the batch, held: it holds ``_held``.
        if isinstance(refused, DocumentMissing):
            # No stock item: the SKU is not stocked (seed it with python -m ops stock). Nothing
            # can be reserved; what the order wants is backordered.
            self._stocked = False
            return Retry(self._moving(event, 0))
        stock = await read(STOCK_ITEM_ID)
        if not isinstance(refused, ConditionFailed) or stock is None:
            return Again()
        held = self._held or 0
        if isinstance(write, Patch) and write.condition is not None and write.condition.room:
            # Not enough free stock for all of it: reserve what is free now.
            free = stored_int(stock, Field.ON_HAND) - stored_int(stock, Field.RESERVED)
            return Retry(self._moving(event, min(self.requested, held + max(0, free))))
        raise SystemicStoreError(
            f"the stock item of SKU {self.sku!r} has {stock.get(Field.RESERVED)} reserved, less "
            f"than order {event.order_id}'s reservation of {held} it would release: changed by "
            "hand? (docs/operations.md, Stock reservation)"
        )
