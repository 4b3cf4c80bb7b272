"""The order consumer's own errors; the kit's (``shared.kit.errors``) classify the rest by what a
redelivery can fix.

- the message is wrong: the contract rejects it (``shared.consumer.contract.InvalidMessage``),
  dead-letter;
- the moment is wrong: ``TransientStoreError``, abandon, a redelivery will likely succeed;
- the system is wrong: ``SystemicStoreError`` / ``ConfigurationError``, abandon and alert, never
  dead-letter (a healthy order must not be parked because our RBAC or config is broken);
- the stored state of this one order is wrong: ``OrphanedDocument``, dead-letter with its own
  reason at once (no redelivery can fix it, and it concerns no other order).
"""

from __future__ import annotations

from idempotent_consumer import StoreError


class OrderAlreadyExists(StoreError):
    """The create met an existing order with the same id: the dedup check fired (HTTP 409)."""


class OrphanedDocument(StoreError):
    """A document of the order (its outbox event) exists but the order does not: the order was
    deleted by hand or expired while its event remained. Every create of the order conflicts on
    that document, so no redelivery can succeed, and unlike a systemic failure it concerns this
    one order, not the system: the core dead-letters the message at once with its own reason
    (``OrphanedDocument``), naming the document, for an operator to remove or restore it and
    resubmit (docs/operations.md, runbook by dead-letter reason)."""

    def __init__(self, order_id: str, document_id: str) -> None:
        super().__init__(
            f"order {order_id} cannot be created: its document {document_id!r} already exists "
            "without the order (deleted or expired order; remove or restore the document)"
        )
        self.order_id = order_id
        self.document_id = document_id
