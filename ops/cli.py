"""``python -m ops``: the command line of the dead-letter tool. Translates arguments, builds the
adapters (or takes injected ones: tests, the local stand-in), calls ``ops.resubmit``, prints.

Exit codes: 0 done; 1 something was held, refused, dropped or not found (the operator must look);
2 usage or connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from ops.port import DeadLetter, DeadLetterQueue, OrderLookup
from ops.resubmit import (
    Result,
    Verdict,
    body_order_id,
    field_diff,
    purge_candidates,
    resubmit,
    select,
)

MESSAGING_FILE = Path(__file__).resolve().parent.parent / "infra" / "messaging.json"
_DURATION = re.compile(r"^(?:(?P<days>\d+)d)?(?:(?P<hours>\d+)h)?(?:(?P<minutes>\d+)m)?$")
_ISO_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?)?$"
)
_OK = {Verdict.RESUBMITTED, Verdict.ALREADY_STORED, Verdict.WOULD_RESUBMIT, Verdict.WOULD_REMOVE}


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``1d12h``, ``30m`` or ISO 8601 ``P1D`` / ``PT6H``."""
    match = _DURATION.match(text) or _ISO_DURATION.match(text)
    if match is None or not any(match.groupdict().values()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 7d, 12h, P1D)")
    return timedelta(**{k: int(v) for k, v in match.groupdict().items() if v})


def configured_window() -> timedelta:
    """The window the Bicep deploys (infra/messaging.json), unless --window says otherwise."""
    data = json.loads(MESSAGING_FILE.read_text(encoding="utf-8"))
    return parse_duration(str(data["duplicateDetectionHistoryTimeWindow"]))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops", description="The orders queue's dead-letter sub-queue."
    )
    env = os.environ.get
    parser.add_argument("--namespace", default=env("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"))
    parser.add_argument("--connection-string", default=env("SERVICEBUS_CONNECTION_STRING"))
    parser.add_argument("--queue", default=env("ORDERS_QUEUE_NAME", "orders"))
    parser.add_argument("--window", type=parse_duration, help="duplicate-detection window")
    parser.add_argument("--cosmos-endpoint", default=env("COSMOS_ENDPOINT"))
    parser.add_argument("--cosmos-key", default=env("COSMOS_KEY"))
    parser.add_argument("--cosmos-database", default=env("COSMOS_DATABASE", "orders"))
    parser.add_argument("--cosmos-container", default=env("COSMOS_CONTAINER", "orders"))
    parser.add_argument("--no-verify-tls", action="store_true", help="emulators only")
    commands = parser.add_subparsers(dest="command", required=True)

    listing = commands.add_parser("list", help="the dead letters, oldest first")
    listing.add_argument("--reason")
    listing.add_argument("--json", action="store_true")

    show = commands.add_parser("show", help="one dead letter; a HashMismatch with its diff")
    show.add_argument("message_id")

    again = commands.add_parser("resubmit", help="send copies back, verified, then remove")
    again.add_argument("message_ids", nargs="*", metavar="ID")
    again.add_argument("--reason", help="every dead letter with this reason")
    again.add_argument("--dry-run", action="store_true")
    again.add_argument(
        "--inside-window",
        action="store_true",
        help="send even inside the duplicate-detection window (verified; dropped copies stay)",
    )

    purge = commands.add_parser("purge", help="remove dead letters for good")
    purge.add_argument("--reason", required=True)
    purge.add_argument("--older-than", type=parse_duration, required=True)
    purge.add_argument("--yes", action="store_true", help="do not ask")
    purge.add_argument("--dry-run", action="store_true")
    return parser


def _connect(args: argparse.Namespace) -> tuple[DeadLetterQueue, OrderLookup | None]:
    from ops.servicebus import ServiceBusDeadLetterQueue

    queue = ServiceBusDeadLetterQueue.connect(
        args.queue,
        args.window or configured_window(),
        namespace=args.namespace,
        connection_string=args.connection_string,
    )
    orders: OrderLookup | None = None
    if args.cosmos_endpoint:
        from ops.cosmos import CosmosOrderLookup

        orders = CosmosOrderLookup.connect(
            args.cosmos_endpoint,
            args.cosmos_database,
            args.cosmos_container,
            key=args.cosmos_key,
            verify_tls=not args.no_verify_tls,
        )
    return queue, orders


def _row(letter: DeadLetter) -> dict[str, Any]:
    return {
        "messageId": letter.message_id,
        "sequenceNumber": letter.sequence_number,
        "enqueuedTime": letter.enqueued_time.isoformat(),
        "deliveryCount": letter.delivery_count,
        "reason": letter.reason,
        "description": letter.description,
    }


