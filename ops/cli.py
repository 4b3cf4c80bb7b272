"""``python -m ops``: the operator's command line. Translates arguments, builds the adapters (or
takes injected ones: tests, the local stand-in), calls the commands' modules (``ops.resubmit``
for the dead-letter queue, ``ops.parked`` for parked outbox events, ``ops.history`` for one
order's history, ``ops.audit``, ``ops.stock`` for the inventory's stock items,
``ops.payments`` for the payment calls parked for reconciliation), prints: through one
``ops.terminal.TextConsole``, which prints every value as text, never markup, its control
characters escaped.

Every command reports per item what happened, and the exit status says whether everything asked
for did happen: 0 done; 1 something was held, refused, dropped, failed, not received or not found
(or an audit invariant FAILed, of the flow or of the stock): the operator must look; 2 usage or
connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from azure.core.exceptions import AzureError
from idempotent_consumer import SYSTEM_CLOCK, Clock
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops import audit_cli, history, init_cosmos, parked_cli, payments_cli, send, stock_cli
from ops.durations import parse_duration
from ops.parked import OutboxDocuments
from ops.port import DeadLetter, DeadLetterQueue, OrderLookup
from ops.resubmit import Result, Run, document_keys, field_diff, purge, purge_candidates, select
from ops.resubmit import resubmit as resubmit_letters
from ops.stock import Inventory
from ops.subscriptions import SUBSCRIPTIONS, EventReading
from ops.terminal import TextConsole
from ops.window import Window

# A table of every result is printed up to this many rows; beyond, the ones not done (and
# --json gives every one).
FULL_TABLE_ROWS = 200


@dataclass
class Adapters:
    """What the commands run against: built from the arguments, or injected."""

    queue: DeadLetterQueue | None = None
    orders: OrderLookup | None = None
    outbox: OutboxDocuments | None = None
    audit: audit_cli.AuditReader | None = None
    events: audit_cli.EventSource | None = None
    window: Window | None = None
    partition: history.OrderPartition | None = None
    inventory: Inventory | None = None

    @property
    def injected(self) -> bool:
        return any(
            x is not None
            for x in (
                self.queue,
                self.orders,
                self.outbox,
                self.audit,
                self.events,
                self.partition,
                self.inventory,
            )
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops",
        description="The orders queue's dead-letter sub-queue, parked outbox events, audit; "
        "stock items (stock); payment calls parked for reconciliation (payments); sample orders "
        "to a deployment (send) and its containers (init-cosmos).",
    )
    env = os.environ.get
    parser.add_argument("--namespace", default=env("SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"))
    parser.add_argument("--connection-string", default=env("SERVICEBUS_CONNECTION_STRING"))
    parser.add_argument("--queue", default=env("ORDERS_QUEUE_NAME", "orders"))
    parser.add_argument(
        "--window",
        type=parse_duration,
        help="duplicate-detection window (default: the queue's, else infra/messaging.json's)",
    )
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
    again.add_argument("--json", action="store_true", help="every result, as JSON")

    purging = commands.add_parser("purge", help="remove dead letters for good")
    purging.add_argument("--reason", required=True)
    purging.add_argument("--older-than", type=parse_duration, required=True)
    purging.add_argument("--yes", action="store_true", help="do not ask")
    purging.add_argument("--dry-run", action="store_true")
    purging.add_argument("--json", action="store_true", help="every result, as JSON")
    for dead_letters in (listing, show, again, purging):
        dead_letters.add_argument(
            "--subscription",
            choices=sorted(SUBSCRIPTIONS),
            help="a consumer subscription of the topic instead of the queue: its dead letters, "
            "copies sent to the topic",
        )
        dead_letters.add_argument("--topic", default=env("ORDER_EVENTS_TOPIC_NAME", "order-events"))
    parked_cli.add_commands(commands)
    history.add_command(commands)
    audit_cli.add_commands(commands)
    send.add_command(commands)
    stock_cli.add_commands(commands)
    payments_cli.add_commands(commands)
    commands.add_parser(
        "init-cosmos",
        help="create the database, the orders and the leases containers from app settings",
    )
    return parser


def _ask(prompt: str) -> bool:
    return input(prompt).strip().lower() in {"y", "yes"}


DEAD_LETTER_COMMANDS = frozenset({"list", "show", "resubmit", "purge"})


def main(
    argv: Sequence[str] | None = None,
    *,
    queue: DeadLetterQueue | None = None,
    orders: OrderLookup | None = None,
    outbox: OutboxDocuments | None = None,
    audit: audit_cli.AuditReader | None = None,
    events: audit_cli.EventSource | None = None,
    partition: history.OrderPartition | None = None,
    inventory: Inventory | None = None,
    clock: Clock | None = None,
    confirm: Callable[[str], bool] = _ask,
    out: TextIO | None = None,
) -> int:
    """Run one command. Adapters given here (tests, the demo) replace every connection: then
    nothing is built from the arguments. ``clock`` dates ages and windows (default: the
    dead-letter queue's, else the system's)."""
    args = build_parser().parse_args(argv)
    # Against a deployment's own services, with the app's settings: no adapter of the tool.
    if args.command == "send":
        return send.run(args, out or sys.stdout)
    if args.command == "init-cosmos":
        return init_cosmos.run(out or sys.stdout)
    console = TextConsole(out or sys.stdout)  # every value printed as text (ops.terminal)
    adapters = Adapters(
        queue=queue,
        orders=orders,
        outbox=outbox,
        audit=audit,
        events=events,
        partition=partition,
        inventory=inventory,
    )
    try:
        if args.command == "payments":  # its own clients (aio, the app's adapters)
            return payments_cli.run(args, console, (clock or SYSTEM_CLOCK).now())
        with _connected(args, adapters):
            if args.command in DEAD_LETTER_COMMANDS:
                return _dead_letter_command(args, adapters, console, confirm)
            if args.command == "history":
                if adapters.partition is None:
                    raise ValueError("history needs the orders container (--cosmos-endpoint)")
                return history.run(args, adapters.partition, console)
            if args.command == "stock":
                if adapters.inventory is None:
                    raise ValueError("stock needs the inventory container (--cosmos-endpoint)")
                return stock_cli.run(args, adapters.inventory, console)
            now = (clock or adapters.queue or SYSTEM_CLOCK).now()
            if args.command == "audit":
                return _audit(args, adapters, console, now)
            if adapters.outbox is None:
                raise ValueError("this command needs the orders container (--cosmos-endpoint)")
            return parked_cli.run(args, adapters.outbox, console, now)
    except ValueError as error:
        console.print(f"error: {error}")
        return 2
    except AzureError as error:  # a connection, permission or entity error: nothing to report
        console.print(f"error: {type(error).__name__}: {error}")
        return 2


@contextmanager
def _connected(args: argparse.Namespace, adapters: Adapters) -> Iterator[Adapters]:
    """Build what the command needs from the arguments, unless adapters were injected; close
    what was built here."""
    opened: list[Any] = []
    if args.window is not None:
        adapters.window = Window(args.window, "--window")
    try:
        if not adapters.injected:
            if args.command in DEAD_LETTER_COMMANDS:
                adapters.queue = _connect_queue(args, adapters, opened)
            if args.command == "audit":
                _connect_audit(args, adapters, opened)
            if args.cosmos_endpoint:
                from ops.cosmos import (
                    CosmosAuditReader,
                    CosmosOrderHistory,
                    CosmosOrderLookup,
                    CosmosOutboxDocuments,
                    container_client,
                )

                container = container_client(
                    args.cosmos_endpoint,
                    args.cosmos_database,
                    args.cosmos_container,
                    key=args.cosmos_key,
                    verify_tls=not args.no_verify_tls,
                )
                if args.command == "stock":
                    from ops.cosmos_inventory import CosmosInventory

                    adapters.inventory = CosmosInventory(
                        container_client(
                            args.cosmos_endpoint,
                            args.cosmos_database,
                            args.inventory_container,
                            key=args.cosmos_key,
                            verify_tls=not args.no_verify_tls,
                        )
                    )
                adapters.orders = CosmosOrderLookup(container)
                reading = _reading(args)
                if reading is not None:  # the subscription's consumer decides on its container
                    adapters.orders = CosmosOrderLookup(
                        container_client(
                            args.cosmos_endpoint,
                            args.cosmos_database,
                            os.environ.get(reading.container_setting, reading.default_container),
                            key=args.cosmos_key,
                            verify_tls=not args.no_verify_tls,
                        )
                    )
                adapters.outbox = CosmosOutboxDocuments(container)
                adapters.partition = CosmosOrderHistory(container)
                if args.command == "audit":
                    adapters.audit = CosmosAuditReader(container, max_documents=args.max_documents)
        yield adapters
    finally:
        for handle in reversed(opened):
            handle.close()


def _reading(args: argparse.Namespace) -> EventReading | None:
    """The topic subscription's consumer a dead-letter command reads, if one was named."""
    name = getattr(args, "subscription", None) if args.command in DEAD_LETTER_COMMANDS else None
    return None if name is None else SUBSCRIPTIONS[name]


