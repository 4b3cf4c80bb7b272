"""The order lifecycle: OrderAmended and OrderCancelled, applied once each, in any order of
arrival, converging on the highest version. No Azure imports.

The key of "handled" is (consumer name, MessageId), never the order id alone: one order has
many messages. Each handled change leaves an inbox marker (``shared.consumer.inbox``) written in
the same atomic commit as the order's change and its outbox event, so the three are one fact:

1. ``[create marker, patch order if older and accepted, create event]``: one request, the floor,
   for an applied change of an existing order.
2. The marker exists: this consumer handled this MessageId. Its fingerprint tells a duplicate
   (complete) from other content under the same MessageId (dead-letter ``HashMismatch``).
3. The order does not exist yet: the change arrived before its OrderPlaced, which is no reason
   to wait. ``[create marker, create order, create event]``: an amendment creates the order at
   its version (it carries the whole state), a cancellation a tombstone at its version. The late
   OrderPlaced then finds a newer version and is stale. Two requests.
4. The condition failed: the stored version is at or above this one (read to name both versions),
   so the change is **stale**: completed, nothing changed but its own marker, written alone so
   that its redelivery is a plain duplicate. Three requests. Unless the stored order is cancelled
   at a lower version: a change after a cancellation breaks the producer's rule ("once
   cancelled, an order changes no more") and is dead-lettered ``InvalidTransition`` naming both
   versions, with nothing written.

Every step is one atomic commit or a read, so a stop anywhere leaves either nothing or the whole
change; the redelivery then meets its marker (duplicate) or does the work. A race with another
change of the same order is settled by the store: the commit whose condition no longer holds is
refused whole, and the decision starts again from what is stored (at most ``_MAX_ROUNDS``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.clock import document_timestamp
from shared.consumer.contract import (
    ORDER_CANCELLED,
    DeadletterReason,
    ValidChange,
    ValidOrder,
    bound,
)
from shared.consumer.errors import OrphanedDocument
from shared.consumer.order import (
    applies_over,
    change_patch,
    is_cancelled,
    order_from_change,
    stored_version,
)
from shared.kit.decision import Decision, DocumentStore, IncomingMessage, Outcome, decided
from shared.kit.errors import (
    ConditionFailed,
    DocumentExists,
    DocumentMissing,
    SystemicStoreError,
    TransientStoreError,
)
from shared.kit.inbox import InboxField, marker_id, new_marker
from shared.kit.writes import Create, Patch
from shared.relay.outbox import new_change_outbox_document

# This consumer's name: part of every marker's key and id. Stable forever: renamed, every
# retained or replayed message would be handled again as new.
CONSUMER_NAME = "orders"
# A change racing others of its order starts again from what is stored at most this many times;
# each round means another change committed, so more is a storm worth retrying later.
_MAX_ROUNDS = 3

Handled = ValidOrder | ValidChange


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
    """Apply one OrderAmended or OrderCancelled, or classify it (module docstring). Raises the
    store's transient and systemic errors for the caller to classify."""
    order_id = change.order_id
    marker = _marker(change, "processed", marker_ttl_s, now)
    event = (
        [
            Create(
                new_change_outbox_document(
                    change,
                    correlation_id=message.correlation_id,
                    created_at=document_timestamp(now),
                    traceparent=traceparent,
                )
            )
        ]
        if outbox_enabled
        else []
    )
    for _ in range(_MAX_ROUNDS):
        try:
            await store.commit(
                order_id,
                [
                    Create(marker),
                    Patch(order_id, change_patch(change), applies_over(change.version)),
                    *event,
                ],
            )
            return _applied(change)
        except DocumentExists as refused:
            if refused.index == 0:
                return await compare_with_marker(change, store)
            raise OrphanedDocument(order_id, refused.document_id) from refused
        except DocumentMissing:
            order = order_from_change(
                change, correlation_id=message.correlation_id, accepted_at=now
            )
            try:
                await store.commit(order_id, [Create(marker), Create(order), *event])
                return _applied(change)
            except DocumentExists as refused:
                if refused.index == 0:
                    return await compare_with_marker(change, store)
                if refused.index == 1:
                    continue  # the order was created meanwhile: decide against it
                raise OrphanedDocument(order_id, refused.document_id) from refused
        except ConditionFailed:
            stored = await store.read(order_id, order_id)
            if stored is None:
                continue  # deleted meanwhile: decide again
            version = stored_version(stored)
            if is_cancelled(stored) and change.version > version:
                return _invalid_transition(change, version)
            if version < change.version and not is_cancelled(stored):
                continue  # changed back below us meanwhile (an operator's restore): try again
            return await record_stale(change, version, store, marker_ttl_s=marker_ttl_s, now=now)
    raise TransientStoreError(
        f"order {order_id} changed under {_MAX_ROUNDS} attempts to apply version {change.version}"
    )


