"""``python -m ops audit --since ...``: read a window of the live flow (``ops.cosmos.
CosmosAuditReader``, the dead-letter queue by peek, optionally a subscription of the topic by
peek), check the invariants (``ops.audit``), print each PASS or FAIL with its offending ids and
what the reads cost. Exit 0: every invariant holds; 1: one FAILed; 2: usage or connection.

The window is on the server's write times (Cosmos DB ``_ts``), so it is taken from the wall
clock: the orders written in it (an order is rewritten by each change applied to it), the event
of each one's current version read by id wherever its ``_ts`` is (the relay's dispatch rewrites
it: ``ops.cosmos.CosmosAuditReader``), and the inbox markers written in it.
It may reach back at most ``DISPATCHED_TTL_S`` (7 days): a dispatched
outbox event expires then (shared.relay.core), and an order older than that would look as if it
had none. Every check that waits on the relay allows ``--pending-grace``: an event pending for
less than that is neither overdue nor missing from the subscription (``ops.audit``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ops.audit import AuditData, Invariant, SeenEvent, audit, event_version
from ops.durations import parse_duration
from ops.port import DeadLetterQueue
from shared.consumer.lifecycle import PARTITION_FIELD as MARKER_ORDER_ID  # the markers' order id
from shared.consumer.order import stored_version
from shared.relay.outbox import DISPATCHED_TTL_S, OutboxField, outbox_document_id

MAX_LOOKBACK = timedelta(seconds=DISPATCHED_TTL_S)


class AuditReader(Protocol):
    request_charge: float
    documents_read: int

    def orders_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]: ...

    def outbox_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]: ...

    def outbox_of(self, versions: set[tuple[str, int]]) -> list[dict[str, Any]]: ...

    def markers_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]: ...

    def stuck_outbox(self) -> list[dict[str, Any]]: ...

    def orders_by_id(self, order_ids: set[str]) -> dict[str, dict[str, Any]]: ...


class EventSource(Protocol):
    def events(self, subscription: str) -> list[SeenEvent]: ...


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("audit", help="the flow's invariants over a time window")
    check.add_argument(
        "--since",
        required=True,
        help="how far back (a duration: 1d, 6h, PT30M) or from when (ISO 8601, UTC if no zone)",
    )
    check.add_argument("--until", help="ISO 8601 (default: now)")
    check.add_argument(
        "--subscription",
        help="a subscription of the topic to read delivered events from (by peek)",
    )
    check.add_argument("--topic", default="order-events")
    check.add_argument(
        "--pending-grace",
        type=parse_duration,
        default=timedelta(minutes=5),
        metavar="D",
        help="how long an outbox event may be pending before it counts (default 5m)",
    )
    check.add_argument("--max-documents", type=int, default=200_000)
    check.add_argument("--json", action="store_true")


def window(args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    until = _moment(args.until) if args.until else now
    try:
        since = until - parse_duration(args.since)
    except argparse.ArgumentTypeError:
        since = _moment(args.since)
    if since >= until:
        raise ValueError(f"--since {args.since!r} is not before --until")
    if since < now - MAX_LOOKBACK:
        raise ValueError(
            f"--since reaches back more than {MAX_LOOKBACK.days} days: dispatched outbox events "
            "expire then, and their orders would look as if they had none"
        )
    return since, until


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise ValueError(f"not a duration or an ISO 8601 time: {text!r}") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class AuditRun:
    data: AuditData
    invariants: list[Invariant]
    since: datetime
    until: datetime
    subscription: str | None

    @property
    def passed(self) -> bool:
        return all(invariant.passed for invariant in self.invariants)


def read_and_check(
    reader: AuditReader,
    queue: DeadLetterQueue,
    events: EventSource | None,
    *,
    since: datetime,
    until: datetime,
    subscription: str | None,
    pending_grace: timedelta,
    now: datetime,
) -> AuditRun:
    orders = reader.orders_written(since, until)
    current = {(str(d.get("orderId")), stored_version(d)) for d in orders}
    outbox = reader.outbox_written(since, until)
    # The events of the window's orders' current versions last written after it (dispatched,
    # parked, republished since): by id, so an order changed just before --until is not
    # "without the outbox event of its current version".
    outbox += reader.outbox_of(current - events_of_versions(outbox))
    markers = reader.markers_written(since, until)
    stuck = reader.stuck_outbox()
    # After every outbox read: an event read as pending may be delivered by now (it counts as
    # delivered), one read as dispatched was sent before this peek (so it is there to see).
    seen = events.events(subscription) if events is not None and subscription else None
    pointed_to = (
        {str(d.get(OutboxField.ORDER_ID)) for d in outbox}
        | {str(e.order_id) for e in seen or [] if e.order_id}
        | {str(m.get(MARKER_ORDER_ID)) for m in markers}
    )
    referenced = reader.orders_by_id(pointed_to - {order_id for order_id, _ in current})
    data = AuditData(
        orders=orders,
        outbox=outbox,
        stuck=stuck,
        referenced=referenced,
        dead_letters=queue.dead_letters(),
        events=seen,
        request_charge=reader.request_charge,  # after every read above
        markers=markers,
    )
    checked = audit(data, now=now, pending_grace=pending_grace)
    return AuditRun(data, checked, since, until, subscription)


def events_of_versions(outbox: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """The (order id, version)s whose outbox document is among these, under its own id."""
    found = set()
    for d in outbox:
        order_id, version = str(d.get(OutboxField.ORDER_ID)), event_version(d)
        if version is not None and d.get(OutboxField.ID) == outbox_document_id(order_id, version):
            found.add((order_id, version))
    return found


def print_run(run: AuditRun, console: Console, *, as_json: bool) -> int:
    data = run.data
    read = {
        "since": run.since.isoformat(),
        "until": run.until.isoformat(),
        "orders": len(data.orders),
        "outboxEvents": len(data.outbox),
        "markers": len(data.markers),
        "stuckOutboxEvents": len(data.stuck),
        "ordersReadById": len(data.referenced),
        "deadLetters": len(data.dead_letters),
        "deliveredEvents": None if data.events is None else len(data.events),
        "subscription": run.subscription,
        "requestCharge": round(data.request_charge, 2),
    }
    if as_json:
        rows = [
            {"name": i.name, "verdict": i.verdict, "offending": i.offending, "detail": i.detail}
            for i in run.invariants
        ]
        console.print_json(json.dumps({"passed": run.passed, "invariants": rows, "read": read}))
        return 0 if run.passed else 1
    title = f"audit {run.since:%Y-%m-%d %H:%M} to {run.until:%Y-%m-%d %H:%M} UTC"
    table = Table("invariant", "", "detail", title=title)
    for invariant in run.invariants:
        colour = "green" if invariant.passed else "red"
        verdict = Text(str(invariant.verdict), style=colour)  # a style, never markup
        table.add_row(invariant.name, verdict, invariant.detail)
    console.print(table)
    subscription = (
        f"{read['deliveredEvents']} events at subscription {run.subscription}"
        if data.events is not None
        else "no subscription read (--subscription): delivery not checked, only the outbox"
    )
    console.print(
        f"read {read['orders']} orders, {read['outboxEvents']} outbox events, "
        f"{read['markers']} inbox markers of the window, "
        f"{read['stuckOutboxEvents']} parked or pending, {read['ordersReadById']} orders by id, "
        f"{read['deadLetters']} dead letters; {subscription}; {read['requestCharge']} RU"
    )
    return 0 if run.passed else 1
