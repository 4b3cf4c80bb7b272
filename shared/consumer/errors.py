"""Every error the core understands, classified by what a redelivery can fix.

- the message is wrong: the contract rejects it (``shared.consumer.contract.InvalidMessage``),
  dead-letter;
- the moment is wrong: ``TransientStoreError``, abandon, a redelivery will likely succeed;
- the system is wrong: ``SystemicStoreError`` / ``ConfigurationError``, abandon and alert, never
  dead-letter (a healthy order must not be parked because our RBAC or config is broken);
- the stored state of this one order is wrong: ``OrphanedDocument``, dead-letter with its own
  reason at once (no redelivery can fix it, and it concerns no other order).
"""

from __future__ import annotations


class ConsumerError(Exception):
    """Base of the errors raised on purpose by this package."""


class ConfigurationError(ConsumerError):
    """An app setting is missing or invalid; the message names the setting."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting


class StoreError(ConsumerError):
    """Base of the errors an ``OrderStore`` adapter raises."""


class OrderAlreadyExists(StoreError):
    """The create met an existing order with the same id: the dedup check fired (HTTP 409)."""


class TransientStoreError(StoreError):
    """Throttling, timeouts, 5xx, connection trouble: redelivery can fix it.

    ``retry_after_s``: how long the service asked the client to wait (a throttled operation's
    ``retryAfterMilliseconds`` or ``x-ms-retry-after-ms``), None when it said nothing. Data for
    the core's backoff, which stays pure: it never reads headers."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SystemicStoreError(StoreError):
    """Authentication, authorisation or a missing database/container: an operator must fix it."""


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


class WriteRefused(StoreError):
    """One write of an atomic commit was refused for what is stored, so nothing of the commit
    was written. ``index`` is the refused write's position in the commit; the core reads which
    one to tell a duplicate, a stale version and a first arrival apart."""

    def __init__(self, index: int, document_id: str, problem: str) -> None:
        super().__init__(f"write {index} ({document_id!r}) refused: {problem}")
        self.index = index
        self.document_id = document_id


class DocumentExists(WriteRefused):
    """A create met an existing document with the same id (HTTP 409)."""

    def __init__(self, index: int, document_id: str) -> None:
        super().__init__(index, document_id, "the document exists")


class DocumentMissing(WriteRefused):
    """A patch named a document that does not exist (HTTP 404 for that operation)."""

    def __init__(self, index: int, document_id: str) -> None:
        super().__init__(index, document_id, "no such document")


class ConditionFailed(WriteRefused):
    """A patch's condition did not hold for the stored document (HTTP 412)."""

    def __init__(self, index: int, document_id: str) -> None:
        super().__init__(index, document_id, "its condition does not hold")