async def record_stale(
    handled: Handled, version: int, store: DocumentStore, *, marker_ttl_s: int, now: datetime
) -> Decision:
    """A first delivery of a version at or below the stored one: its marker alone, so that its
    redelivery is a duplicate; the order and its events are untouched."""
    marker = _marker(handled, "stale", marker_ttl_s, now)
    try:
        await store.commit(handled.order_id, [Create(marker)])
    except DocumentExists:
        return await compare_with_marker(handled, store)
    return decided(
        Outcome.STALE,
        handled,
        stored_version=version,
        description=f"{handled.message_type} version {handled.version} is stale: the order is "
        f"at version {version}",
    )


async def compare_with_marker(handled: Handled, store: DocumentStore) -> Decision:
    """This consumer handled this MessageId before: the same content is a duplicate, other
    content a mismatch (``HashMismatch``, naming both fingerprints)."""
    message_id = _message_id(handled)
    stored = await store.read(handled.order_id, marker_id(CONSUMER_NAME, message_id))
    if stored is None:
        # Refused as existing, then gone: it expired (its ttl) in between. Decide again.
        raise TransientStoreError(f"marker of {message_id!r} conflicted but could not be read")
    algorithm = stored.get(InboxField.HASH_ALGORITHM)
    if algorithm != handled.hash_algorithm:
        # Written by a newer deployment (rolling upgrade): let it handle the redelivery.
        raise SystemicStoreError(f"marker of {message_id!r} uses unknown hash {algorithm!r}")
    stored_hash = stored.get(InboxField.REQUEST_HASH)
    if stored_hash == handled.request_hash:
        return decided(Outcome.DUPLICATE, handled)
    return decided(
        Outcome.MISMATCH,
        handled,
        deadletter_reason=DeadletterReason.HASH_MISMATCH,
        description=bound(
            f"MessageId {message_id!r} was handled as {stored.get(InboxField.MESSAGE_TYPE)} "
            f"version {stored.get(InboxField.ORDER_VERSION)} with {algorithm} hash "
            f"{stored_hash}; this {handled.message_type} version {handled.version} hashes to "
            f"{handled.request_hash}"
        ),
    )


def _applied(change: ValidChange) -> Decision:
    return decided(
        Outcome.PROCESSED,
        change,
    )


def _invalid_transition(change: ValidChange, cancelled_version: int) -> Decision:
    return decided(
        Outcome.INVALID,
        change,
        stored_version=cancelled_version,
        deadletter_reason=DeadletterReason.INVALID_TRANSITION,
        description=bound(
            f"{change.message_type} version {change.version} of order {change.order_id} "
            f"follows its cancellation at version {cancelled_version}: a cancelled order "
            "changes no more"
            + (" (a second cancellation)" if change.message_type == ORDER_CANCELLED else "")
        ),
    )


def _marker(handled: Handled, outcome: str, ttl_s: int, now: datetime) -> dict[str, Any]:
    return new_marker(
        consumer=CONSUMER_NAME,
        message_id=_message_id(handled),
        order_id=handled.order_id,
        message_type=handled.message_type,
        order_version=handled.version,
        request_hash=handled.request_hash,
        hash_algorithm=handled.hash_algorithm,
        outcome=outcome,
        handled_at=now,
        ttl_s=ttl_s,
    )


def _message_id(handled: Handled) -> str:
    # An OrderPlaced's MessageId is its orderId (the contract checked it).
    return handled.message_id if isinstance(handled, ValidChange) else handled.order_id
