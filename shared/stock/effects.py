"""The stock reservation's effects on the kit (``shared.kit.apply.Effect``): the order's index
(the gate: one version check for the whole event, and the SKUs it concerns) and the reservation
in one SKU's partition. No Azure imports.

In a SKU's partition one event is one transactional batch (``apply_once``): the consumer's marker
for (this event, this SKU), the order's reservation changed only from the version it was read
at, and the stock item's ``reserved`` moved by the difference (an increment). What an event
reserves is what its version wants, as far as stock allows: ``reserved + difference <= onHand``
is the increment's condition, checked by the store in the batch, so two orders racing for the
last unit cannot both get it; the loser reads what is left, reserves that and records the rest
as backordered. Shortfall is a business outcome (``Decision.measures["stock.shortfall"]``), not
an error. A release is conditional on ``reserved`` holding at least what it gives back: a stock
item with less reserved than an order's reservation says was changed by hand, and the event is
held (systemic) rather than driving ``reserved`` below zero.

Requests per event and SKU (make bench): an ``OrderAccepted`` in a SKU it first reaches, one
batch (the floor); a change, a read of the reservation and one batch; a shortfall, one read of
the stock item and one more batch. The index: one create for an ``OrderAccepted``, a read and a
patch for a change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.kit.apply import Again, Read, Resolution, Retry, Stale
from shared.kit.errors import (
    ConditionFailed,
    DocumentMissing,
    SystemicStoreError,
    WriteRefused,
)
from shared.kit.message import ValidEvent
from shared.kit.writes import Condition, Create, Patch, Room, Write, increment, set_field
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
    or below the index's is stale for the whole event; otherwise the index takes this version
    and the union of the SKUs, and the event then visits every SKU in it."""

    def __init__(self, event: ValidEvent) -> None:
        self.partition_key = order_partition(event.order_id)
        # An OrderAccepted is version 1: the common case is no index yet, so no read first.
        self._blind = event.message_type == ORDER_ACCEPTED
        self._skus: list[str] = list(wanted(event))

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write] | Stale:
        own = wanted(event)
        if self._blind:
            return [Create(order_index(event.order_id, event.version, own))]
        stored = await read(ORDER_INDEX_ID)
        if stored is None:
            return [Create(order_index(event.order_id, event.version, own))]
        version = stored_int(stored, Field.ORDER_VERSION)
        skus = {*stored.get(Field.SKUS, ()), *own}
        self._skus = sorted(skus)
        if version >= event.version:
            return Stale(version)
        updated = order_index(event.order_id, event.version, skus)
        operations = [
            set_field(Field.ORDER_VERSION, event.version),
            set_field(Field.SKUS, updated[Field.SKUS]),
        ]
        # From the version it was read at: a concurrent version's SKUs are never overwritten.
        return [Patch(ORDER_INDEX_ID, operations, Condition(equals={Field.ORDER_VERSION: version}))]

    async def resolve(
        self, event: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        self._blind = False  # an index exists (or changed): read it
        return Again()

    async def partitions(self, event: ValidEvent, read: Read) -> Sequence[str]:
        # What the last plan saw (the stored index's SKUs with this version's): every SKU an
        # earlier version could have reserved in.
        return self._skus


class Reserve:
    """The event's reservation in one SKU's partition (module docstring)."""

    def __init__(self, event: ValidEvent, sku: str) -> None:
        self.sku = sku
        self.requested = wanted(event).get(sku, 0)
        self._record_id = reservation_id(event.order_id)
        # An OrderAccepted first reaching a SKU finds no reservation: no read first.
        self._blind = event.message_type == ORDER_ACCEPTED
        self._record: Mapping[str, Any] | None = None
        self._stocked = True
        self.measures: dict[str, int] = {}

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write] | Stale:
        self._record = None if self._blind else await read(self._record_id)
        if self._record is not None:
            version = stored_int(self._record, Field.ORDER_VERSION)
            if version >= event.version:
                return Stale(version)
        return self._moving(event, self.requested)

    def _held(self) -> int:
        return 0 if self._record is None else stored_int(self._record, Field.RESERVED)

    def _moving(self, event: ValidEvent, granted: int) -> list[Write]:
        """Reserve ``granted`` for the order in this SKU: the reservation and the difference."""
        record = reservation(self.sku, event.order_id, event.version, self.requested, granted)
        writes: list[Write]
        if self._record is None:
            writes = [Create(record)]
        else:
            changed = [Field.ORDER_VERSION, Field.REQUESTED, Field.RESERVED, Field.BACKORDERED]
            read_at = {Field.ORDER_VERSION: stored_int(self._record, Field.ORDER_VERSION)}
            operations = [set_field(name, record[name]) for name in changed]
            writes = [Patch(self._record_id, operations, Condition(equals=read_at))]
        difference = granted - self._held()
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
            # The reservation exists (a change reached this SKU first) or moved on since it was
            # read: read it again; a newer version there makes this one stale.
            self._blind = False
            return Again()
        if isinstance(refused, DocumentMissing):
            # No stock item: the SKU is not stocked (seed it with python -m ops stock). Nothing
            # can be reserved; what the order wants is backordered.
            self._stocked = False
            return Retry(self._moving(event, 0))
        stock = await read(STOCK_ITEM_ID)
        if not isinstance(refused, ConditionFailed) or stock is None:
            return Again()
        held = self._held()
        if isinstance(write, Patch) and write.condition is not None and write.condition.room:
            # Not enough free stock for all of it: reserve what is free now.
            free = stored_int(stock, Field.ON_HAND) - stored_int(stock, Field.RESERVED)
            return Retry(self._moving(event, min(self.requested, held + max(0, free))))
        raise SystemicStoreError(
            f"the stock item of SKU {self.sku!r} has {stock.get(Field.RESERVED)} reserved, less "
            f"than order {event.order_id}'s reservation of {held} it would release: changed by "
            "hand? (docs/operations.md, Stock reservation)"
        )
