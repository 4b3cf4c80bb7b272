"""``python -m ops parked list | show | republish``: the parked-event commands' arguments and
output (``ops.parked`` decides, ``ops.cosmos`` reads and patches)."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import datetime, timedelta

from rich.console import Console
from rich.table import Table

from ops.durations import parse_duration
from ops.parked import OutboxDocuments, Republished, named, republish, select_stuck


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parked = commands.add_parser(
        "parked", help="outbox events the relay parked (and long-pending ones)"
    )
    actions = parked.add_subparsers(dest="parked_command", required=True)

    listing = actions.add_parser("list", help="reason, description, age; oldest first")
    _selection(listing)
    listing.add_argument("--json", action="store_true")

    show = actions.add_parser("show", help="one outbox document, with its order")
    show.add_argument("order_id")

    again = actions.add_parser(
        "republish", help="set status back to pending (the relay publishes it)"
    )
    again.add_argument("order_ids", nargs="*", metavar="ORDER_ID")
    _selection(again)
    again.add_argument("--dry-run", action="store_true")
    again.add_argument("--json", action="store_true")


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reason", help="parkedReason (or 'pending')")
    parser.add_argument(
        "--pending-older-than",
        type=parse_duration,
        metavar="D",
        help="also pending documents created longer ago than D (e.g. 10m)",
    )


def run(args: argparse.Namespace, outbox: OutboxDocuments, console: Console, now: datetime) -> int:
    if args.parked_command == "show":
        return _show(args.order_id, outbox, console)
    if args.parked_command == "list":
        events = select_stuck(
            outbox.stuck(),
            now=now,
            reason=args.reason,
            pending_older_than=args.pending_older_than,
        )
        if args.json:
            console.print_json(json.dumps([event.row() for event in events]))
            return 0
        table = Table("orderId", "eventId", "status", "reason", "age", "description")
        for event in events:
            table.add_row(
                event.order_id,
                event.event_id,
                event.status,
                event.reason,
                _age(event.age),
                event.description[:80],
            )
        console.print(table)
        console.print(f"{len(events)} outbox event(s) not published")
        return 0
    return _republish(args, outbox, console, now)


def _show(order_id: str, outbox: OutboxDocuments, console: Console) -> int:
    document = outbox.outbox_of(order_id)
    if document is None:
        console.print(f"no outbox document for order {order_id!r}")
        return 1
    console.print_json(json.dumps({"outbox": document, "order": outbox.order(order_id)}))
    return 0


def _republish(
    args: argparse.Namespace, outbox: OutboxDocuments, console: Console, now: datetime
) -> int:
    if not args.order_ids and args.reason is None and args.pending_older_than is None:
        console.print("error: name order ids, or give --reason or --pending-older-than")
        return 2
    events = named(outbox, args.order_ids, now)
    missing = sorted(set(args.order_ids) - {event.order_id for event in events})
    if args.reason is not None or args.pending_older_than is not None:
        chosen = {event.order_id for event in events}
        events += [
            event
            for event in select_stuck(
                outbox.stuck(),
                now=now,
                reason=args.reason,
                pending_older_than=args.pending_older_than,
            )
            if event.order_id not in chosen
        ]
    results = republish(outbox, events, missing=missing, dry_run=args.dry_run)
    _report(results, console, as_json=args.json)
    return 0 if all(result.done for result in results) else 1


def _report(results: list[Republished], console: Console, *, as_json: bool) -> None:
    counts = Counter(result.outcome.value for result in results)
    if as_json:
        rows = [
            {
                "orderId": r.order_id,
                "eventId": r.event_id,
                "outcome": r.outcome.value,
                "detail": r.detail,
            }
            for r in results
        ]
        console.print_json(json.dumps({"results": rows, "counts": dict(counts)}))
        return
    table = Table("orderId", "eventId", "outcome", "detail")
    for result in results:
        table.add_row(result.order_id, str(result.event_id), result.outcome.value, result.detail)
    console.print(table)
    summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(counts.items()))
    console.print(f"{len(results)} outbox event(s): {summary or 'nothing to do'}")


def _age(age: timedelta | None) -> str:
    if age is None:
        return "?"
    seconds = int(age.total_seconds())
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    return f"{days}d{hours:02d}h{rest // 60:02d}m" if days else f"{hours}h{rest // 60:02d}m"
