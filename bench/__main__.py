"""``python -m bench``: measure the performance targets in one run, print a summary, write
bench/results.json and the generated block of docs/benchmarks.md. ``--help`` for the flags."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import (
    coldstart,
    cpu,
    edge,
    ingestion,
    machine,
    memory,
    payments,
    relay,
    report,
    request_counts,
    stock,
    storage,
    throughput,
    watchdog,
)
from bench.standin import bench_account, standin

TARGETS = (
    "requests",
    "cpu",
    "throughput",
    "coldstart",
    "memory",
    "relay",
    "ingestion",
    "watchdog",
    "stock",
    "payments",
    "storage",
    "edge",
)
REPO_ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=TARGETS, default=TARGETS)
    parser.add_argument("--skip", nargs="+", choices=TARGETS, default=[])
    parser.add_argument("--cpu-messages", type=int, default=10_000, help="target 2: decides")
    parser.add_argument("--creates", type=int, default=2_000, help="target 2: create_item calls")
    parser.add_argument("--messages", type=int, default=500, help="target 3: per round")
    parser.add_argument("--rounds", type=int, default=41, help="target 3: rounds per function")
    parser.add_argument(
        "--path-messages", type=int, default=3_000, help="target 3: orders per step of the path"
    )
    parser.add_argument("--coldstart-runs", type=int, default=40, help="target 4: import pairs")
    parser.add_argument(
        "--first-message-rounds",
        type=int,
        default=10,
        help="target 4: pairs to the first message settled (0: skip that figure)",
    )
    parser.add_argument("--memory-messages", type=int, default=10_000, help="target 5")
    parser.add_argument("--relay-orders", type=int, default=1_000, help="target 6: per round")
    parser.add_argument("--relay-rounds", type=int, default=3, help="target 6: rounds per relay")
    parser.add_argument("--ingestion-orders", type=int, default=200, help="target 7")
    parser.add_argument("--watchdog-stuck", type=int, default=10_000, help="target 8: backlog")
    parser.add_argument(
        "--watchdog-page", type=int, default=None, help="target 8: page size (the app's default)"
    )
    parser.add_argument("--stock-events", type=int, default=2_000, help="target 9: decides")
    parser.add_argument(
        "--stock-creates", type=int, default=500, help="target 9: create_item calls"
    )
    parser.add_argument("--payment-events", type=int, default=2_000, help="target 10: decides")
    parser.add_argument(
        "--storage-orders", type=int, default=2_000, help="target 11: orders on one SKU"
    )
    parser.add_argument(
        "--payment-creates", type=int, default=500, help="target 10: create_item calls"
    )
    parser.add_argument(
        "--edge-replays", type=int, default=100, help="target 12: replays of each request"
    )
    parser.add_argument(
        "--edge-places", type=int, default=300, help="target 12: places timed (latency)"
    )
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "bench" / "results.json")
    parser.add_argument("--markdown", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    selected = [name for name in args.only if name not in args.skip]
    results: dict[str, Any] = {"cosmos": "not used"}
    with console.status("starting") as status:
        # Subprocess and pure-CPU targets first, while nothing else runs in this process.
        if "coldstart" in selected:
            status.update(
                f"target 4: {args.coldstart_runs} + {args.first_message_rounds} fresh "
                "interpreters per side"
            )
            results["coldstart"] = await asyncio.to_thread(
                coldstart.measure, args.coldstart_runs, args.first_message_rounds
            )
        if "memory" in selected:
            status.update(f"target 5: {args.memory_messages:,} messages")
            results["memory"] = await memory.measure(args.memory_messages)
        if "ingestion" in selected:
            status.update(f"target 7: {args.ingestion_orders:,} orders, sampled and not")
            results["ingestion"] = await asyncio.to_thread(ingestion.measure, args.ingestion_orders)
        cosmos_targets = {"requests", "cpu", "throughput", "relay", "watchdog", "stock", "edge"}
        if not {*cosmos_targets, "payments", "storage"} & set(selected):
            return results
        status.update("starting the Cosmos DB API")
        with bench_account() as account:
            results["cosmos"] = account.endpoint
            async with standin(account) as world:
                if "requests" in selected:
                    status.update("target 1: requests per outcome")
                    results["requests"] = await request_counts.count_outcomes(world)
                if "cpu" in selected:
                    status.update(
                        f"target 2: {args.cpu_messages:,} decides, {args.creates:,} creates"
                    )
                    results["cpu"] = await cpu.measure(
                        world.container, messages=args.cpu_messages, creates=args.creates
                    )
                if "throughput" in selected:
                    results["throughput"] = await throughput.measure(
                        world,
                        messages=args.messages,
                        rounds_count=args.rounds,
                        path_messages=args.path_messages,
                        progress=lambda text: status.update(f"target 3: {text}"),
                    )
                if "relay" in selected:
                    results["relay"] = await relay.measure(
                        world,
                        orders=args.relay_orders,
                        rounds_count=args.relay_rounds,
                        progress=lambda text: status.update(f"target 6: {text}"),
                    )
                if "stock" in selected:
                    status.update(
                        f"target 9: stock paths; {args.stock_events:,} decides, "
                        f"{args.stock_creates:,} creates"
                    )
                    results["stock"] = await stock.measure(
                        world.client,
                        world.settings.cosmos_database,
                        world.container,
                        world.transport,
                        events=args.stock_events,
                        creates=args.stock_creates,
                    )
                if "payments" in selected:
                    status.update(
                        f"target 10: payment paths; {args.payment_events:,} decides, "
                        f"{args.payment_creates:,} creates"
                    )
                    results["payments"] = await payments.measure(
                        world.client,
                        world.settings.cosmos_database,
                        world.container,
                        world.transport,
                        events=args.payment_events,
                        creates=args.payment_creates,
                    )
                if "storage" in selected:
                    status.update(f"target 11: {args.storage_orders:,} orders on one SKU")
                    results["storage"] = await storage.measure(
                        world.client, world.settings.cosmos_database, orders=args.storage_orders
                    )
                if "watchdog" in selected:
                    results["watchdog"] = await watchdog.measure(
                        world,
                        stuck=args.watchdog_stuck,
                        page_size=args.watchdog_page,
                        progress=lambda text: status.update(f"target 8: {text}"),
                    )
                if "edge" in selected:
                    status.update(
                        f"target 12: the orders API's paths, {args.edge_replays:,} replays each; "
                        f"{args.edge_places:,} places timed"
                    )
                    results["edge"] = await edge.measure(
                        world, replays=args.edge_replays, places=args.edge_places
                    )
    return results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    console = Console()
    # The consumer logs one line per message; the worker would ship it, we drop it (and put the
    # loggers back as they were when the run ends: a test runs main in-process).
    orders_logger, root = logging.getLogger("orders"), logging.getLogger()
    dropped, kept_propagate, kept_level = logging.NullHandler(), orders_logger.propagate, root.level
    orders_logger.addHandler(dropped)
    orders_logger.propagate = False
    root.setLevel(logging.ERROR)
    try:
        return _run_and_report(args, argv, console)
    finally:
        orders_logger.removeHandler(dropped)
        orders_logger.propagate = kept_propagate
        root.setLevel(kept_level)


def _run_and_report(args: argparse.Namespace, argv: list[str], console: Console) -> int:
    started = time.perf_counter()
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "arguments": " ".join(argv) or "(defaults)",
        "machine": machine.describe(),
    }
    results.update(asyncio.run(run(args, console)))
    results["duration_s"] = time.perf_counter() - started
    results["verdicts"] = {name: results[name]["ok"] for name in TARGETS if name in results}
    console.print(report.rich_table(results))
    if not args.no_write:
        args.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        report.write_markdown(args.markdown, report.markdown_block(results))
        console.print(f"wrote {args.output} and {args.markdown}")
    # Report, don't fail the build: the verdicts are in the table and the files.
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