def _connect_queue(args: argparse.Namespace, adapters: Adapters, opened: list[Any]) -> Any:
    from ops.servicebus import ServiceBusDeadLetterQueue
    from ops.window import admin_client, deployed_window

    subscription = args.subscription
    entity = args.queue if subscription is None else args.topic
    if adapters.window is None:
        admin = admin_client(namespace=args.namespace, connection_string=args.connection_string)
        opened.append(admin)
        adapters.window = deployed_window(admin, entity, topic=subscription is not None)
    built = ServiceBusDeadLetterQueue.connect(
        entity,
        adapters.window.value,
        namespace=args.namespace,
        connection_string=args.connection_string,
        subscription=subscription,
    )
    opened.append(built)
    return built


def _connect_audit(args: argparse.Namespace, adapters: Adapters, opened: list[Any]) -> None:
    """The audit peeks the dead-letter queue (no window needed) and, if asked, a subscription."""
    from ops.servicebus import ServiceBusDeadLetterQueue, ServiceBusEvents, client_for
    from ops.window import configured_window

    queue = ServiceBusDeadLetterQueue.connect(
        args.queue,
        configured_window(),
        namespace=args.namespace,
        connection_string=args.connection_string,
    )
    opened.append(queue)
    adapters.queue = queue
    if args.subscription:
        events = ServiceBusEvents(
            client_for(namespace=args.namespace, connection_string=args.connection_string),
            args.topic,
        )
        opened.append(events)
        adapters.events = events


