"""Every error the kit understands, classified by what a redelivery can fix.

- the message is wrong: its contract rejects it (the instance's ``InvalidMessage``), dead-letter;
- the moment is wrong: ``TransientStoreError``, retry within the delivery, then abandon: a
  redelivery will likely succeed;
- the system is wrong: ``SystemicStoreError`` (``PartitionFull`` a reason of its own) /
  ``ConfigurationError``, hold and abandon, alert, never dead-letter (a healthy message must not
  be parked because our RBAC, our config or a full partition is broken);
- what is stored refused one write of an atomic commit (``WriteRefused`` and its kinds): not an
  error of anyone's, the information the kit and the instance decide on (duplicate, stale, a
  first arrival).

Imports nothing.
"""

from __future__ import annotations

# Dead-letter descriptions and log lines stay bounded (Service Bus keeps a description; ours are
# at most this long).
MAX_DESCRIPTION_CHARS = 1024


def bound(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """Cut text to ``limit`` characters; dead-letter descriptions and logs stay bounded."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InvalidMessage(Exception):
    """The message itself is wrong: no redelivery can fix it, so it is dead-lettered with
    ``reason`` (from its consumer's bounded set) and a bounded ``description``; nothing of it is
    written."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = bound(description)


class ConsumerError(Exception):
    """Base of the errors raised on purpose by the kit and its instances."""


class ConfigurationError(ConsumerError):
    """An app setting is missing or invalid; the message names the setting."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting


class StoreError(ConsumerError):
    """Base of the errors an ``OrderStore`` adapter raises."""


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


class PartitionFull(SystemicStoreError):
    """The logical partition a write goes to is at its storage limit, so the store refuses every
    write there (Cosmos DB: 20 GB per logical partition, learn.microsoft.com/azure/cosmos-db/
    concepts-limits; 403 with sub-status 1014). A systemic reason of its own: no redelivery can
    fix it until an operator frees the partition, so every message writing there is held
    (retried, abandoned, never dead-lettered by the consumer) and the partition's storage alert
    should have fired before it. Its type name is the reason (``PartitionFull``, the outcome's
    ``error.type`` and the start of its description). ``runbook``: where the app's operators
    read what to do (the app's own page, given to its store), named in the message when given;
    the kit knows no runbook of its own."""

    def __init__(self, problem: str, *, runbook: str | None = None) -> None:
        where = f" ({runbook})" if runbook else ""
        super().__init__(f"{problem}: the logical partition is full{where}")
        self.runbook = runbook


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
