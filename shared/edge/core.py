"""The public edge's application service: place, amend and cancel an order, each once per
Idempotency-Key, each becoming exactly one message on the ``orders`` queue.

``OrdersEdge.place``, ``amend`` and ``cancel`` take the authenticated client id, the
Idempotency-Key (the header's String content, or None), the parsed JSON body and, for a change,
the path's order id and the If-Match header; they return an ``EdgeResponse``. The HTTP
functions translate to and from it (``shared.adapters.http_in``); this module never sees HTTP.

One request, in the order its steps are taken, and why:

1. The key (draft-ietf-httpapi-idempotency-key-header-06, sections 2.1, 2.7, 5): missing or
   not of the published format (``shared.edge.requests``): 400, nothing read or written.
2. The body: a JSON object without the fields the edge assigns (``EDGE_FIELDS``), which with
   them is a valid message of the contract (``shared.consumer.contract``: the edge adds
   ``schemaVersion``, ``orderId``, ``orderVersion``, ``placedAt``, ``amendedAt`` or
   ``cancelledAt``); else 400 with the contract's bounded description (field paths and rules,
   no values), nothing written.
3. The record of (client, key) in the order's partition (a place's order is the one its key
   names: ``order_id_for``): the same fingerprint is a repeat (section 2.6, "Retry"): its
   stored response, after sending its stored message first if it is not marked sent (the same
   MessageId: the queue's duplicate detection and the consumer absorb a copy); unless it was
   committed less than ``IN_PROGRESS_WINDOW`` ago and not yet marked sent: its first handling
   is still under way (section 2.6, "Concurrent Request"): 409. Another fingerprint: 422
   (section 2.7).
4. A change reads the order's head: no head, or another client's order: 404 (an order another
   client placed is not said to exist); cancelled: 409 (the edge refuses what the consumer would
   dead-letter as ``InvalidTransition``: a cancelled order changes no more); an If-Match that
   is not the head's version: 412 (RFC 9110, section 13.1.1; strong comparison, so a weak tag
   never matches), nothing written.
5. One atomic commit: the record (with the message and the response) and the head's create
   (a place) or its move to the next version, conditional on the version read. Two concurrent
   changes read the same head; one commits, the other's commit is refused whole and it reads
   again and takes the next version (at most ``MAX_COMMIT_ATTEMPTS``, then 503). A record
   found at commit is a concurrent repeat: step 3 again.
6. The message is sent; then the record is marked ``sent``. A send the queue refused for now:
   503 with Retry-After, the intent kept (a retry with the key sends the same message). A mark
   that fails is not reported: the response is given, and a later repeat sends the message
   once more, harmlessly.

Identity: a place under key K by client C is always order ``ord-<UUIDv5(C, K)>`` (RFC 9562)
and its MessageId is that order id (the OrderPlaced contract); a change's version is the
head's next, and its MessageId ``{orderId}:v{version}`` (``lifecycle_message_id``), stored in
its record: every instance that takes a retry finds the same ids.

Answers: a place 201 Created, a change 200 OK, each with ``Location: /orders/<orderId>`` and
``ETag: "<version>"``: the edge's order (its identity and its version) exists once the commit
is made; what consumers do with its message follows asynchronously. Only an accepted intent is
stored and replayed; a refusal (400, 404, 409, 412, 422, 503) writes nothing (the team's rule:
bad input writes nothing), so its repeat is decided again. Each answer names its outcome for
the request's report (``shared.edge.observer``): ``created`` when this request recorded the
intent, ``replayed`` with the record's age (now - ``startedAt``) when an earlier one did.

Errors of the store are answered 503 with Retry-After (the request may be retried with the same
key; nothing or a whole intent was written). Anything else propagates to the HTTP layer.

Imports the kit, the order contract and ``shared.clock``; never Azure, an adapter or
telemetry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from idempotent_consumer import (
    Clock,
    ConditionFailed,
    DocumentExists,
    DocumentMissing,
    DocumentStore,
    InvalidMessage,
    StoreError,
    TransientStoreError,
    WriteRefused,
    document_timestamp,
)

from shared.consumer.contract import (
    ORDER_AMENDED,
    ORDER_CANCELLED,
    ORDER_PLACED,
    SCHEMA_VERSION,
    ValidChange,
    ValidOrder,
    lifecycle_message_id,
    parse_message,
)
from shared.edge import responses
from shared.edge.delivery import send_then_mark
from shared.edge.observer import RequestOutcome
from shared.edge.requests import (
    HEAD_ID,
    IN_PROGRESS_WINDOW,
    Intent,
    StoredResponse,
    change_writes,
    is_valid_key,
    order_id_for,
    place_writes,
    read_head,
    read_request_record,
    request_fingerprint,
    request_id,
)
from shared.edge.responses import (
    JSON,
    ORDERS_PATH,
    EdgeResponse,
    change_path,
    etag,
    order_location,
)
from shared.edge.sender import MessageSender, SendFailed

# The fields the edge assigns; a body that carries one is refused (a client cannot choose an
# order's id, version or times, nor the message's schema).
EDGE_FIELDS = ("schemaVersion", "orderId", "orderVersion", "placedAt", "amendedAt", "cancelledAt")
MAX_COMMIT_ATTEMPTS = 5
MAX_CLIENT_ID_CHARS = 128
RETRY_AFTER_S = 1
_ORDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")  # the contract's orderId
_CLIENT_ID = re.compile(r"[\x21-\x7e]+")
_ENTITY_TAG = re.compile(r'"([1-9][0-9]{0,9})"')


@dataclass(frozen=True, slots=True)
class _Change:
    """What an amendment or a cancellation is: its Subject, path and answer's status word."""

    subject: str
    path_suffix: str
    status_word: str

    @property
    def cancels(self) -> bool:
        return self.subject == ORDER_CANCELLED


