"""The invariants of the whole flow, as pure functions over plain data: order documents, outbox
documents, dead letters and the events a subscription of the topic holds. One definition for
``python -m ops audit`` over a live deployment and for ``make demo`` over its own run: each
function returns an ``Invariant``, PASS or FAIL with the offending ids.

The five a live audit checks (``audit``):

1. one order per valid id: each order document is ``id`` = ``orderId`` = ``messageId``, with a
   fingerprint of a known algorithm, and no order id is stored twice;
2. one OrderAccepted per accepted order: each order has its one outbox event (and, with a
   subscription, exactly one event was delivered there, unless its event is still pending
   within the grace period: the relay has not published it yet);
3. none for a rejected request: no outbox event and no delivered event without its order, and
   no delivered event whose payload is not the stored order's;
4. nothing pending: no outbox event parked, none pending past a grace period (the relay and the
   watchdog need a moment);
5. every dead letter with its reason: a non-empty reason this system or Service Bus gives.

``make demo`` runs ``audit`` itself over its own documents, dead letters and subscription
messages (local/scenarios/invariants.py), and then ``python -m ops audit`` over the same data, which
must agree. The demo knows more than a live deployment (what it sent, what it meant to be
rejected): the functions that take expectations (``no_order_lost``, ``orders_are_the_requests``,
``dead_lettered_as``, ``no_dead_letter_for``) express its extra checks with the same data.

What the audit reads, and its cost, is the reader's (``ops.cosmos.CosmosAuditReader``): these
functions read nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ops.port import DeadLetter
from shared.consumer.contract import FINGERPRINT_ALGORITHMS, DeadletterReason
from shared.consumer.core import ORPHANED_DOCUMENT
from shared.message_body import read_body
from shared.relay.outbox import (
    OUTBOX_TYPE,
    STATUS_PARKED,
    STATUS_PENDING,
    OutboxField,
    outbox_document_id,
)

Document = Mapping[str, Any]

#: The reasons a dead letter may carry: this consumer's bounded set, and those Service Bus sets
#: itself (the dead-letter page's table: https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues).
SERVICE_BUS_REASONS = frozenset(
    {
        "MaxDeliveryCountExceeded",
        "TTLExpiredException",
        "HeaderSizeExceeded",
        "Session ID is null",
        "MaxTransferHopCountExceeded",
    }
)
CONSUMER_REASONS = frozenset(
    value
    for name, value in vars(DeadletterReason).items()
    if name.isupper() and isinstance(value, str)
) | {ORPHANED_DOCUMENT}  # the core's own: a store error, not a contract reason
KNOWN_REASONS = SERVICE_BUS_REASONS | CONSUMER_REASONS
SHOWN_IDS = 5  # offending ids in a one-line detail (all of them are in ``offending``)

# The invariants' names: what the table prints, and how the demo matches its rows to the tool's.
ONE_ORDER_PER_ID = "one order document per valid order id"
ONE_EVENT_PER_ORDER = "exactly one OrderAccepted per accepted order"
NO_EVENT_FOR_REJECTED = "no OrderAccepted for a rejected order or request"
NOTHING_PENDING = "no outbox event left pending or parked"
EVERY_REASON = "every dead letter with its reason"
NO_ORDER_LOST = "no valid order lost"
ORDERS_ARE_THE_REQUESTS = "every stored order is the original request"
NO_VALID_ORDER_DEAD_LETTERED = "no valid order dead-lettered"


@dataclass(frozen=True)
class Invariant:
    name: str
    passed: bool
    offending: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "FAIL"


@dataclass(frozen=True)
class SeenEvent:
    """An OrderAccepted event as a subscription holds it."""

    message_id: str | None
    order_id: str | None
    total_minor: Any = None
    customer_id: Any = None

    @classmethod
    def from_body(cls, message_id: str | None, body: Any, body_type: Any = None) -> SeenEvent:
        try:
            payload = json.loads(read_body(body, body_type).content).get(OutboxField.PAYLOAD, {})
        except (ValueError, AttributeError):
            payload = {}
        order_id = payload.get("orderId") if isinstance(payload, dict) else None
        return cls(
            message_id,
            order_id if isinstance(order_id, str) else None,
            payload.get("totalMinor") if isinstance(payload, dict) else None,
            payload.get("customerId") if isinstance(payload, dict) else None,
        )


@dataclass(frozen=True)
class AuditData:
    """What one audit read, for its window."""

    orders: list[dict[str, Any]]  # order documents written in the window
    outbox: list[dict[str, Any]]  # outbox documents written in the window
    stuck: list[dict[str, Any]]  # every parked or pending outbox document, of any age
    referenced: dict[str, dict[str, Any]]  # orders outside the window that others point to
    dead_letters: list[DeadLetter]
    events: list[SeenEvent] | None  # None: no subscription read
    request_charge: float = 0.0  # RU the reads cost


def _ids(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids))


def _shown(ids: Sequence[str]) -> str:
    more = f" (+{len(ids) - SHOWN_IDS} more)" if len(ids) > SHOWN_IDS else ""
    return f"{list(ids[:SHOWN_IDS])}{more}"


def _invariant(name: str, problems: Mapping[str, Sequence[str]], summary: str) -> Invariant:
    offending = _ids(i for ids in problems.values() for i in ids)
    found = "; ".join(f"{len(ids)} {what} {_shown(ids)}" for what, ids in problems.items() if ids)
    return Invariant(name, not offending, offending, found or summary)


def _overdue(document: Document, now: datetime, grace: timedelta) -> bool:
    """Pending for longer than ``grace`` since its ``createdAt`` (any age, with no grace)."""
    try:
        created = datetime.fromisoformat(str(document.get(OutboxField.CREATED_AT)))
    except ValueError:
        return True  # no readable creation time: cannot be young
    return grace <= timedelta(0) or now - created > grace


# ---- 1. one order per valid id ------------------------------------------------------------------


def one_order_per_id(orders: Sequence[Document]) -> Invariant:
    counts = Counter(str(d.get("orderId")) for d in orders)
    return _invariant(
        ONE_ORDER_PER_ID,
        {
            "stored twice": _ids(i for i, n in counts.items() if n > 1),
            "whose id, orderId and MessageId differ": _ids(
                str(d.get("orderId"))
                for d in orders
                if not (d.get("id") == d.get("orderId") == d.get("messageId"))
            ),
            "without a known fingerprint": _ids(
                str(d.get("orderId"))
                for d in orders
                if not d.get("requestHash")
                or str(d.get("hashAlgorithm")) not in FINGERPRINT_ALGORITHMS
            ),
        },
        f"{len(counts)} orders",
    )


def no_order_lost(orders: Sequence[Document], expected: Iterable[str]) -> Invariant:
    """Every order id meant to be accepted is stored (the demo knows which)."""
    missing = _ids(set(expected) - {str(d.get("orderId")) for d in orders})
    return _invariant(NO_ORDER_LOST, {"missing": missing}, "none missing")


def orders_are_the_requests(
    orders: Sequence[Document], expected_hashes: Mapping[str, str]
) -> Invariant:
    """Each stored order is the request meant (its fingerprint), and no other id is stored."""
    return _invariant(
        ORDERS_ARE_THE_REQUESTS,
        {
            "differ": _ids(
                str(d.get("orderId"))
                for d in orders
                if str(d.get("orderId")) in expected_hashes
                and d.get("requestHash") != expected_hashes[str(d.get("orderId"))]
            ),
            "unexpected": _ids(
                str(d.get("orderId"))
                for d in orders
                if str(d.get("orderId")) not in expected_hashes
            ),
        },
        f"{len(orders)} orders",
    )


# ---- 2. one OrderAccepted per accepted order ----------------------------------------------------


def one_event_per_accepted_order(
    orders: Sequence[Document],
    outbox: Sequence[Document],
    events: Sequence[SeenEvent] | None = None,
    *,
    now: datetime | None = None,
    grace: timedelta = timedelta(0),
) -> Invariant:
    """Each order has one outbox event under its document id; with the events a subscription
    delivered, each order exactly one of them (the topic's duplicate detection drops copies),
    except an order whose event is pending for at most ``grace`` at ``now`` (the relay has yet
    to publish it: ``nothing_pending``'s rule). No grace for the outbox event itself: it is
    written with its order, in one transactional batch."""
    order_ids = {str(d.get("orderId")) for d in orders}
    own_events = [
        d
        for d in outbox
        if d.get(OutboxField.TYPE, OUTBOX_TYPE) == OUTBOX_TYPE
        and d.get(OutboxField.ID) == outbox_document_id(str(d.get(OutboxField.ORDER_ID)))
    ]
    in_outbox = Counter(str(d.get(OutboxField.ORDER_ID)) for d in own_events)
    problems: dict[str, list[str]] = {
        "without an outbox event": _ids(order_ids - set(in_outbox)),
    }
    summary = f"{len(order_ids)} orders, {sum(in_outbox.values())} outbox events"
    if events is not None:
        delivered = Counter(str(e.order_id) for e in events if e.order_id in order_ids)
        in_flight = {
            str(d.get(OutboxField.ORDER_ID))
            for d in own_events
            if d.get(OutboxField.STATUS) == STATUS_PENDING
            and now is not None
            and not _overdue(d, now, grace)
        } - set(delivered)
        problems["without a delivered event"] = _ids(order_ids - set(delivered) - in_flight)
        problems["delivered twice or more"] = _ids(i for i, n in delivered.items() if n > 1)
        summary += f", {sum(delivered.values())} delivered"
        if in_flight & order_ids:
            summary += f", {len(in_flight & order_ids)} pending within {grace}"
    return _invariant(ONE_EVENT_PER_ORDER, problems, summary)


# ---- 3. none for a rejected request -------------------------------------------------------------


def no_event_for_rejected(
    orders: Sequence[Document],
    outbox: Sequence[Document],
    events: Sequence[SeenEvent] | None = None,
    referenced: Mapping[str, Document] | None = None,
) -> Invariant:
    """No outbox event or delivered event without its stored order, and no delivered event
    whose payload is not that order's. ``referenced``: orders outside the window that events in
    it point to (a live audit reads them by id)."""
    known = {str(d.get("orderId")): d for d in orders}
    known.update(referenced or {})
    problems = {
        "outbox events without an order": _ids(
            str(d.get(OutboxField.ORDER_ID))
            for d in outbox
            if str(d.get(OutboxField.ORDER_ID)) not in known
        )
    }
    if events is not None:
        problems["delivered events for no stored order"] = _ids(
            str(e.order_id or e.message_id) for e in events if str(e.order_id) not in known
        )
        problems["delivered events that are not the stored order"] = _ids(
            str(e.order_id)
            for e in events
            if str(e.order_id) in known
            and (
                e.total_minor != known[str(e.order_id)].get("totalMinor")
                or e.customer_id != known[str(e.order_id)].get("customerId")
            )
        )
    return _invariant(NO_EVENT_FOR_REJECTED, problems, "none")


# ---- 4. nothing pending ---------------------------------------------------------------------


def nothing_pending(
    outbox: Sequence[Document], *, now: datetime, grace: timedelta = timedelta(0)
) -> Invariant:
    """No outbox event parked, and none pending for longer than ``grace`` since its
    ``createdAt`` (0: none pending at all, the demo's check once its relay is idle)."""
    return _invariant(
        NOTHING_PENDING,
        {
            "parked": _ids(
                str(d.get(OutboxField.ORDER_ID))
                for d in outbox
                if d.get(OutboxField.STATUS) == STATUS_PARKED
            ),
            f"pending longer than {grace}": _ids(
                str(d.get(OutboxField.ORDER_ID))
                for d in outbox
                if d.get(OutboxField.STATUS) == STATUS_PENDING and _overdue(d, now, grace)
            ),
        },
        "none",
    )


# ---- 5. every dead letter with its reason -------------------------------------------------------


def every_dead_letter_has_a_reason(
    dead_letters: Sequence[DeadLetter], known: Iterable[str] = KNOWN_REASONS
) -> Invariant:
    reasons = set(known)
    return _invariant(
        EVERY_REASON,
        {
            "without a known reason": _ids(
                f"{x.message_id}#{x.sequence_number}"
                for x in dead_letters
                if x.reason not in reasons
            )
        },
        f"{len(dead_letters)} dead letters: "
        + (
            ", ".join(
                f"{n} {r}" for r, n in sorted(Counter(x.reason for x in dead_letters).items())
            )
            or "none"
        ),
    )


def dead_lettered_as(
    dead_letters: Sequence[DeadLetter], expected: Iterable[tuple[str | None, str]], name: str
) -> Invariant:
    """The dead letters of each MessageId in ``expected`` (pairs of MessageId, reason) are
    exactly the expected ones: each reason as many times as expected, and no other (the demo's
    poison messages, several of them without a MessageId, and its mismatches, each once)."""
    wanted = Counter(expected)
    ids = {message_id for message_id, _ in wanted}
    found = Counter((x.message_id, x.reason) for x in dead_letters if x.message_id in ids)
    return _invariant(
        name,
        {
            "not dead-lettered exactly with their reasons": _ids(
                "(no MessageId)" if message_id is None else message_id
                for message_id, _ in (wanted - found) + (found - wanted)
            )
        },
        f"{sum(wanted.values())} expected, {sum(found.values())} found",
    )


def no_dead_letter_for(
    dead_letters: Sequence[DeadLetter], order_ids: Iterable[str], allowed: Iterable[str] = ()
) -> Invariant:
    """None of these (valid) orders is dead-lettered, except with an ``allowed`` reason."""
    valid, permitted = set(order_ids), set(allowed)
    return _invariant(
        NO_VALID_ORDER_DEAD_LETTERED,
        {
            "dead-lettered": _ids(
                f"{x.message_id} ({x.reason})"
                for x in dead_letters
                if x.message_id in valid and x.reason not in permitted
            )
        },
        "none",
    )


# ---- the live audit ------------------------------------------------------------------------------


def audit(data: AuditData, *, now: datetime, pending_grace: timedelta) -> list[Invariant]:
    outbox = {str(d.get(OutboxField.ID)): d for d in [*data.outbox, *data.stuck]}
    return [
        one_order_per_id(data.orders),
        one_event_per_accepted_order(
            data.orders, data.outbox, data.events, now=now, grace=pending_grace
        ),
        no_event_for_rejected(data.orders, data.outbox, data.events, data.referenced),
        nothing_pending(list(outbox.values()), now=now, grace=pending_grace),
        every_dead_letter_has_a_reason(data.dead_letters),
    ]
