"""``python -m bench.dead_letters`` (``make bench-dead-letters``): drain a dead-letter queue of
``--count`` dead letters with the operator tool, twice: a bulk ``resubmit --reason`` of all of
them, and a ``purge --reason`` of all of them, through the tool's Service Bus adapter on the
real azure-servicebus client over the local broker (``local.assembly.dead_letter_queue``). The
figure that carries to Azure is the count of broker round trips by kind and how many times each dead
letter was received (one pass: once); the wall and CPU times are this machine's, of the SDK and the
tool without network latency. Prints a table and the figures as JSON (docs/operations.md, "The
dead-letter tool at scale", quotes a run).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
)
from local.standins.servicebus_link import LocalNamespace
from ops.cli import main
from tests.orders import order_body


def dead_letter_queue(count: int, clock: ManualClock, every: int) -> PeekLockQueue:
    """``count`` orders dead-lettered, one in ``every`` as after an outage (the reason the
    commands take), the others as ``UnsupportedSchemaVersion``; then a day later (past the
    window)."""
    broker = PeekLockQueue(QueueSettings.from_messaging_file(max_delivery_count=1), clock)
    for index in range(count):
        order_id = f"ord-{index:06d}"
        broker.send(OutgoingMessage(order_id, json.dumps(order_body(order_id)).encode()))
    index = 0
    while deliveries := broker.receive(500):
        for delivery in deliveries:
            if index % every == 0:
                broker.abandon(delivery.lock_token)  # max delivery count 1: dead-lettered now
            else:
                broker.dead_letter(delivery.lock_token, "UnsupportedSchemaVersion", "v2")
            index += 1
    clock.advance(timedelta(days=1, minutes=1))
    assert len(broker.dead_letters) == count
    return broker


def drain(count: int, command: list[str], every: int = 1) -> dict[str, Any]:
    clock = ManualClock(datetime.now(UTC) + timedelta(days=1))
    broker = dead_letter_queue(count, clock, every)
    calls: Counter[str] = Counter()
    namespace = LocalNamespace(
        {"orders": broker}, before_operation=lambda op: calls.update([op]), client_clock=clock
    )
    queue = LocalDeadLetterQueue(broker, namespace, wall_clock=clock)
    out = io.StringIO()
    wall, cpu = time.perf_counter(), time.process_time()
    code = main([*command, "--json"], queue=queue, out=out, confirm=lambda _prompt: True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    queue.close()
    report = json.loads(out.getvalue())
    stats = broker.stats
    return {
        "command": " ".join(command),
        "exit": code,
        "deadLetters": count,
        "verdicts": report["counts"],
        "wanted": len(range(0, count, every)),
        "leftInDeadLetterQueue": len(broker.dead_letters),
        "onTheQueue": len(broker.peek()),
        "receivedInScan": report["scan"]["received"],
        "mostReceivesOfOne": report["scan"]["mostReceivesOfOne"],
        "lockRenewals": report["scan"]["lockRenewals"],
        "brokerCalls": {
            "receive": calls["receive"],
            "complete": calls["settle:accepted"],
            "abandon": calls["settle:modified"],
            "peek": calls["mgmt:com.microsoft:peek-message"],
            "send": calls["send"],
        },
        "deadLetterDeliveries": stats.dead_letter_deliveries,
        "wallSeconds": round(wall, 2),
        "cpuSeconds": round(cpu, 2),
    }


def main_bench(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dead_letters", description=__doc__)
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args(argv)
    resubmit = ["resubmit", "--reason", MAX_DELIVERY_COUNT_EXCEEDED]
    purge = ["purge", "--reason", MAX_DELIVERY_COUNT_EXCEEDED, "--older-than", "1d", "--yes"]
    runs = [
        drain(args.count, resubmit),
        drain(args.count, purge),
        drain(args.count, resubmit, every=10),  # one in ten, spread across the queue
    ]
    console = Console(width=160)
    table = Table(
        "command", "of", "done", "received (max per letter)", "broker calls", "wall s", "CPU s"
    )
    for run in runs:
        calls = ", ".join(f"{n} {kind}" for kind, n in run["brokerCalls"].items())
        done = ", ".join(f"{n} {verdict}" for verdict, n in run["verdicts"].items())
        table.add_row(
            run["command"],
            f"{run['wanted']} of {run['deadLetters']}",
            done,
            f"{run['receivedInScan']} ({run['mostReceivesOfOne']})",
            calls,
            str(run["wallSeconds"]),
            str(run["cpuSeconds"]),
        )
    console.print(table)
    console.print_json(json.dumps({"cpus": os.cpu_count(), "runs": runs}))
    left = [run["leftInDeadLetterQueue"] == run["deadLetters"] - run["wanted"] for run in runs]
    return 0 if all(run["exit"] == 0 for run in runs) and all(left) else 1


if __name__ == "__main__":
    raise SystemExit(main_bench())