_AMEND = _Change(ORDER_AMENDED, "amendments", "amended")
_CANCEL = _Change(ORDER_CANCELLED, "cancellations", "cancelled")


class _Refused(Exception):
    """A request answered without anything written (a problem document)."""

    def __init__(self, response: EdgeResponse) -> None:
        super().__init__(response.status)
        self.response = response


class OrdersEdge:
    """The orders API's core over the kit's ``DocumentStore`` (the ``requests`` container) and
    the ``MessageSender`` port (module docstring)."""

    def __init__(self, store: DocumentStore, sender: MessageSender, clock: Clock) -> None:
        self._store = store
        self._sender = sender
        self._clock = clock

    async def place(
        self,
        client_id: str,
        idempotency_key: str | None,
        body: Any,
        if_match: str | None = None,
    ) -> EdgeResponse:
        """Place an order (``POST /orders``). ``if_match`` is ignored: the collection has no
        version to match."""
        try:
            key = _checked_key(client_id, idempotency_key)
            fields = _client_fields(body)
            order_id = order_id_for(client_id, key)
            fingerprint = _fingerprint("POST", ORDERS_PATH, body)
            now = self._clock.now()
            valid = _placed(fields, order_id, document_timestamp(now))
            replayed = await self._repeat(client_id, key, order_id, fingerprint)
            if replayed is not None:
                return replayed
            intent = Intent(
                client_id=client_id,
                key=key,
                order_id=order_id,
                fingerprint=fingerprint,
                version=1,
                message_id=valid.message_id,
                subject=ORDER_PLACED,
                message_body=_encode(valid.fields),
                response=_accepted(201, order_id, 1, "placed"),
            )
            try:
                await self._store.commit(
                    order_id, place_writes(intent, str(valid.fields["placedAt"]), now)
                )
            except DocumentExists as error:
                if error.index == 0:  # a concurrent repeat committed first
                    return await self._repeat_found(client_id, key, order_id, fingerprint)
                return responses.order_exists(order_id)
            return await self._deliver(intent)
        except _Refused as refused:
            return refused.response
        except WriteRefused:
            raise  # a refusal this flow does not expect: a bug, not the moment
        except StoreError as error:
            return _unavailable(error)

    async def amend(
        self,
        client_id: str,
        idempotency_key: str | None,
        order_id: str,
        body: Any,
        if_match: str | None = None,
    ) -> EdgeResponse:
        """Amend an order (``POST /orders/<orderId>/amendments``): its whole new state
        (``customerId``, ``currency``, ``lines``), at the head's next version."""
        return await self._change(_AMEND, client_id, idempotency_key, order_id, body, if_match)

    async def cancel(
        self,
        client_id: str,
        idempotency_key: str | None,
        order_id: str,
        body: Any,
        if_match: str | None = None,
    ) -> EdgeResponse:
        """Cancel an order (``POST /orders/<orderId>/cancellations``, body ``{"reason"}``), at
        the head's next version; it changes no more."""
        return await self._change(_CANCEL, client_id, idempotency_key, order_id, body, if_match)

    async def _change(
        self,
        change: _Change,
        client_id: str,
        idempotency_key: str | None,
        order_id: str,
        body: Any,
        if_match: str | None,
    ) -> EdgeResponse:
        try:
            key = _checked_key(client_id, idempotency_key)
            fields = _client_fields(body)
            expected = _if_match(if_match)
            if _ORDER_ID.fullmatch(order_id) is None:
                raise _Refused(responses.not_found())  # no order can have this id
            fingerprint = _fingerprint("POST", change_path(order_id, change.path_suffix), body)
            # Validated before anything is read: bad input is refused whatever is stored.
            _changed(change, fields, order_id, 2, document_timestamp(self._clock.now()), "")
            replayed = await self._repeat(client_id, key, order_id, fingerprint)
            if replayed is not None:
                return replayed
            for _ in range(MAX_COMMIT_ATTEMPTS):
                stored = await self._store.read(order_id, HEAD_ID)
                head = read_head(stored) if stored is not None else None
                if head is None or head.client_id != client_id:
                    return responses.not_found()
                if head.cancelled:
                    return responses.cancelled(order_id, head.version)
                if expected is not None and head.version not in expected:
                    return responses.version_mismatch(order_id, head.version)
                now = self._clock.now()
                version = head.version + 1
                valid = _changed(
                    change, fields, order_id, version, document_timestamp(now), head.placed_at
                )
                intent = Intent(
                    client_id=client_id,
                    key=key,
                    order_id=order_id,
                    fingerprint=fingerprint,
                    version=version,
                    message_id=valid.message_id,
                    subject=change.subject,
                    message_body=_encode(valid.fields),
                    response=_accepted(200, order_id, version, change.status_word),
                )
                writes = change_writes(intent, head.version, now, cancels=change.cancels)
                try:
                    await self._store.commit(order_id, writes)
                except DocumentExists as error:
                    if error.index != 0:
                        raise
                    return await self._repeat_found(client_id, key, order_id, fingerprint)
                except ConditionFailed:
                    continue  # another change moved the head: read it again
                except DocumentMissing:
                    return responses.not_found()
                return await self._deliver(intent)
            return responses.contention(MAX_COMMIT_ATTEMPTS, RETRY_AFTER_S)
        except _Refused as refused:
            return refused.response
        except WriteRefused:
            raise  # a refusal this flow does not expect: a bug, not the moment
        except StoreError as error:
            return _unavailable(error)

    async def _repeat(
        self, client_id: str, key: str, order_id: str, fingerprint: str
    ) -> EdgeResponse | None:
        """The answer to a repeat of a recorded request (step 3), or None: no record."""
        stored = await self._store.read(order_id, request_id(client_id, key))
        if stored is None:
            return None
        record = read_request_record(stored)
        if record.fingerprint != fingerprint:
            return responses.key_reused()
        age = self._clock.now() - record.started_at
        if record.sent:
            return _answer(record.response, replay_age=age)
        if age < IN_PROGRESS_WINDOW:
            wait = math.ceil((IN_PROGRESS_WINDOW - age).total_seconds())
            return responses.outstanding(wait)
        # Its first handling stopped between the commit and the sent mark: finish it.
        return await self._deliver(
            record.intent(client_id, key, order_id),
            replay_age=age,
        )

    async def _repeat_found(
        self, client_id: str, key: str, order_id: str, fingerprint: str
    ) -> EdgeResponse:
        answer = await self._repeat(client_id, key, order_id, fingerprint)
        if answer is None:
            # Refused as existing, then gone: it expired in between. The client retries.
            raise TransientStoreError("the request record conflicted but could not be read")
        return answer

    async def _deliver(self, intent: Intent, replay_age: timedelta | None = None) -> EdgeResponse:
        """Send the intent's message, mark its record sent, answer its response (step 6);
        ``replay_age``: the intent is a recorded one's, finished by a repeat (step 3)."""
        try:
            # A mark the store refused is not reported: the message is sent, so the answer is
            # true; unmarked, a repeat sends it once more, which the queue and the consumer
            # absorb (module docstring, step 6).
            await send_then_mark(self._store, self._sender, intent)
        except SendFailed:
            return responses.not_yet_sent(math.ceil(IN_PROGRESS_WINDOW.total_seconds()))
        return _answer(intent.response, replay_age=replay_age)


