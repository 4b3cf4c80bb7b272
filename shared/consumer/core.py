"""The decision core: a message in, an outcome and its settlement out. No Azure imports.

The create itself is the deduplication check: the order document's id is the MessageId, so a
second create of the same order conflicts (409) inside Cosmos DB's own uniqueness guarantee. Only
then is the stored order read to tell a duplicate (same fingerprint: complete) from a different
request reusing the id (dead-letter ``HashMismatch``). A new order therefore costs one write; there
is no "in progress" record to write first and clean up after, as two-phase designs need.

Nothing is completed unless its effect is committed: ``Settlement.COMPLETE`` is only decided after
the store confirmed the write or a stored order with the same fingerprint was read back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from idempotent_consumer import (
    SYSTEM_CLOCK,
    Clock,
    Decision,
    DocumentStore,
    IncomingMessage,
    InvalidMessage,
    Outcome,
    SystemicStoreError,
    TransientStoreError,
    bound,
    decided,
    document_timestamp,
    failed,
    refused,
)

from shared.consumer.contract import (
    CONTRACT_FIELDS,
    FINGERPRINT_ALGORITHMS,
    ORDER_PLACED,
    DeadletterReason,
    ValidChange,
    ValidOrder,
    parse_message,
)
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument
from shared.consumer.lifecycle import decide_change, order_inbox
from shared.consumer.order import placed_order, stored_version
from shared.relay.outbox import new_outbox_document


class OrderStore(DocumentStore, Protocol):
    """The order consumer's store: the kit's atomic commit and read, and the OrderPlaced path's
    create (the order document is its own marker). Adapters translate their errors into
    ``shared.kit.errors`` and ``shared.consumer.errors``."""

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Write all documents of one order atomically. Raise ``OrderAlreadyExists`` if the
        first (the order) exists, ``OrphanedDocument`` if another one exists without it. One
        request: a single create, or one transactional batch."""
        ...

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None: ...


# Fields an amendment may change: a mismatch against an amended order cannot compare them.
_AMENDABLE = frozenset({"customerId", "currency", "placedAt", "lines"})
# How long an inbox marker is kept when the caller does not say; the app passes its setting
# (``Settings.inbox_marker_ttl_s``, whose default this equals: tests/unit/test_config.py): the
# queue's lockDuration x maxDeliveryCount + message TTL + a 14-day dead-letter replay horizon.
DEFAULT_MARKER_TTL_S = 60 * 10 + 14 * 24 * 3600 + 14 * 24 * 3600
# The dead-letter reason of an order whose outbox event exists without the order (a reason of
# the consumer's bounded set; ``shared.consumer.contract.DeadletterReason`` holds the contract's
# own).
ORPHANED_DOCUMENT = "OrphanedDocument"


def build_documents(
    valid: ValidOrder,
    message: IncomingMessage,
    *,
    outbox_enabled: bool,
    accepted_at: datetime,
    traceparent: str | None = None,
) -> list[dict[str, Any]]:
    """The order document, then (with the outbox on) its OrderAccepted event, same partition.

    ``traceparent`` is the W3C trace context of the consumer's processing span, as a string the
    telemetry adapter supplies (this core knows no tracing library); stored on the outbox event,
    it lets the relay's publish span link back to the consumer's trace."""
    accepted = document_timestamp(accepted_at)
    order = placed_order(
        valid,
        message_id=message.message_id,
        correlation_id=message.correlation_id,
        delivery_count=message.delivery_count,
        accepted_at=accepted,
    )
    if not outbox_enabled:
        return [order]
    outbox = new_outbox_document(
        valid,
        correlation_id=message.correlation_id,
        causation_id=message.message_id,
        created_at=accepted,
        traceparent=traceparent,
    )
    return [order, outbox]


