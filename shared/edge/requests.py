"""The public edge's stored documents, their one owner: the order's head and each request record.

One container, ``requests`` (partition key ``/orderId``), holds in each order's partition:

- the **head** (``id: "head"``): the client that placed the order, its ``placedAt``, the highest
  version the edge assigned (``orderVersion``) and its ``status`` (``open`` or ``cancelled``).
  No ``ttl``: it lives as long as the order may change (the container's ``defaultTtl`` must be
  -1, so that the records' own ``ttl`` counts: learn.microsoft.com/azure/cosmos-db/nosql/
  time-to-live). One small document per order: the container grows by orders, as the orders'
  own container does.
- a **request record** per (client, Idempotency-Key) used in that partition (``id:
  "request:<client>:<key>"``, escaped as inbox markers are: ``shared.kit.inbox.keyed_id``): the
  request's fingerprint, the version and MessageId it was given, the message to send (Subject
  and the exact body text), the response to replay, ``sent`` (false until the message was
  handed to the queue), ``startedAt`` and a per-item ``ttl``: -1 (never expires) until the
  message is sent, then ``KEY_EXPIRY_S``, set by the sent mark. An intent whose message was
  never sent (its instance stopped, its client never retried) is thus never lost to the ttl:
  its record waits, ``sent: false``, for a retry or the completer (``shared.edge.completer``)
  to send it.

The record, the head's create or version move, and so the message to send, are one atomic
commit (``shared.kit.writes``; on Cosmos DB one transactional batch): an intent is recorded
with its identity and its message, or not at all.

The Idempotency-Key (draft-ietf-httpapi-idempotency-key-header-06, the revision
``local/standins/payment_provider.py`` cites; sections are -06's):

- its format (sections 2.1, 2.5.2 and 5, "Establish a fixed format for the idempotency key and
  publish the key's specification. Always validate the key"): 1 to 255 visible ASCII characters
  (``%x21-7E``), the content of the header's RFC 8941 String; anything else is refused (400).
- its fingerprint (section 2.4, "Checksum of the entire request payload"): SHA-256 of the UTF-8
  bytes of ``json.dumps([method, path, body], sort_keys=True, separators=(",", ":"),
  ensure_ascii=False)``, ``body`` the parsed JSON as received. Key order and whitespace do not
  change it; every value, an unknown field included, does: the same key with another payload
  is the draft's 422 (section 2.7).
- its expiry (section 2.3, "The resource server SHOULD define such expiration policy and
  publish it"): ``KEY_EXPIRY_S``, 24 hours after the request was answered (the record's sent
  mark: a per-item ttl counts from the item's last write, learn.microsoft.com/azure/cosmos-db/
  nosql/time-to-live); a request never answered keeps its key until it is.
  Why 24 hours: it bounds how long a client may retry one intent and still be answered its
  first response (a browser tab reopened the next morning, a job re-run the next day), and it
  is what the key protects that needs it, not the messages: a resent message is absorbed by
  the queue's duplicate detection and the consumer whatever the key's age. Past it, a retry
  is still safe for a place (its order id is its key's: 409, the order exists, nothing sent)
  and for a cancellation (409, cancelled); an amendment's retry would become a new version
  with that amendment's state, over any later one: a client that may retry that late sends
  If-Match with the version it amended, and its late retry is refused (412) instead. Kept as
  ``KEY_EXPIRY``, the value the API advertises (documentation, headers).
- its scope (section 2.2, "Uniqueness of the key MUST be defined by the resource owner";
  section 5, "a unique composite key ... combining the idempotency key sent by the client with
  other client specific attributes known only to the resource server"): (the authenticated
  client, the order). A key is looked up in the order's partition: for a place the order the
  key itself names (``order_id_for``), for an amendment or cancellation the order of the path.
  So one client's keys never meet another's (the client is part of the id, and of a placed
  order's id), a retry reaches its record with one point read, and the same key sent for two
  different orders is two requests: a request's target is part of the request (the draft
  recognises "subsequent retries of the same request", section 2), as the path is part of
  the fingerprint.

Pure: no Azure, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from idempotent_consumer import (
    Condition,
    Create,
    Patch,
    document_timestamp,
    keyed_id,
    set_field,
    uuid5_text,
)

CONTAINER_NAME = "requests"
PARTITION_KEY_PATH = "/orderId"

HEAD_ID = "head"
HEAD_TYPE = "edge-head"
REQUEST_TYPE = "edge-request"
REQUEST_ID_KIND = "request"
STATUS_OPEN = "open"
STATUS_CANCELLED = "cancelled"

# The key's published lifetime (module docstring): a per-item ttl, counted from the last write.
KEY_EXPIRY = timedelta(hours=24)
KEY_EXPIRY_S = int(KEY_EXPIRY.total_seconds())
NEVER_EXPIRES = -1  # a per-item ttl of -1: the item never expires (the ttl page above)
# How long a committed record whose message is not yet marked sent counts as being processed
# by the instance that committed it (the draft's concurrent request, section 2.6: 409). Past
# it, the instance is taken as stopped and whoever retries sends the stored message. Longer
# than a send takes (the Service Bus client's operation timeout is well under it), short
# enough that a client's retry after a crash succeeds within seconds.
IN_PROGRESS_WINDOW = timedelta(seconds=10)

MAX_KEY_CHARS = 255
_KEY = re.compile(r"[\x21-\x7e]{1,255}")
# Fixed for ever: a retry years apart, on any instance, must derive the same order id.
ORDER_ID_NAMESPACE = uuid.UUID("3c0e7f5a-8d1b-4b6e-9f27-5a1d2c4e6b80")
ORDER_ID_PREFIX = "ord-"


class HeadField:
    """The stored field names of the head (its JSON keys)."""

    ID = "id"
    ORDER_ID = "orderId"
    TYPE = "type"
    CLIENT_ID = "clientId"
    PLACED_AT = "placedAt"
    ORDER_VERSION = "orderVersion"
    STATUS = "status"


class RequestField:
    """The stored field names of a request record (its JSON keys)."""

    ID = "id"
    ORDER_ID = "orderId"
    TYPE = "type"
    CLIENT_ID = "clientId"
    IDEMPOTENCY_KEY = "idempotencyKey"
    FINGERPRINT = "fingerprint"
    ORDER_VERSION = "orderVersion"
    MESSAGE_ID = "messageId"
    SUBJECT = "subject"
    MESSAGE_BODY = "messageBody"  # the exact UTF-8 text sent, so a resend is byte for byte
    RESPONSE = "response"  # {"status", "headers", "body"}
    SENT = "sent"
    STARTED_AT = "startedAt"
    TTL = "ttl"


def is_valid_key(key: str) -> bool:
    """The published key format: 1 to ``MAX_KEY_CHARS`` visible ASCII characters."""
    return _KEY.fullmatch(key) is not None


def parse_sf_string(value: str) -> str | None:
    """The RFC 8941 String ``value`` holds (section 4.2.5, after section 4.2's trimming of
    spaces), or None when it is not exactly one String (parameters are not accepted): the
    Idempotency-Key header's content ("an Item Structured Header [RFC 8941]. Its value MUST be
    a String", draft -06 section 2), for the edge's HTTP functions and the payment provider
    stand-in alike."""
    text = value.strip(" ")
    if len(text) < 2 or text[0] != '"':
        return None
    chars: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            if index + 1 >= len(text) or text[index + 1] not in '"\\':
                return None
            chars.append(text[index + 1])
            index += 2
            continue
        if char == '"':
            return "".join(chars) if index == len(text) - 1 else None
        if not 0x20 <= ord(char) <= 0x7E:
            return None
        chars.append(char)
        index += 1
    return None  # no closing quote


def order_id_for(client_id: str, key: str) -> str:
    """The order a place under ``key`` by ``client_id`` becomes: ``ord-`` and the UUIDv5 (RFC
    9562, section 5.5) of ``ORDER_ID_NAMESPACE`` and the UTF-8 name ``<client>\\n<key>``. The
    key has no line feed (``is_valid_key``) nor has a client id (``shared.edge.core``), so the
    name is one pair only. 40 characters: within the contract's orderId pattern."""
    return ORDER_ID_PREFIX + uuid5_text(ORDER_ID_NAMESPACE, f"{client_id}\n{key}")