def _checked_key(client_id: str, key: str | None) -> str:
    if not client_id or len(client_id) > MAX_CLIENT_ID_CHARS or not _CLIENT_ID.fullmatch(client_id):
        # Set by authentication, never by the client: a wrong one is the wiring's bug.
        raise ValueError("the client id must be 1 to 128 visible ASCII characters")
    if key is None:
        raise _Refused(responses.missing_key())
    if not is_valid_key(key):
        raise _Refused(responses.invalid_key())
    return key


def _client_fields(body: Any) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise _Refused(responses.invalid_order("The body must be a JSON object."))
    assigned = [name for name in EDGE_FIELDS if name in body]
    if assigned:
        # Our own field names, never the client's text.
        raise _Refused(
            responses.invalid_order(f"{', '.join(assigned)}: assigned by the API, not the client.")
        )
    return dict(body)


def _fingerprint(method: str, path: str, body: Any) -> str:
    try:
        return request_fingerprint(method, path, body)
    except (TypeError, ValueError):  # not JSON values: the HTTP layer parses JSON only
        raise _Refused(responses.invalid_order("The body must be JSON.")) from None


def _if_match(header: str | None) -> frozenset[int] | None:
    """The versions an If-Match header accepts (None: any, or no header): a list of strong
    entity tags ``"<version>"`` (RFC 9110, section 13.1.1; a weak one never matches), or
    ``*``. Another value is refused: 400."""
    if header is None or header.strip() == "*":
        return None
    versions: set[int] = set()
    for tag in header.split(","):
        tag = tag.strip(" \t")
        if tag.startswith("W/"):
            continue  # a weak tag never matches under the strong comparison
        match = _ENTITY_TAG.fullmatch(tag)
        if match is None:
            raise _Refused(responses.invalid_precondition())
        versions.add(int(match.group(1)))
    return frozenset(versions)


