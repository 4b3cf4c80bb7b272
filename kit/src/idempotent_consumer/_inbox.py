"""The inbox: one consumer's markers of the messages it handled, and the one owner of their shape.

A marker records that one consumer handled one message: its key is (consumer name, MessageId),
never a business id alone, because one order legitimately has many messages (placed, amended,
cancelled) and two consumers of one message each keep their own record. It lives in the
partition of what the message changed, written in the same atomic commit as the change (and the
change's outbox event, where the consumer has one), so "handled" and "applied" are one fact. A
stale message (a version at or below the one applied) gets a marker too, alone, so that its
redelivery is a plain duplicate.

A marker expires (per-item ``ttl``, counted from its write: learn.microsoft.com/azure/cosmos-db/
nosql/time-to-live) after a window longer than the broker can redeliver the message, including a
dead letter replayed days later (``Settings.inbox_marker_ttl_s``). Correctness must not depend on
it: a consumer keeps a version where its effect is not a plain create, so that after the marker
expired a redelivery is caught as ``stale``.

Pure: no Azure, no I/O beyond the ``DocumentStore`` port it is handed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from idempotent_consumer._clock import document_timestamp
from idempotent_consumer._decision import AboutMessage, Decision, DocumentStore, Outcome, decided
from idempotent_consumer._errors import DocumentExists, SystemicStoreError, TransientStoreError
from idempotent_consumer._writes import Create

INBOX_TYPE = "inbox"
PROCESSED = "processed"
STALE = "stale"
# The dead-letter reason of the kit's own: the same MessageId with other content.
HASH_MISMATCH = "HashMismatch"
# Characters Cosmos DB refuses in an id (learn.microsoft.com/rest/api/cosmos-db/documents:
# "id ... cannot contain '/', '\\', '?' or '#'"); '%' is escaped too so the escaping is
# reversible. Ids are at most 255 characters: a longer key is hashed.
_ESCAPED = {"%": "%25", "/": "%2F", "\\": "%5C", "?": "%3F", "#": "%23"}
_ESCAPED_SCOPE = {**_ESCAPED, ":": "%3A"}
_MAX_ID_CHARS = 255
_MAX_DESCRIPTION_CHARS = 1024


class InboxField:
    """The stored field names of a marker (its JSON keys); besides these, a marker carries its
    partition key under the store's own field (``Inbox.partition_field``)."""

    ID = "id"
    TYPE = "type"
    CONSUMER = "consumer"
    MESSAGE_ID = "messageId"
    MESSAGE_TYPE = "messageType"
    ORDER_VERSION = "orderVersion"
    REQUEST_HASH = "requestHash"
    HASH_ALGORITHM = "hashAlgorithm"
    OUTCOME = "outcome"  # processed or stale
    HANDLED_AT = "handledAt"
    TTL = "ttl"


class Handled(AboutMessage, Protocol):
    """What the inbox needs of a valid message: its key and its fingerprint."""

    @property
    def message_id(self) -> str: ...

    @property
    def hash_algorithm(self) -> str: ...


def marker_id(consumer: str, message_id: str) -> str:
    """``inbox:<consumer>:<MessageId>``, the MessageId's forbidden characters escaped; the
    SHA-256 of the key instead when that would be longer than an id may be."""
    return keyed_id(INBOX_TYPE, consumer, message_id)


def keyed_id(kind: str, scope: str, key: str) -> str:
    """``<kind>:<scope>:<key>``, a document id for a key that is someone else's text (a
    MessageId, an Idempotency-Key): the characters Cosmos DB refuses in an id escaped in both,
    and ``:`` too in ``scope``, so that no (scope, key) pair reads as another; the SHA-256 of
    ``scope`` and ``key`` instead when that would be longer than an id may be. ``kind`` and the
    scopes the consumers use (their names) have none of these characters, so a marker's id is
    what it always was."""
    scope_text = "".join(_ESCAPED_SCOPE.get(character, character) for character in scope)
    escaped = "".join(_ESCAPED.get(character, character) for character in key)
    readable = f"{kind}:{scope_text}:{escaped}"
    if len(readable) <= _MAX_ID_CHARS:
        return readable
    digest = hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()
    return f"{kind}:{scope_text}:sha256:{digest}"


def is_marker(document: Mapping[str, Any]) -> bool:
    return document.get(InboxField.TYPE) == INBOX_TYPE


@dataclass(frozen=True, slots=True)
class Inbox:
    """One consumer's markers in its store: ``consumer`` is part of every key, stable forever (a
    rename would handle every retained or replayed message again as new); ``partition_field``
    the store's partition key field (``orderId``, ``sku``); ``ttl_s`` how long a marker is kept."""

    consumer: str
    partition_field: str
    ttl_s: int

    def marker(
        self, handled: Handled, partition_key: str, outcome: str, now: datetime
    ) -> dict[str, Any]:
        """The marker of one handled message, to commit with what it changed."""
        return {
            InboxField.ID: marker_id(self.consumer, handled.message_id),
            self.partition_field: partition_key,
            InboxField.TYPE: INBOX_TYPE,
            InboxField.CONSUMER: self.consumer,
            InboxField.MESSAGE_ID: handled.message_id,
            InboxField.MESSAGE_TYPE: handled.message_type,
            InboxField.ORDER_VERSION: handled.version,
            InboxField.REQUEST_HASH: handled.request_hash,
            InboxField.HASH_ALGORITHM: handled.hash_algorithm,
            InboxField.OUTCOME: outcome,
            InboxField.HANDLED_AT: document_timestamp(now),
            InboxField.TTL: self.ttl_s,
        }

    async def compare(self, store: DocumentStore, handled: Handled, partition_key: str) -> Decision:
        """This consumer handled this MessageId before (its marker exists): the same content is
        a duplicate, other content a mismatch (``HashMismatch``, naming both fingerprints)."""
        message_id = handled.message_id
        stored = await store.read(partition_key, marker_id(self.consumer, message_id))
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
        description = (
            f"MessageId {message_id!r} was handled as {stored.get(InboxField.MESSAGE_TYPE)} "
            f"version {stored.get(InboxField.ORDER_VERSION)} with {algorithm} hash "
            f"{stored_hash}; this {handled.message_type} version {handled.version} hashes to "
            f"{handled.request_hash}"
        )
        return decided(
            Outcome.MISMATCH,
            handled,
            deadletter_reason=HASH_MISMATCH,
            description=description[:_MAX_DESCRIPTION_CHARS],
        )

    async def handled_as(
        self, store: DocumentStore, handled: Handled, partition_key: str
    ) -> str | None:
        """How this consumer first handled this MessageId in this partition (``PROCESSED`` or
        ``STALE``), or None when it has no marker there."""
        stored = await store.read(partition_key, marker_id(self.consumer, handled.message_id))
        return None if stored is None else str(stored.get(InboxField.OUTCOME))

    async def record_stale(
        self,
        store: DocumentStore,
        handled: Handled,
        partition_key: str,
        *,
        stored_version: int,
        now: datetime,
    ) -> Decision:
        """A first delivery of a version at or below the stored one: its marker alone, so that
        its redelivery is a duplicate; nothing else is touched."""
        try:
            await store.commit(
                partition_key, [Create(self.marker(handled, partition_key, STALE, now))]
            )
        except DocumentExists:
            return await self.compare(store, handled, partition_key)
        return decided(
            Outcome.STALE,
            handled,
            stored_version=stored_version,
            description=f"{handled.message_type} version {handled.version} is stale: version "
            f"{stored_version} is applied",
        )