def _audit(args: argparse.Namespace, adapters: Adapters, console: Console, now: Any) -> int:
    from datetime import UTC, datetime

    since, until = audit_cli.window(args, datetime.now(UTC))  # _ts is the server's time
    if adapters.audit is None or adapters.queue is None:
        raise ValueError("the audit needs the orders container (--cosmos-endpoint) and the queue")
    if args.subscription and adapters.events is None:
        raise ValueError("--subscription needs the namespace")
    run = audit_cli.read_and_check(
        adapters.audit,
        adapters.queue,
        adapters.events,
        since=since,
        until=until,
        subscription=args.subscription,
        pending_grace=args.pending_grace,
        now=now,
    )
    return audit_cli.print_run(run, console, as_json=args.json)


def _dead_letter_command(
    args: argparse.Namespace,
    adapters: Adapters,
    console: Console,
    confirm: Callable[[str], bool],
) -> int:
    queue = adapters.queue
    if queue is None:
        raise ValueError("this command needs the dead-letter queue")
    letters = sorted(queue.dead_letters(), key=lambda letter: letter.sequence_number)
    if args.command == "list":
        chosen = [x for x in letters if args.reason is None or x.reason == args.reason]
        return _list(console, chosen, as_json=args.json)
    if args.command == "show":
        return _show(console, letters, args.message_id, adapters.orders, _reading(args))
    if args.command == "resubmit":
        return _resubmit(console, queue, letters, args, adapters)
    return _purge(console, queue, letters, args, confirm)


def _row(letter: DeadLetter) -> dict[str, Any]:
    return {
        "messageId": letter.message_id,
        "sequenceNumber": letter.sequence_number,
        "enqueuedTime": letter.enqueued_time.isoformat(),
        "deliveryCount": letter.delivery_count,
        "reason": letter.reason,
        "description": letter.description,
        "bodyKind": letter.body_kind,
        "bodyProblem": letter.body_problem,
    }


def _body_cell(letter: DeadLetter) -> str:
    return letter.body_kind if letter.body_problem is None else f"{letter.body_kind}: unreadable"


def _list(console: Console, letters: list[DeadLetter], *, as_json: bool) -> int:
    if as_json:
        console.print_json(json.dumps([_row(letter) for letter in letters]))
        return 0
    table = Table(
        "MessageId", "seq", "enqueued (UTC)", "deliveries", "reason", "body", "description"
    )
    for letter in letters:
        table.add_row(
            str(letter.message_id),
            str(letter.sequence_number),
            letter.enqueued_time.strftime("%Y-%m-%d %H:%M:%S"),
            str(letter.delivery_count),
            letter.reason,
            _body_cell(letter),
            (letter.description or "")[:80],
        )
    console.print(table)
    console.print(f"{len(letters)} dead letter(s)")
    return 0


