"""Target 3: the consumer's throughput against the platform floor (``bench.floor_app``) at the
host's concurrency (``maxConcurrentCalls`` of host.json, 16): both functions of one app, invoked
through the same worker (``azure_functions_runtime``), queue, settlement server and transport,
each by a host of its own (``bench.standin``).

Each round sends fresh new orders to the queue (untimed), then times the host invoking until the
queue is idle. The two functions alternate, their order reversed every other round; the figure is
the median over the rounds of the consumer's rate against the floor's in the same round, so that
drift (other load, a growing container) hits both alike and a burst moves one ratio only. Both
must send exactly one document request per message (the same write) and settle every message;
otherwise the run reports a problem and fails the target.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import IncomingMessage

from bench import floor_app, order_path
from bench.orders import outgoing
from bench.standin import Function, StandIn
from bench.stats import median_standard_error, rounds
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents

TARGET_RATIO = 0.93
# The consumer's CPU per message against the floor's, median of the pairs (issue 35).
TARGET_CPU_RATIO = 1.1
FUNCTIONS: tuple[Function, Function] = ("consumer", "floor")


async def _round(
    standin: StandIn,
    function: Function,
    messages: int,
    *,
    timed: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> dict[str, float]:
    """One round of ``function``; ``timed`` is entered around the timed part only (a profiler:
    ``bench.path_profile``)."""
    batch = outgoing(f"{function}-{uuid.uuid4().hex[:8]}", messages)
    if function == "floor":
        now, outbox = datetime.now(UTC), standin.settings.outbox_enabled
        floor_app.expect(
            standin.container,
            {
                str(m.message_id): build_documents(
                    parse_order(m.body, m.message_id),
                    IncomingMessage(m.message_id, m.body, m.correlation_id),
                    outbox_enabled=outbox,
                    accepted_at=now,
                )
                for m in batch
            },
        )
    for message in batch:
        standin.queue.send(message)
    settled = len(standin.queue.settlement_log)
    requests = standin.transport.snapshot()
    # What the bench keeps (every round's settlement log, messages and documents) is not the
    # app's heap: frozen out of the collector before each timed round, so that a side that
    # allocates more is not charged for scanning the harness's growing state (gc.freeze).
    gc.collect()
    gc.freeze()
    collector = _CollectorTime()
    gc.callbacks.append(collector)
    cpu, start = time.process_time(), time.perf_counter()
    try:
        with timed():
            await standin.run_until_idle(function)
    finally:
        elapsed = time.perf_counter() - start
        gc.callbacks.remove(collector)
    completed = [r for r in standin.queue.settlement_log[settled:] if r.ok]
    return {
        "msgs_per_s": messages / elapsed,
        "cpu_ms_per_message": (time.process_time() - cpu) * 1000 / messages,
        "documents_per_message": standin.transport.snapshot().minus(requests).documents / messages,
        "completed_share": sum(r.operation == "complete" for r in completed) / messages,
        # The collector's share of that CPU: a side that allocates more collects more often.
        "collector_us_per_message": collector.seconds * 1e6 / messages,
        "collections_per_message": collector.collections / messages,
    }


class _CollectorTime:
    """The collector's CPU over a timed round (``gc.callbacks``: called at the start and the
    stop of every collection, on the thread that collects, holding the GIL)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started
            self.collections += 1


async def measure(
    standin: StandIn,
    *,
    messages: int = 500,
    rounds_count: int = 41,
    path_messages: int = 3_000,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    for function in FUNCTIONS:  # warm-up: clients, executors, code paths
        await _round(standin, function, min(messages, 50))
    found: dict[str, list[dict[str, float]]] = {function: [] for function in FUNCTIONS}
    for index in range(rounds_count):
        for function in FUNCTIONS if index % 2 == 0 else FUNCTIONS[::-1]:
            if progress is not None:
                progress(f"round {index + 1}/{rounds_count}: {function}")
            found[function].append(await _round(standin, function, messages))
    summary: dict[str, Any] = {
        "messages_per_round": messages,
        "rounds": rounds_count,
        "concurrency": standin.hosts["consumer"].max_concurrent_calls,  # host.json's
        "functions": {
            function: {key: rounds([r[key] for r in results]) for key in results[0]}
            for function, results in found.items()
        },
    }
    problems = [
        f"{function} round {index + 1}: {key} {value:g}"
        for function, results in found.items()
        for index, result in enumerate(results)
        for key, value in result.items()
        if key in ("documents_per_message", "completed_share") and value != 1
    ]
    # Each round of the consumer against the floor's round beside it (the same load, the same
    # container size): the median of these ratios, not the ratio of two medians, so that a burst
    # of other load moves one pair, not one side.
    ratios = [
        consumer["msgs_per_s"] / floor["msgs_per_s"]
        for consumer, floor in zip(found["consumer"], found["floor"], strict=True)
    ]
    summary["ratio_per_round"] = rounds(ratios)
    # How far the figure moves from run to run by the rounds' noise alone (docs/benchmarks.md,
    # "Eighth pass": the machine's speed changes in phases of seconds, on both sides alike).
    summary["ratio_standard_error"] = median_standard_error(ratios)
    # The second figure for this path: the consumer's CPU per message against the
    # floor's, per pair of rounds (this process: host, worker and SDK included on both sides).
    summary["cpu_ratio"] = statistics.median(
        consumer["cpu_ms_per_message"] / floor["cpu_ms_per_message"]
        for consumer, floor in zip(found["consumer"], found["floor"], strict=True)
    )
    # What that difference is made of: the consumer's own steps, each timed alone.
    summary["cpu_us_over_floor"] = statistics.median(
        (consumer["cpu_ms_per_message"] - floor["cpu_ms_per_message"]) * 1000
        for consumer, floor in zip(found["consumer"], found["floor"], strict=True)
    )
    summary["order_path"] = await order_path.measure(path_messages)
    summary["ratio"] = statistics.median(ratios)
    summary["problems"] = problems
    summary["target_ratio"] = TARGET_RATIO
    summary["target_cpu_ratio"] = TARGET_CPU_RATIO
    summary["ok"] = (
        summary["ratio"] >= TARGET_RATIO
        and summary["cpu_ratio"] <= TARGET_CPU_RATIO
        and not problems
    )
    return summary
