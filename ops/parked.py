"""Parked (and long-pending) outbox events: which ones, why, since when; and republishing them.

The relay parks an outbox document it cannot publish (``status: parked``, with ``parkedReason``,
``parkedDescription`` and ``parkedAt``, shared.relay.outbox.parked_patch); nothing publishes it
again until its status is ``pending`` again. A document can also stay ``pending`` with nobody
publishing it (a change the trigger never delivered); the relay's watchdog catches those past an
age, and this tool lists them too.

Republishing sets ``status`` back to ``pending`` and nothing else, on the version the tool read
(If-Match on its ``_etag``: a document the relay or another operator changed meanwhile is left
alone and reported). The change feed, or the watchdog, then delivers the new version and the
relay publishes it with the same MessageId (= ``eventId``, which this module never touches),
so a copy of an event already published is dropped by the topic's duplicate detection. This
module never publishes anything itself. Pure over the ``OutboxDocuments`` port (``ops.cosmos``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.relay.outbox import STATUS_PARKED, STATUS_PENDING, OutboxField


class OutboxDocuments(Protocol):
    """The outbox documents of the orders container, and their orders."""

    def stuck(self) -> list[dict[str, Any]]:
        """Every outbox document that is parked or pending (an index query on ``status``)."""
        ...

    def outbox_of(self, order_id: str) -> dict[str, Any] | None:
        """The order's outbox document (a point read in its partition), or None."""
        ...

    def order(self, order_id: str) -> dict[str, Any] | None: ...

    def republish(self, document: dict[str, Any]) -> bool:
        """Set ``status: pending`` if the document is unchanged since it was read (its
        ``_etag``); False if it changed or is gone."""
        ...


@dataclass(frozen=True)
class StuckEvent:
    """An outbox document whose event is not published and will not be by itself."""

    document: dict[str, Any]
    now: datetime

    @property
    def order_id(self) -> str:
        return str(self.document.get(OutboxField.ORDER_ID))

    @property
    def event_id(self) -> str:
        return str(self.document.get(OutboxField.EVENT_ID))

    @property
    def status(self) -> str:
        return str(self.document.get(OutboxField.STATUS))

    @property
    def reason(self) -> str:
        """The relay's ``parkedReason``, or ``pending`` for a document never parked."""
        if self.status == STATUS_PARKED:
            return str(self.document.get(OutboxField.PARKED_REASON) or "")
        return STATUS_PENDING

    @property
    def description(self) -> str:
        return str(self.document.get(OutboxField.PARKED_DESCRIPTION) or "")

    @property
    def since(self) -> datetime | None:
        """Parked since ``parkedAt``; pending since ``createdAt``."""
        key = OutboxField.PARKED_AT if self.status == STATUS_PARKED else OutboxField.CREATED_AT
        try:
            return datetime.fromisoformat(str(self.document.get(key)))
        except ValueError:
            return None

    @property
    def age(self) -> timedelta | None:
        since = self.since
        return None if since is None else self.now - since

    def row(self) -> dict[str, Any]:
        age = self.age
        return {
            "orderId": self.order_id,
            "eventId": self.event_id,
            "status": self.status,
            "reason": self.reason,
            "description": self.description,
            "since": self.since.isoformat() if self.since else None,
            "ageSeconds": int(age.total_seconds()) if age is not None else None,
        }


def select_stuck(
    documents: Iterable[dict[str, Any]],
    *,
    now: datetime,
    reason: str | None = None,
    pending_older_than: timedelta | None = None,
) -> list[StuckEvent]:
    """Parked documents (of ``reason``, if given), and pending ones older than
    ``pending_older_than`` (none when it is not given, or when a parked ``reason`` is), oldest
    first."""
    chosen: list[StuckEvent] = []
    for document in documents:
        event = StuckEvent(document, now)
        if event.status == STATUS_PARKED:
            if reason is None or event.reason == reason:
                chosen.append(event)
        elif event.status == STATUS_PENDING and pending_older_than is not None:
            age = event.age
            if (reason in (None, STATUS_PENDING)) and age is not None and age >= pending_older_than:
                chosen.append(event)
    return sorted(chosen, key=lambda e: (e.since or now, e.order_id))


class Outcome(enum.StrEnum):
    REPUBLISHED = "republished"  # status set back to pending; the relay publishes it
    WOULD_REPUBLISH = "would-republish"  # --dry-run
    CHANGED = "changed"  # changed since it was read (published, parked again, edited): untouched
    NOT_STUCK = "not-stuck"  # dispatched: nothing to do
    NOT_FOUND = "not-found"  # no outbox document for this order
    FAILED = "failed"  # the write failed (permission, throttling ...): untouched


DONE = frozenset({Outcome.REPUBLISHED, Outcome.WOULD_REPUBLISH})


@dataclass(frozen=True)
class Republished:
    order_id: str
    event_id: str | None
    outcome: Outcome
    detail: str

    @property
    def done(self) -> bool:
        return self.outcome in DONE


def named(outbox: OutboxDocuments, order_ids: Sequence[str], now: datetime) -> list[StuckEvent]:
    """The outbox documents of these orders, read now (point reads), stuck or not."""
    found = []
    for order_id in order_ids:
        document = outbox.outbox_of(order_id)
        if document is not None:
            found.append(StuckEvent(document, now))
    return found


def republish(
    outbox: OutboxDocuments,
    events: Sequence[StuckEvent],
    *,
    missing: Sequence[str] = (),
    dry_run: bool = False,
) -> list[Republished]:
    results = [
        Republished(order_id, None, Outcome.NOT_FOUND, "no outbox document for this order")
        for order_id in missing
    ]
    for event in events:
        if event.status not in (STATUS_PARKED, STATUS_PENDING):
            results.append(
                Republished(
                    event.order_id,
                    event.event_id,
                    Outcome.NOT_STUCK,
                    f"status {event.status}: the relay published it, nothing to do",
                )
            )
        elif dry_run:
            results.append(
                Republished(
                    event.order_id,
                    event.event_id,
                    Outcome.WOULD_REPUBLISH,
                    f"would set status {event.status} -> {STATUS_PENDING}",
                )
            )
        else:
            results.append(_republish_one(outbox, event))
    return results


def _republish_one(outbox: OutboxDocuments, event: StuckEvent) -> Republished:
    try:
        republished = outbox.republish(event.document)
    except Exception as error:  # noqa: BLE001 - reported per event; the others still go
        return Republished(
            event.order_id,
            event.event_id,
            Outcome.FAILED,
            f"the write failed ({type(error).__name__}: {error}): list again to see",
        )
    if republished:
        return Republished(
            event.order_id,
            event.event_id,
            Outcome.REPUBLISHED,
            f"status {event.status} -> {STATUS_PENDING}: the relay publishes it with "
            f"MessageId {event.event_id}",
        )
    return Republished(
        event.order_id,
        event.event_id,
        Outcome.CHANGED,
        "changed since it was read (the relay published or parked it again, or someone "
        "edited it): left as it is; list again",
    )