def _ask(prompt: str) -> bool:
    return input(prompt).strip().lower() in {"y", "yes"}


def main(
    argv: Sequence[str] | None = None,
    *,
    queue: DeadLetterQueue | None = None,
    orders: OrderLookup | None = None,
    confirm: Callable[[str], bool] = _ask,
    out: TextIO | None = None,
) -> int:
    args = build_parser().parse_args(argv)
    console = Console(file=out or sys.stdout, width=160, soft_wrap=True)
    if queue is None:
        try:
            queue, orders = _connect(args)
        except ValueError as error:
            console.print(f"error: {error}")
            return 2
    letters = sorted(queue.dead_letters(), key=lambda letter: letter.sequence_number)
    if args.command == "list":
        chosen = [x for x in letters if args.reason is None or x.reason == args.reason]
        return _list(console, chosen, as_json=args.json)
    if args.command == "show":
        return _show(console, letters, args.message_id, orders)
    if args.command == "resubmit":
        if not args.message_ids and args.reason is None:
            console.print("error: name message ids or give --reason")
            return 2
        chosen, missing = select(letters, args.message_ids, args.reason)
        if orders is None:
            console.print(
                "warning: no Cosmos DB endpoint: a copy is verified only by a peek of the "
                "queue, and one the consumer takes at once is reported as not seen"
            )
        results = resubmit(
            queue, chosen, orders=orders, dry_run=args.dry_run, inside_window=args.inside_window
        )
        return _report(console, results, missing)
    return _purge(console, queue, letters, args, confirm)


def _list(console: Console, letters: list[DeadLetter], *, as_json: bool) -> int:
    if as_json:
        console.print_json(json.dumps([_row(letter) for letter in letters]))
        return 0
    table = Table("MessageId", "seq", "enqueued (UTC)", "deliveries", "reason", "description")
    for letter in letters:
        table.add_row(
            str(letter.message_id),
            str(letter.sequence_number),
            letter.enqueued_time.strftime("%Y-%m-%d %H:%M:%S"),
            str(letter.delivery_count),
            letter.reason,
            (letter.description or "")[:80],
        )
    console.print(table)
    console.print(f"{len(letters)} dead letter(s)")
    return 0


def _show(
    console: Console, letters: list[DeadLetter], message_id: str, orders: OrderLookup | None
) -> int:
    chosen, missing = select(letters, [message_id])
    if missing:
        console.print(f"no dead letter with MessageId {message_id!r}")
        return 1
    for letter in chosen:
        console.print_json(
            json.dumps(
                {
                    **_row(letter),
                    "correlationId": letter.correlation_id,
                    "contentType": letter.content_type,
                    "subject": letter.subject,
                    "applicationProperties": dict(letter.application_properties),
                    "body": letter.body.decode("utf-8", errors="replace"),
                }
            )
        )
        if letter.reason != "HashMismatch":
            continue
        order_id = body_order_id(letter.body)
        stored = orders.stored_order(order_id) if orders and order_id else None
        if stored is None:
            console.print("stored order: not found (or no --cosmos-endpoint given)")
            continue
        table = Table("field", "dead letter", "stored order", title=f"order {order_id}")
        for name, mine, theirs in field_diff(letter, stored):
            table.add_row(name, json.dumps(mine), json.dumps(theirs))
        console.print(table)
    return 0


def _report(console: Console, results: list[Result], missing: list[str]) -> int:
    table = Table("MessageId", "seq", "reason", "verdict", "detail")
    for result in results:
        letter = result.letter
        table.add_row(
            str(letter.message_id),
            str(letter.sequence_number),
            letter.reason,
            result.verdict.value,
            result.detail,
        )
    console.print(table)
    for message_id in missing:
        console.print(f"not in the dead-letter queue: {message_id}")
    settled = all(result.verdict in _OK for result in results)
    return 0 if settled and not missing else 1


def _purge(
    console: Console,
    queue: DeadLetterQueue,
    letters: list[DeadLetter],
    args: argparse.Namespace,
    confirm: Callable[[str], bool],
) -> int:
    chosen = purge_candidates(letters, args.reason, args.older_than, queue)
    _list(console, chosen, as_json=False)
    if not chosen or args.dry_run:
        return 0
    prompt = f"Remove these {len(chosen)} dead letter(s) for good? [y/N] "
    if not args.yes and not confirm(prompt):
        console.print("nothing removed")
        return 1
    removed = queue.remove(letter.sequence_number for letter in chosen)
    console.print(f"removed {len(removed)} of {len(chosen)}")
    return 0 if len(removed) == len(chosen) else 1