async def decide(
    message: IncomingMessage,
    store: OrderStore,
    *,
    outbox_enabled: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    traceparent: str | None = None,
    marker_ttl_s: int = DEFAULT_MARKER_TTL_S,
) -> Decision:
    """Validate, write once, and classify. Never raises for a message-level problem.
    ``traceparent``: the consumer span's, stored on the outbox event (``build_documents``);
    ``marker_ttl_s``: how long an inbox marker is kept (``shared.kit.inbox``)."""
    try:
        valid = parse_message(message.body, message.message_id, message.subject)
    except InvalidMessage as invalid:
        return refused(message, invalid, message.subject or ORDER_PLACED)
    try:
        if isinstance(valid, ValidChange):
            return await decide_change(
                valid,
                message,
                store,
                marker_ttl_s=marker_ttl_s,
                now=clock.now(),
                outbox_enabled=outbox_enabled,
                traceparent=traceparent,
            )
        documents = build_documents(
            valid,
            message,
            outbox_enabled=outbox_enabled,
            accepted_at=clock.now(),
            traceparent=traceparent,
        )
        try:
            await store.create(documents)
        except OrderAlreadyExists:
            return await _compare_with_stored(valid, store, marker_ttl_s, clock)
        return decided(Outcome.PROCESSED, valid)
    except OrphanedDocument as orphan:
        return _orphaned(valid, orphan)
    except TransientStoreError as error:
        return failed(Outcome.TRANSIENT, valid, error)
    except SystemicStoreError as error:
        return failed(Outcome.SYSTEMIC, valid, error)
    except Exception as error:  # noqa: BLE001 - anything else: abandon, log with stack trace
        return failed(Outcome.UNEXPECTED, valid, error)


async def _compare_with_stored(
    valid: ValidOrder, store: OrderStore, marker_ttl_s: int, clock: Clock
) -> Decision:
    stored = await store.read_order(valid.order_id)
    if stored is None:
        # The order conflicted, then was gone: deleted between the create and this read. A retry
        # creates it afresh, or, if its outbox event survived the deletion, meets that event and
        # ends systemic (``OrphanedDocument``): a conflict on any document but the order never
        # reaches this read.
        raise TransientStoreError(f"order {valid.order_id} conflicted but could not be read")
    if stored.get("requestHash") is None:
        # Created by an amendment or a cancellation that arrived first: a newer version.
        return await order_inbox(marker_ttl_s).record_stale(
            store,
            valid,
            valid.order_id,
            stored_version=stored_version(stored),
            now=clock.now(),
        )
    algorithm = stored.get("hashAlgorithm")
    fingerprint = FINGERPRINT_ALGORITHMS.get(str(algorithm))
    if fingerprint is None:
        # Written by a newer deployment with an algorithm this one does not know (rolling
        # upgrade). Dead-lettering would park a probably-healthy duplicate: let the newer code
        # handle the redelivery instead.
        raise SystemicStoreError(f"stored order uses unknown hash algorithm {algorithm!r}")
    incoming_hash = fingerprint(valid.fields)
    stored_hash = stored.get("requestHash")
    if incoming_hash == stored_hash:
        return decided(Outcome.DUPLICATE, valid, request_hash=incoming_hash)
    # An amended order's fields are no longer the placed ones: compare what it was placed with
    # where that is still stored, and say so otherwise.
    amended = stored_version(stored) > 1
    comparable = [name for name in CONTRACT_FIELDS if not (amended and name in _AMENDABLE)]
    differing = [name for name in comparable if stored.get(name) != valid.fields[name]]
    return decided(
        Outcome.MISMATCH,
        valid,
        request_hash=incoming_hash,
        deadletter_reason=DeadletterReason.HASH_MISMATCH,
        description=bound(
            f"order {valid.order_id} already exists with {algorithm} hash {stored_hash}; this "
            f"message hashes to {incoming_hash}; differing fields: "
            f"{', '.join(differing) or 'none visible (stored document changed)'}"
            + (f" (the order is at version {stored_version(stored)})" if amended else "")
        ),
    )


def _orphaned(valid: ValidOrder | ValidChange, orphan: OrphanedDocument) -> Decision:
    """The order's outbox event exists without the order: every redelivery would conflict on
    it the same way, and no other order is affected, so the message is dead-lettered at once
    with a reason of its own rather than held as systemic (which burned ``maxDeliveryCount``
    deliveries into an anonymous ``MaxDeliveryCountExceeded``). The stored state is what
    differs from the request: the outcome is a mismatch, like a ``HashMismatch``."""
    return decided(
        Outcome.MISMATCH,
        valid,
        deadletter_reason=ORPHANED_DOCUMENT,
        description=bound(
            f"order {valid.order_id} cannot be stored: its document {orphan.document_id!r} "
            "exists without the order (the order was deleted or expired); remove the document "
            "(or restore the order), then resubmit this message"
        ),
        error=orphan,
    )