def _show(
    console: Console,
    letters: list[DeadLetter],
    message_id: str,
    orders: OrderLookup | None,
    reading: EventReading | None = None,
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
        if letter.body_problem is not None:
            console.print(f"body: {letter.body_problem}; shown above as its repr")
        if letter.reason != "HashMismatch" or reading is not None:
            continue  # the field diff is the orders consumer's (a subscription's: its marker)
        keys = document_keys(letter)
        stored = orders.documents(keys) if orders and keys else {}
        if not stored:
            console.print("stored order: not found (or no --cosmos-endpoint given)")
            continue
        table = Table("field", "dead letter", "stored", title=f"order {keys[0][1]}")
        for name, mine, theirs in field_diff(letter, stored):
            table.add_row(name, json.dumps(mine), json.dumps(theirs))
        console.print(table)
    return 0


@contextmanager
def _progress(console: Console, total: int, what: str) -> Iterator[Callable[[int], None]]:
    """A progress bar over the scan's receives (each dead letter is received once)."""
    with Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(what, total=total)
        yield lambda received: bar.advance(task, received)


def _resubmit(
    console: Console,
    queue: DeadLetterQueue,
    letters: list[DeadLetter],
    args: argparse.Namespace,
    adapters: Adapters,
) -> int:
    if not args.message_ids and args.reason is None:
        console.print("error: name message ids or give --reason")
        return 2
    chosen, missing = select(letters, args.message_ids, args.reason)
    window = adapters.window or Window(queue.duplicate_detection_window, "the queue adapter")
    notes = [f"duplicate-detection window: {window.value} (from {window.source})"]
    reading = _reading(args)
    if reading is not None:
        notes.append(
            f"subscription {args.topic}/{reading.subscription} ({reading.consumer}): copies go "
            "to the topic, so every subscription that takes the event gets one (each consumer "
            "completes what it handled already as a duplicate)"
        )
        if reading.handled_in is None:
            notes.append(
                f"{reading.consumer} has no one record of a whole event handled: a copy is "
                "verified by a peek of the subscription, and one the consumer takes at once is "
                "reported as not seen (its dead letter kept: a rerun sends a duplicate)"
            )
    if adapters.orders is None:
        notes.append(
            "no Cosmos DB endpoint: a copy is verified only by a peek of the queue, and one the "
            "consumer takes at once is reported as not seen (its dead letter kept)"
        )
    with _progress(console, len(letters), "scanning the dead-letter queue") as advance:
        run = resubmit_letters(
            queue,
            chosen,
            orders=adapters.orders,
            window=window.value,
            dry_run=args.dry_run,
            inside_window=args.inside_window,
            progress=advance,
            first_new_sequence=max((x.sequence_number for x in letters), default=0) + 1,
            reading=reading,
        )
    return _report(console, run, missing, notes, as_json=args.json)


def _purge(
    console: Console,
    queue: DeadLetterQueue,
    letters: list[DeadLetter],
    args: argparse.Namespace,
    confirm: Callable[[str], bool],
) -> int:
    chosen = purge_candidates(letters, args.reason, args.older_than, queue)
    if not args.json:
        _list(console, chosen, as_json=False)
    prompt = f"Remove these {len(chosen)} dead letter(s) for good? [y/N] "
    if chosen and not args.dry_run and not args.yes and not confirm(prompt):
        console.print("nothing removed")
        return 1
    with _progress(console, len(letters), "scanning the dead-letter queue") as advance:
        run = purge(queue, chosen, dry_run=args.dry_run, progress=advance)
    return _report(console, run, [], [], as_json=args.json)


def _report(
    console: Console, run: Run, missing: list[str], notes: list[str], *, as_json: bool
) -> int:
    results = run.results
    counts = Counter(result.verdict.value for result in results)
    scan = run.scan
    exit_code = 0 if all(r.done for r in results) and not missing and not scan.stopped else 1
    if as_json:
        console.print_json(
            json.dumps(
                {
                    "results": [_result_row(result) for result in results],
                    "missing": missing,
                    "counts": dict(counts),
                    "scan": {
                        "received": scan.receives,
                        "mostReceivesOfOne": scan.most_receives_of_one,
                        "lockRenewals": scan.renewals,
                        "stopped": scan.stopped,
                    },
                    "notes": notes,
                }
            )
        )
        return exit_code
    for note in notes:
        console.print(note)
    shown = results if len(results) <= FULL_TABLE_ROWS else [r for r in results if not r.done]
    if shown:
        table = Table("MessageId", "seq", "reason", "verdict", "detail")
        for result in shown:
            letter = result.letter
            table.add_row(
                str(letter.message_id),
                str(letter.sequence_number),
                letter.reason,
                result.verdict.value,
                result.detail,
            )
        console.print(table)
    if len(shown) < len(results):
        console.print(f"({len(results) - len(shown)} done, not listed: --json lists every one)")
    for message_id in missing:
        console.print(f"not in the dead-letter queue: {message_id}")
    summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items()))
    console.print(f"{len(results)} dead letter(s): {summary or 'nothing to do'}")
    if scan.receives:
        console.print(
            f"scan: {scan.receives} dead letter(s) received, none more than "
            f"{scan.most_receives_of_one} time(s); {scan.renewals} lock renewal(s)"
        )
    if scan.stopped:
        console.print(f"the scan stopped early: {scan.stopped}")
    return exit_code


def _result_row(result: Result) -> dict[str, Any]:
    return {**_row(result.letter), "verdict": result.verdict.value, "detail": result.detail}


__all__ = ["build_parser", "main", "parse_duration"]
