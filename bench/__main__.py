"""``python -m bench``: run the benchmarks, print a summary, write bench/results.json and
docs/benchmarks.md. ``python -m bench --help`` for the flags (which benchmarks, how big)."""

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

from bench import coldstart, cpu, machine, memory, optimisations, plot, report, request_counts
from bench import throughput as throughput_bench
from bench.standin import cosmos_account, standin

BENCHMARKS = ("requests", "cpu", "throughput", "coldstart", "memory", "optimisations")
REPO_ROOT = Path(__file__).resolve().parent.parent
NOTES = [
    "The local Cosmos server (@vercel/cosmosdb-server) runs with HTTP keep-alive, as Cosmos DB "
    "does (`local.cosmos_server.LocalCosmosServer`'s default): its CLI closes every connection, "
    "which costs a TCP connect and a TLS handshake per request (--server-connection-close "
    "measures that way).",
    "The server ignores `Prefer: return=minimal`, so `no_response_on_write` saves no bytes "
    "here; against Cosmos DB it saves downloading and parsing each written document.",
    "Target 3 runs the stand-in's host side (queue model, receive loop, AMQP encoding, gRPC "
    "settlement server) in a child process, as the .NET host runs in Azure; the worker's side "
    "(decoding, the function, gRPC settlement) is in the benchmark process and counted in full. "
    "The host process still shares this machine's 2 cores with the worker and the Cosmos server.",
    "The machine is shared: other processes ran during the measurement (see the load average).",
]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    parser.add_argument("--skip", nargs="+", choices=BENCHMARKS, default=[], help="skip these")
    parser.add_argument("--cpu-messages", type=int, default=10_000)
    parser.add_argument("--lines", type=int, default=10, help="order lines (CPU benchmark)")
    parser.add_argument("--throughput-messages", type=int, default=500, help="per round")
    parser.add_argument("--rounds", type=int, default=7, help="throughput rounds")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="throughput variants (default: all; bare_create and consumer_create are the target)",
    )
    parser.add_argument("--coldstart-runs", type=int, default=15)
    parser.add_argument("--memory-messages", type=int, default=10_000)
    parser.add_argument(
        "--memory-standin", action="store_true", help="also measure RSS on the full stand-in path"
    )
    parser.add_argument("--optimisation-messages", type=int, default=3_000)
    parser.add_argument(
        "--server-connection-close",
        action="store_true",
        help="run cosmosdb-server as its CLI does (a new TLS connection per request)",
    )
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "bench" / "results.json")
    parser.add_argument("--markdown", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-write", action="store_true", help="print only")
    return parser.parse_args(argv)


async def run(
    args: argparse.Namespace, console: Console, cpu_samples: dict[str, list[float]]
) -> dict[str, Any]:
    selected = [name for name in (args.only or BENCHMARKS) if name not in args.skip]
    results: dict[str, Any] = {}
    needs_server = {"requests", "throughput", "optimisations"} & set(selected) or (
        "memory" in selected and args.memory_standin
    )
    with console.status("starting") as status:
        # Subprocess and pure-CPU benchmarks first, while nothing else runs in this process.
        if "coldstart" in selected:
            status.update(f"cold start: {args.coldstart_runs} fresh interpreters per side")
            results["coldstart"] = await asyncio.to_thread(coldstart.measure, args.coldstart_runs)
        if "cpu" in selected:
            status.update(f"consumer CPU: {args.cpu_messages:,} messages")
            results["cpu"] = await cpu.measure(
                args.cpu_messages, lines=args.lines, samples_sink=cpu_samples
            )
        if "memory" in selected:
            status.update(f"memory: {args.memory_messages:,} messages")
            results["memory"] = await memory.measure(args.memory_messages)
        if "optimisations" in selected:
            status.update("optimisations: micro-benchmarks")
            results["optimisations"] = await optimisations.measure(args.optimisation_messages)
        if not needs_server:
            return results
        status.update("starting the local Cosmos server")
        with cosmos_account(keep_alive=not args.server_connection_close) as account:
            results["cosmos_server"] = account.endpoint + (
                " (connection: close)" if args.server_connection_close else " (keep-alive)"
            )
            if "requests" in selected:
                status.update("requests per outcome")
                async with standin(account) as env:
                    results["requests"] = await request_counts.run(env)
            if "optimisations" in selected:
                status.update("optimisations: one client per process vs per message")
                async with standin(account, outbox=False) as env:
                    results["optimisations"][
                        "client_per_message"
                    ] = await optimisations.client_per_message(env)
            if "throughput" in selected:
                async with standin(account) as env:
                    kwargs: dict[str, Any] = {}
                    if args.variants:
                        kwargs["variants"] = tuple(args.variants)
                    results["throughput"] = await throughput_bench.measure(
                        env,
                        messages=args.throughput_messages,
                        rounds_count=args.rounds,
                        progress=lambda text: status.update(f"throughput: {text}"),
                        **kwargs,
                    )
            if "memory" in selected and args.memory_standin:
                status.update(f"memory, full stand-in: {args.memory_messages:,} messages")
                async with standin(account) as env:
                    results["memory_standin"] = await memory.measure_standin(
                        env, args.memory_messages
                    )
    return results


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    console = Console()
    # The consumer logs one line per message; the worker would ship it, we drop it.
    logging.getLogger("orders").addHandler(logging.NullHandler())
    logging.getLogger("orders").propagate = False
    logging.getLogger("azure").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "arguments": " ".join(argv) or "(defaults)",
        "machine": machine.describe(),
        "cosmos_server": "not used",
    }
    cpu_samples: dict[str, list[float]] = {}
    results.update(asyncio.run(run(args, console, cpu_samples)))
    results["duration_s"] = time.perf_counter() - started
    results["notes"] = NOTES
    verdicts: dict[str, bool | None] = {
        name: results[name]["ok"]
        for name in ("requests", "cpu", "throughput", "coldstart", "memory")
        if name in results
    }
    if "throughput" in results:
        verdicts["throughput over the platform floor"] = results["throughput"].get("floor_ok")
    results["verdicts"] = verdicts
    console.print(report.rich_table(results))
    if not args.no_write:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        if cpu_samples:
            figure = args.markdown.with_suffix(".png")
            plot.write_png(figure, cpu_samples, results.get("throughput"))
            results["figure"] = figure.name  # beside the Markdown, which links it
        args.output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        args.markdown.write_text(report.markdown(results) + "\n")
        written = f" and {results['figure']}" if "figure" in results else ""
        console.print(f"wrote {args.output}, {args.markdown}{written}")
    # Report, don't fail the build: the verdicts are in the table and the files.
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
