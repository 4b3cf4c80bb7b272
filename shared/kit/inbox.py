"""The inbox marker: the one owner of its stored shape.

A marker records that one consumer handled one message: its key is (consumer name, MessageId),
never the order id alone, because an order legitimately has many messages (placed, amended,
cancelled) and two consumers of one message each keep their own record. It lives in the order's
partition and is written in the same atomic commit as the change it records and that change's
outbox event, so "handled" and "applied" are one fact. A stale message (a version at or below
the one applied) gets a marker too, alone, so that its redelivery is a plain duplicate.

A marker expires (per-item ``ttl``, counted from its write: learn.microsoft.com/azure/cosmos-db/
nosql/time-to-live) after a window longer than the broker can redeliver the message, including a
dead letter replayed days later (``Settings.inbox_marker_ttl_s``). Correctness does not depend on
it: once it has expired, a redelivery meets the order's version and is ``stale``.

``OrderPlaced`` needs no marker: the order document is its own (its id is the MessageId), so a
new order stays one write. Pure: no Azure, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.clock import document_timestamp

INBOX_TYPE = "inbox"
# Characters Cosmos DB refuses in an id (learn.microsoft.com/rest/api/cosmos-db/documents:
# "id ... cannot contain '/', '\\', '?' or '#'"); '%' is escaped too so the escaping is
# reversible. Ids are at most 255 characters: a longer key is hashed.
_ESCAPED = {"%": "%25", "/": "%2F", "\\": "%5C", "?": "%3F", "#": "%23"}
_MAX_ID_CHARS = 255


class InboxField:
    """The stored field names of a marker (its JSON keys)."""

    ID = "id"
    ORDER_ID = "orderId"  # the partition key: the order the message is about
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


def marker_id(consumer: str, message_id: str) -> str:
    """``inbox:<consumer>:<MessageId>``, the MessageId's forbidden characters escaped; the
    SHA-256 of the key instead when that would be longer than an id may be."""
    escaped = "".join(_ESCAPED.get(character, character) for character in message_id)
    readable = f"{INBOX_TYPE}:{consumer}:{escaped}"
    if len(readable) <= _MAX_ID_CHARS:
        return readable
    digest = hashlib.sha256(f"{consumer}\n{message_id}".encode()).hexdigest()
    return f"{INBOX_TYPE}:{consumer}:sha256:{digest}"


def new_marker(
    *,
    consumer: str,
    message_id: str,
    order_id: str,
    message_type: str,
    order_version: int,
    request_hash: str,
    hash_algorithm: str,
    outcome: str,
    handled_at: datetime,
    ttl_s: int,
) -> dict[str, Any]:
    """The marker of one handled message."""
    return {
        InboxField.ID: marker_id(consumer, message_id),
        InboxField.ORDER_ID: order_id,
        InboxField.TYPE: INBOX_TYPE,
        InboxField.CONSUMER: consumer,
        InboxField.MESSAGE_ID: message_id,
        InboxField.MESSAGE_TYPE: message_type,
        InboxField.ORDER_VERSION: order_version,
        InboxField.REQUEST_HASH: request_hash,
        InboxField.HASH_ALGORITHM: hash_algorithm,
        InboxField.OUTCOME: outcome,
        InboxField.HANDLED_AT: document_timestamp(handled_at),
        InboxField.TTL: ttl_s,
    }


def is_marker(document: Mapping[str, Any]) -> bool:
    return document.get(InboxField.TYPE) == INBOX_TYPE