def request_id(client_id: str, key: str) -> str:
    """The request record's id: ``request:<client>:<key>``, escaped (module docstring)."""
    return keyed_id(REQUEST_ID_KIND, client_id, key)


def request_fingerprint(method: str, path: str, body: Any) -> str:
    """SHA-256 of the request (module docstring); ``body`` holds only JSON values (NaN and the
    infinities are not: ``ValueError``)."""
    canonical = json.dumps(
        [method, path, body],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """The response a request's first handling gave, replayed to each repeat."""

    status: int
    headers: Mapping[str, str]
    body: Mapping[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status, "headers": dict(self.headers), "body": self.body}


@dataclass(frozen=True, slots=True)
class Intent:
    """One request, once accepted: who sent it under which key, about which order, and what it
    becomes (its version, its message, its response)."""

    client_id: str
    key: str
    order_id: str
    fingerprint: str
    version: int
    message_id: str
    subject: str
    message_body: bytes
    response: StoredResponse


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """A stored request record, read back."""

    fingerprint: str
    version: int
    message_id: str
    subject: str
    message_body: bytes
    response: StoredResponse
    sent: bool
    started_at: datetime

    def intent(self, client_id: str, key: str, order_id: str) -> Intent:
        """The intent this record holds, as the edge recorded it, for (client, key, order)."""
        return Intent(
            client_id=client_id,
            key=key,
            order_id=order_id,
            fingerprint=self.fingerprint,
            version=self.version,
            message_id=self.message_id,
            subject=self.subject,
            message_body=self.message_body,
            response=self.response,
        )


@dataclass(frozen=True, slots=True)
class Head:
    """The edge's head of an order, read back."""

    client_id: str
    placed_at: str
    version: int
    cancelled: bool


def new_request_record(intent: Intent, now: datetime) -> dict[str, Any]:
    return {
        RequestField.ID: request_id(intent.client_id, intent.key),
        RequestField.ORDER_ID: intent.order_id,
        RequestField.TYPE: REQUEST_TYPE,
        RequestField.CLIENT_ID: intent.client_id,
        RequestField.IDEMPOTENCY_KEY: intent.key,
        RequestField.FINGERPRINT: intent.fingerprint,
        RequestField.ORDER_VERSION: intent.version,
        RequestField.MESSAGE_ID: intent.message_id,
        RequestField.SUBJECT: intent.subject,
        RequestField.MESSAGE_BODY: intent.message_body.decode(),
        RequestField.RESPONSE: intent.response.as_json(),
        RequestField.SENT: False,
        RequestField.STARTED_AT: document_timestamp(now),
        RequestField.TTL: NEVER_EXPIRES,  # until it is sent (module docstring)
    }


def read_request_record(document: Mapping[str, Any]) -> RequestRecord:
    response = document[RequestField.RESPONSE]
    return RequestRecord(
        fingerprint=str(document[RequestField.FINGERPRINT]),
        version=int(document[RequestField.ORDER_VERSION]),
        message_id=str(document[RequestField.MESSAGE_ID]),
        subject=str(document[RequestField.SUBJECT]),
        message_body=str(document[RequestField.MESSAGE_BODY]).encode(),
        response=StoredResponse(
            status=int(response["status"]),
            headers={str(name): str(value) for name, value in response["headers"].items()},
            body=response["body"],
        ),
        sent=document[RequestField.SENT] is True,
        started_at=datetime.fromisoformat(str(document[RequestField.STARTED_AT])),
    )


def mark_sent(client_id: str, key: str) -> Patch:
    """The record's message was handed to the queue: a repeat replays without resending, and
    the key's expiry starts."""
    return Patch(
        request_id(client_id, key),
        [set_field(RequestField.SENT, True), set_field(RequestField.TTL, KEY_EXPIRY_S)],
    )


def new_head(intent: Intent, placed_at: str) -> dict[str, Any]:
    """The head of a placed order, created with its place's record (a create: a second place
    of the same order id conflicts)."""
    return {
        HeadField.ID: HEAD_ID,
        HeadField.ORDER_ID: intent.order_id,
        HeadField.TYPE: HEAD_TYPE,
        HeadField.CLIENT_ID: intent.client_id,
        HeadField.PLACED_AT: placed_at,
        HeadField.ORDER_VERSION: intent.version,
        HeadField.STATUS: STATUS_OPEN,
    }


def read_head(document: Mapping[str, Any]) -> Head:
    return Head(
        client_id=str(document[HeadField.CLIENT_ID]),
        placed_at=str(document[HeadField.PLACED_AT]),
        version=int(document[HeadField.ORDER_VERSION]),
        cancelled=document[HeadField.STATUS] == STATUS_CANCELLED,
    )


def move_head(read_version: int, version: int, *, cancelled: bool) -> Patch:
    """The head's move to ``version``, on the condition that it still is at the version read:
    of two writers that read the same head, one commits, the other's whole commit (its record
    included) is refused and it reads again."""
    operations = [set_field(HeadField.ORDER_VERSION, version)]
    if cancelled:
        operations.append(set_field(HeadField.STATUS, STATUS_CANCELLED))
    return Patch(HEAD_ID, operations, Condition(equals={HeadField.ORDER_VERSION: read_version}))


def place_writes(intent: Intent, placed_at: str, now: datetime) -> list[Create]:
    """A place's commit: its record first (a repeat of the key conflicts at index 0), then the
    order's head (a conflict at index 1: the order exists without this key's record)."""
    return [Create(new_request_record(intent, now)), Create(new_head(intent, placed_at))]


def change_writes(
    intent: Intent, read_version: int, now: datetime, *, cancels: bool
) -> list[Create | Patch]:
    """An amendment's or cancellation's commit: its record first, then the head's move."""
    return [
        Create(new_request_record(intent, now)),
        move_head(read_version, intent.version, cancelled=cancels),
    ]