def _placed(fields: Mapping[str, Any], order_id: str, placed_at: str) -> ValidOrder:
    message = {
        **fields,
        "schemaVersion": SCHEMA_VERSION,
        "orderId": order_id,
        "placedAt": placed_at,
    }
    valid = _validated(message, order_id, ORDER_PLACED)
    assert isinstance(valid, ValidOrder)
    return valid


def _changed(
    change: _Change,
    fields: Mapping[str, Any],
    order_id: str,
    version: int,
    now: str,
    placed_at: str,
) -> ValidChange:
    """The change's message; before the head is read, ``placed_at`` is a stand-in (the
    amendment's own time: any valid time validates the same)."""
    edge: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "orderId": order_id}
    edge["orderVersion"] = version
    if change.cancels:
        edge["cancelledAt"] = now
    else:
        edge["placedAt"] = placed_at or now
        edge["amendedAt"] = now
    message_id = lifecycle_message_id(order_id, version)
    valid = _validated({**fields, **edge}, message_id, change.subject)
    assert isinstance(valid, ValidChange)
    return valid


def _validated(
    message: Mapping[str, Any], message_id: str, subject: str
) -> ValidOrder | ValidChange:
    try:
        return parse_message(_encode(message), message_id, subject)
    except InvalidMessage as invalid:
        # The contract's description: field paths and rules, never a value (kit.message).
        raise _Refused(responses.invalid_order(invalid.description)) from None


def _encode(fields: Mapping[str, Any]) -> bytes:
    """A message body: compact JSON, UTF-8."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


def _accepted(status: int, order_id: str, version: int, status_word: str) -> StoredResponse:
    return StoredResponse(
        status=status,
        headers={
            "Content-Type": JSON,
            "Location": order_location(order_id),
            "ETag": etag(version),
        },
        body={"orderId": order_id, "orderVersion": version, "status": status_word},
    )


def _answer(response: StoredResponse, *, replay_age: timedelta | None) -> EdgeResponse:
    """An accepted intent's answer: ``created`` when this request recorded it, else
    ``replayed``, with its record's age (``shared.edge.observer``)."""
    return EdgeResponse(
        response.status,
        dict(response.headers),
        response.body,
        outcome=RequestOutcome.CREATED if replay_age is None else RequestOutcome.REPLAYED,
        record_age_s=None if replay_age is None else max(0.0, replay_age.total_seconds()),
    )


def _unavailable(error: StoreError) -> EdgeResponse:
    wait = error.retry_after_s if isinstance(error, TransientStoreError) else None
    return responses.unavailable(max(RETRY_AFTER_S, math.ceil(wait or 0)))
