"""The order lifecycle: OrderAmended and OrderCancelled, applied once each, in any order of
arrival, converging on the highest version: the order consumer's effect on the kit
(``shared.kit.apply``). No Azure imports.

The key of "handled" is (consumer name, MessageId), never the order id alone: one order has
many messages. Each handled change leaves an inbox marker written in the same atomic commit as
the order's change and its outbox event (``apply_once``), so the three are one fact:

1. ``[marker, patch order if older and accepted, create event]``: one request, the floor, for an
   applied change of an existing order.
2. The marker exists: a duplicate, or a mismatch (``HashMismatch``): the kit's.
3. The order does not exist yet: the change arrived before its OrderPlaced, which is no reason
   to wait. ``[marker, create order, create event]``: an amendment creates the order at its
   version (it carries the whole state), a cancellation a tombstone at its version. The late
   OrderPlaced then finds a newer version and is stale. Two requests.
4. The condition failed: the stored version is at or above this one (read to name both
   versions), so the change is **stale**: its marker alone. Three requests. Unless the stored
   order is cancelled at a lower version: a change after a cancellation breaks the producer's
   rule ("once cancelled, an order changes no more") and is dead-lettered ``InvalidTransition``
   naming both versions, with nothing written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from idempotent_consumer import (
    Again,
    ConditionFailed,
    Create,
    Decision,
    DocumentMissing,
    DocumentStore,
    Inbox,
    IncomingMessage,
    Patch,
    Read,
    Reject,
    Resolution,
    Retry,
    Stale,
    Write,
    WriteRefused,
    apply_once,
    bound,
    document_timestamp,
)

from shared.consumer.contract import ORDER_CANCELLED, DeadletterReason, ValidChange
from shared.consumer.errors import OrphanedDocument
from shared.consumer.order import (
    applies_over,
    change_patch,
    is_cancelled,
    order_from_change,
    stored_version,
)
from shared.relay.outbox import new_change_outbox_document

# This consumer's name: part of every marker's key and id. Stable forever: renamed, every
# retained or replayed message would be handled again as new.
CONSUMER_NAME = "orders"
# Its markers live in the order's partition (the orders container's partition key).
PARTITION_FIELD = "orderId"


def order_inbox(marker_ttl_s: int) -> Inbox:
    return Inbox(CONSUMER_NAME, PARTITION_FIELD, marker_ttl_s)


@dataclass(frozen=True, slots=True)
class OrderChange:
    """The effect of one change in its order's partition (``shared.kit.apply.Effect``): the
    order patched if older, and the change's outbox event."""

    event: tuple[Write, ...]  # the outbox event's create, or none with the outbox off
    correlation_id: str | None
    now: datetime

    async def writes(self, change: ValidChange, read: Read) -> list[Write]:
        order_id = change.order_id
        return [Patch(order_id, change_patch(change), applies_over(change.version)), *self.event]

    async def resolve(
        self, change: ValidChange, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        order_id = change.order_id
        if isinstance(refused, DocumentMissing):  # no order yet: this change creates it
            order = order_from_change(
                change, correlation_id=self.correlation_id, accepted_at=self.now
            )
            return Retry([Create(order), *self.event])
        if isinstance(refused, ConditionFailed):
            stored = await read(order_id)
            if stored is None:
                return Again()  # deleted meanwhile: decide again
            version = stored_version(stored)
            if is_cancelled(stored) and change.version > version:
                return _invalid_transition(change, version)
            if version < change.version and not is_cancelled(stored):
                return Again()  # changed back below us meanwhile (an operator's restore)
            return Stale(version)
        if refused.document_id == order_id:
            return Again()  # the order was created meanwhile: decide against it
        # The change's event exists without the change applied: the order was deleted and
        # recreated by hand; no commit of this change can ever succeed.
        raise OrphanedDocument(order_id, refused.document_id) from refused


async def decide_change(
    change: ValidChange,
    message: IncomingMessage,
    store: DocumentStore,
    *,
    marker_ttl_s: int,
    now: datetime,
    outbox_enabled: bool = True,
    traceparent: str | None = None,
) -> Decision:
    """Apply one OrderAmended or OrderCancelled once, or classify it (module docstring). Raises
    the store's transient and systemic errors for the caller to classify."""
    event: tuple[Write, ...] = ()
    if outbox_enabled:
        document = new_change_outbox_document(
            change,
            correlation_id=message.correlation_id,
            created_at=document_timestamp(now),
            traceparent=traceparent,
        )
        event = (Create(document),)
    effect = OrderChange(event, message.correlation_id, now)
    return await apply_once(
        store, order_inbox(marker_ttl_s), change, change.order_id, effect, now=now
    )


def _invalid_transition(change: ValidChange, cancelled_version: int) -> Reject:
    return Reject(
        DeadletterReason.INVALID_TRANSITION,
        bound(
            f"{change.message_type} version {change.version} of order {change.order_id} "
            f"follows its cancellation at version {cancelled_version}: a cancelled order "
            "changes no more"
            + (" (a second cancellation)" if change.message_type == ORDER_CANCELLED else "")
        ),
        cancelled_version,
    )
