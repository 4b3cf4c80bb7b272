"""The invariants of the whole flow, as pure functions over plain data: order documents, outbox
documents, dead letters and the events a subscription of the topic holds. One definition for
``python -m ops audit`` over a live deployment and for ``make demo`` over its own run: each
function returns an ``Invariant``, PASS or FAIL with the offending ids.

The six a live audit checks (``audit``). An order has one event per version applied to it
(OrderAccepted for version 1, OrderAmended or OrderCancelled for each later one), may have been
created by a change that arrived before its OrderPlaced (``createdBy``, no ``requestHash``), and
its stored fields are those of its highest version:

1. one order per valid id: each order document is ``id`` = ``orderId``; one placed by its
   OrderPlaced also ``messageId``, with a fingerprint of a known algorithm; one created by a
   change names it (``createdBy``) at a version above 1; no order id is stored twice;
2. one event per applied version, in increasing versions: each order has one outbox event per
   version, created in increasing versions, the event of its current version among them (and,
   with a subscription, exactly one delivered event of each version, in increasing versions,
   the current one among them, unless its event is still pending within the grace period: the
   relay has not published it yet);
3. none for a rejected message: no outbox event and no delivered event without its order or
   above its order's version, no OrderAccepted for an order a change created, no OrderCancelled
   but the cancelled order's last, and no delivered event of the order's current version whose
   payload is not the stored order's;
4. every inbox marker of a stored order: processed or stale, at or below its order's version;
5. nothing pending: no outbox event parked, none pending past a grace period (the relay and the
   watchdog need a moment);
6. every dead letter with its reason: a non-empty reason this system or Service Bus gives.

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
from itertools import pairwise
from typing import Any

from idempotent_consumer import INBOX_TYPE, InboxField
from idempotent_consumer.servicebus import read_body

from ops.port import DeadLetter
from shared.consumer.contract import (
    FINGERPRINT_ALGORITHMS,
    ORDER_ACCEPTED_EVENT_TYPE,
    ORDER_AMENDED,
    ORDER_CANCELLED,
    DeadletterReason,
)
from shared.consumer.core import ORPHANED_DOCUMENT
from shared.consumer.lifecycle import PARTITION_FIELD as MARKER_ORDER_ID  # the markers' order id
from shared.consumer.order import ORDER_VERSION, STATUS, STATUS_CANCELLED, stored_version
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
CREATED_BY = frozenset({ORDER_AMENDED, ORDER_CANCELLED})  # the changes that may create an order
MARKER_OUTCOMES = frozenset({"processed", "stale"})  # what a marker may record
# An event's ``createdAt`` is its consumer instance's clock when it decided, not the commit's: a
# later version decided a moment before an earlier one committed may carry an earlier time.
# Versions commit in increasing order (each only over a lower stored version); beyond this
# tolerance an earlier ``createdAt`` is not that race.
CREATED_AT_TOLERANCE = timedelta(minutes=1)

# The invariants' names: what the table prints, and how the demo matches its rows to the tool's.
ONE_ORDER_PER_ID = "one order document per valid order id"
ONE_EVENT_PER_ORDER = "exactly one event per applied version, in increasing versions"
NO_EVENT_FOR_REJECTED = "no event for a rejected message or above its order's version"
MARKERS_OF_ORDERS = "every inbox marker of a stored order, processed or stale, at or below it"
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
    """An order event as a subscription holds it: its order, version and type, and the payload
    fields the audit compares with the stored order. An event published before versions existed
    has no ``orderVersion``: it is version 1 (``version``)."""

    message_id: str | None
    order_id: str | None
    total_minor: Any = None
    customer_id: Any = None
    order_version: Any = None
    event_type: str | None = None

    @property
    def version(self) -> int | None:
        return _version(self.order_version, default=1)

    @classmethod
    def from_body(cls, message_id: str | None, body: Any, body_type: Any = None) -> SeenEvent:
        try:
            event = json.loads(read_body(body, body_type).content)
            payload = event.get(OutboxField.PAYLOAD, {})
        except (ValueError, AttributeError, RecursionError):  # nested past the parser's depth
            event, payload = {}, {}
        if not isinstance(payload, dict):
            payload = {}
        order_id = payload.get("orderId")
        event_type = event.get(OutboxField.EVENT_TYPE)
        return cls(
            message_id,
            order_id if isinstance(order_id, str) else None,
            payload.get("totalMinor"),
            payload.get("customerId"),
            payload.get(ORDER_VERSION),
            event_type if isinstance(event_type, str) else None,
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
    markers: list[dict[str, Any]] = field(default_factory=list)  # inbox markers of the window


def _version(value: Any, *, default: int | None = None) -> int | None:
    """A stored or published ``orderVersion``: a positive integer, ``default`` when absent,
    None when it is something else."""
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def event_version(document: Document) -> int | None:
    """The version an outbox document announces: its payload's ``orderVersion`` (a projection
    of only that field carries it at the top), 1 for an OrderAccepted written before versions
    existed; None if unreadable."""
    payload = document.get(OutboxField.PAYLOAD)
    if isinstance(payload, Mapping) and ORDER_VERSION in payload:
        return _version(payload[ORDER_VERSION])
    if ORDER_VERSION in document:
        return _version(document[ORDER_VERSION])
    event_type = document.get(OutboxField.EVENT_TYPE, ORDER_ACCEPTED_EVENT_TYPE)
    return 1 if event_type == ORDER_ACCEPTED_EVENT_TYPE else None


def created_by_change(order: Document) -> bool:
    """An order a change created, having arrived before its OrderPlaced."""
    return order.get("createdBy") is not None


def _own_events(outbox: Iterable[Document]) -> list[Document]:
    """Outbox documents stored under the id of the version they announce."""
    return [
        d
        for d in outbox
        if d.get(OutboxField.TYPE, OUTBOX_TYPE) == OUTBOX_TYPE
        and (version := event_version(d)) is not None
        and d.get(OutboxField.ID) == outbox_document_id(str(d.get(OutboxField.ORDER_ID)), version)
    ]


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
    placed = [d for d in orders if not created_by_change(d)]
    return _invariant(
        ONE_ORDER_PER_ID,
        {
            "stored twice": _ids(i for i, n in counts.items() if n > 1),
            "whose id, orderId and MessageId differ": _ids(
                str(d.get("orderId"))
                for d in orders
                if d.get("id") != d.get("orderId")
                or (not created_by_change(d) and d.get("orderId") != d.get("messageId"))
            ),
            "without a known fingerprint": _ids(
                str(d.get("orderId"))
                for d in placed
                if not d.get("requestHash")
                or str(d.get("hashAlgorithm")) not in FINGERPRINT_ALGORITHMS
            ),
            "created by an unknown message or below version 2": _ids(
                str(d.get("orderId"))
                for d in orders
                if created_by_change(d)
                and (
                    d.get("createdBy") not in CREATED_BY
                    or (_version(d.get(ORDER_VERSION)) or 0) < 2
                )
            ),
        },
        f"{len(counts)} orders"
        + (
            f", {len(orders) - len(placed)} created by a change"
            if len(placed) < len(orders)
            else ""
        ),
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


# ---- 2. one event per applied version, in increasing versions -------------------------------


def one_event_per_accepted_order(
    orders: Sequence[Document],
    outbox: Sequence[Document],
    events: Sequence[SeenEvent] | None = None,
    *,
    now: datetime | None = None,
    grace: timedelta = timedelta(0),
) -> Invariant:
    """Each order has one outbox event per version among those read, under the version's
    document id, created in increasing versions (``CREATED_AT_TOLERANCE``), the event of its
    current version among them. With the events a subscription delivered: each order's in
    increasing versions, each version once (the topic's duplicate detection drops copies), its
    current version's among them, except when that event is pending for at most ``grace`` at
    ``now`` (the relay has yet to publish it: ``nothing_pending``'s rule). No grace for the
    outbox event itself: it is written with its change, in one transactional batch."""
    current = {str(d.get("orderId")): stored_version(d) for d in orders}
    read = _own_events(outbox)
    own_events = [d for d in read if str(d.get(OutboxField.ORDER_ID)) in current]
    versions: dict[str, list[tuple[int, Document]]] = {}
    for d in own_events:
        versions.setdefault(str(d.get(OutboxField.ORDER_ID)), []).append((event_version(d) or 0, d))
    problems: dict[str, list[str]] = {
        "without the outbox event of its current version": _ids(
            i for i, v in current.items() if v not in {n for n, _ in versions.get(i, [])}
        ),
        "with two outbox events of one version": _ids(
            i for i, found in versions.items() if len({n for n, _ in found}) < len(found)
        ),
        "whose outbox events were created out of version order": _ids(
            i for i, found in versions.items() if not _created_in_order(found)
        ),
    }
    summary = f"{len(current)} orders, {len(read)} outbox events"
    if events is not None:
        delivered: dict[str, list[int | None]] = {}
        for e in events:
            if e.order_id in current:
                delivered.setdefault(str(e.order_id), []).append(e.version)
        in_flight = {
            str(d.get(OutboxField.ORDER_ID))
            for d in own_events
            if d.get(OutboxField.STATUS) == STATUS_PENDING
            and event_version(d) == current[str(d.get(OutboxField.ORDER_ID))]
            and now is not None
            and not _overdue(d, now, grace)
            and current[str(d.get(OutboxField.ORDER_ID))]
            not in delivered.get(str(d.get(OutboxField.ORDER_ID)), [])
        }
        problems["without a delivered event of its current version"] = _ids(
            i for i, v in current.items() if v not in delivered.get(i, []) and i not in in_flight
        )
        problems["delivered twice or more"] = _ids(
            i for i, seen in delivered.items() if len(set(seen)) < len(seen)
        )
        problems["delivered out of version order"] = _ids(
            i
            for i, seen in delivered.items()
            if len(set(seen)) == len(seen) and not _increasing(seen)
        )
        summary += f", {sum(map(len, delivered.values()))} delivered"
        if in_flight:
            summary += f", {len(in_flight)} pending within {grace}"
    return _invariant(ONE_EVENT_PER_ORDER, problems, summary)


def _increasing(versions: Sequence[int | None]) -> bool:
    known = [v for v in versions if v is not None]
    return len(known) == len(versions) and all(a < b for a, b in pairwise(known))


def _created_in_order(found: Sequence[tuple[int, Document]]) -> bool:
    times = [_created(d) for _, d in sorted(found, key=lambda pair: pair[0])]
    known = [t for t in times if t is not None]
    return all(later >= earlier - CREATED_AT_TOLERANCE for earlier, later in pairwise(known))


def _created(document: Document) -> datetime | None:
    try:
        return datetime.fromisoformat(str(document.get(OutboxField.CREATED_AT)))
    except ValueError:
        return None


# ---- 3. none for a rejected message -------------------------------------------------------------


def no_event_for_rejected(
    orders: Sequence[Document],
    outbox: Sequence[Document],
    events: Sequence[SeenEvent] | None = None,
    referenced: Mapping[str, Document] | None = None,
) -> Invariant:
    """No outbox event or delivered event without its stored order or above the order's
    version (a change that was not applied), no OrderAccepted for an order a change created
    (its late OrderPlaced was stale), no OrderCancelled but the cancelled order's current
    version, and no delivered event of the order's current version whose payload is not the
    stored order's (a cancelled order's is its OrderCancelled). ``referenced``: orders outside
    the window that documents in it point to (a live audit reads them by id)."""
    known = {str(d.get("orderId")): d for d in orders}
    known.update(referenced or {})
    events_read = [d for d in outbox if d.get(OutboxField.TYPE, OUTBOX_TYPE) == OUTBOX_TYPE]

    def order_of(order_id: Any) -> Document | None:
        return known.get(str(order_id))

    def above(order_id: Any, version: int | None) -> bool:
        order = order_of(order_id)
        return order is not None and (version is None or version > stored_version(order))

    def not_the_last(order_id: Any, version: int | None) -> bool:
        order = order_of(order_id)
        return order is not None and (
            order.get(STATUS) != STATUS_CANCELLED or version != stored_version(order)
        )

    problems = {
        "outbox events without an order": _ids(
            str(d.get(OutboxField.ORDER_ID))
            for d in events_read
            if str(d.get(OutboxField.ORDER_ID)) not in known
        ),
        "outbox events above their order's version": _ids(
            str(d.get(OutboxField.ORDER_ID))
            for d in events_read
            if above(d.get(OutboxField.ORDER_ID), event_version(d))
        ),
        "OrderAccepted for an order a change created": _ids(
            str(d.get(OutboxField.ORDER_ID))
            for d in events_read
            if d.get(OutboxField.EVENT_TYPE, ORDER_ACCEPTED_EVENT_TYPE) == ORDER_ACCEPTED_EVENT_TYPE
            and (order := order_of(d.get(OutboxField.ORDER_ID))) is not None
            and created_by_change(order)
        ),
        "OrderCancelled not the cancelled order's last version": _ids(
            str(d.get(OutboxField.ORDER_ID))
            for d in events_read
            if d.get(OutboxField.EVENT_TYPE) == ORDER_CANCELLED
            and not_the_last(d.get(OutboxField.ORDER_ID), event_version(d))
        ),
    }
    if events is not None:
        problems["delivered events for no stored order"] = _ids(
            str(e.order_id or e.message_id) for e in events if str(e.order_id) not in known
        )
        problems["delivered events above their order's version"] = _ids(
            str(e.order_id) for e in events if above(e.order_id, e.version)
        )
        problems["delivered events that are not the stored order"] = _ids(
            str(e.order_id)
            for e in events
            if (order := order_of(e.order_id)) is not None
            and e.version == stored_version(order)
            and not _is_the_order(e, order)
        )
    return _invariant(NO_EVENT_FOR_REJECTED, problems, "none")


def _is_the_order(event: SeenEvent, order: Document) -> bool:
    """The event of the order's current version says what the order holds: its cancellation,
    or its total and customer."""
    if order.get(STATUS) == STATUS_CANCELLED:
        return event.event_type in (None, ORDER_CANCELLED)
    return (
        event.event_type != ORDER_CANCELLED
        and event.total_minor == order.get("totalMinor")
        and event.customer_id == order.get("customerId")
    )


# ---- 4. every inbox marker of a stored order ------------------------------------------------


def markers_of_orders(
    markers: Sequence[Document],
    orders: Sequence[Document],
    referenced: Mapping[str, Document] | None = None,
) -> Invariant:
    """Each inbox marker belongs to a stored order, records ``processed`` or ``stale``, and a
    version at or below its order's (a processed change moved the order to its version; a stale
    one found it at or above). ``referenced`` as in ``no_event_for_rejected``."""
    known = {str(d.get("orderId")): d for d in orders}
    known.update(referenced or {})
    ours = [m for m in markers if m.get(InboxField.TYPE, INBOX_TYPE) == INBOX_TYPE]

    def marker(m: Document) -> str:
        return f"{m.get(MARKER_ORDER_ID)}/{m.get(InboxField.MESSAGE_ID)}"

    outcomes = Counter(str(m.get(InboxField.OUTCOME)) for m in ours)
    return _invariant(
        MARKERS_OF_ORDERS,
        {
            "markers without an order": _ids(
                marker(m) for m in ours if str(m.get(MARKER_ORDER_ID)) not in known
            ),
            "markers of another outcome": _ids(
                marker(m) for m in ours if m.get(InboxField.OUTCOME) not in MARKER_OUTCOMES
            ),
            "markers above their order's version": _ids(
                marker(m)
                for m in ours
                if str(m.get(MARKER_ORDER_ID)) in known
                and (_version(m.get(InboxField.ORDER_VERSION)) or 0)
                > stored_version(known[str(m.get(MARKER_ORDER_ID))])
            ),
            "markers without a version": _ids(
                marker(m) for m in ours if _version(m.get(InboxField.ORDER_VERSION)) is None
            ),
        },
        f"{len(ours)} markers: "
        + (", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "none"),
    )


# ---- 5. nothing pending ---------------------------------------------------------------------


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


# ---- 6. every dead letter with its reason -------------------------------------------------------


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
        markers_of_orders(data.markers, data.orders, data.referenced),
        nothing_pending(list(outbox.values()), now=now, grace=pending_grace),
        every_dead_letter_has_a_reason(data.dead_letters),
    ]
