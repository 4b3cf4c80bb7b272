"""Target 5: resident memory stays flat over many messages.

The consumer path without I/O: the host's bytes decoded by the extension's converter,
``OrderConsumer.handle``, no-op telemetry (OpenTelemetry API, no SDK), settlement through the
consumer's own ``Settler`` (its bounded pool) with actions that remember nothing
(``RecordingActions(keep=0)``), against ``InMemoryOrderStore(keep=256)`` (it keeps only the last
256 orders, so the store's growth is not mistaken for the consumer's) while
duplicates (one message in ten) and invalid bodies (one in twenty) still take their paths. RSS is
read from /proc/self/statm after a warm-up and then at 20 points.
"""

from __future__ import annotations

import gc
import os
import resource
import uuid
from typing import Any

from idempotent_consumer.servicebus import Settler, to_incoming

from bench.cpu import host_bytes
from bench.orders import INVALID_BODY, order_bytes
from local.standins.doubles import InMemoryOrderStore, RecordingActions
from local.standins.host_binding import decode_host_binding
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry

TOLERANCE = 0.10


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best we have
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _content(index: int, prefix: str) -> bytes:
    if index % 20 == 19:
        return host_bytes(f"{prefix}-{index}", INVALID_BODY)
    if index % 10 == 9:  # a duplicate of the previous order
        return host_bytes(f"{prefix}-{index - 1}", order_bytes(f"{prefix}-{index - 1}"))
    return host_bytes(f"{prefix}-{index}", order_bytes(f"{prefix}-{index}"))


async def measure(messages: int = 10_000) -> dict[str, Any]:
    consumer = OrderConsumer(InMemoryOrderStore(keep=256), ConsumerTelemetry("orders"))
    actions, settler = RecordingActions(keep=0), Settler()

    async def handle(content: bytes) -> None:
        received = decode_host_binding(content)
        await consumer.handle(to_incoming(received), settler.bound(actions, received))

    prefix = uuid.uuid4().hex[:8]
    sample_every = max(1, messages // 20)
    for index in range(min(1_000, messages)):
        await handle(_content(index, f"w{prefix}"))
    gc.collect()
    baseline = rss_bytes()
    samples = [(0, baseline)]
    for index in range(messages):
        await handle(_content(index, prefix))
        if (index + 1) % sample_every == 0:
            samples.append((index + 1, rss_bytes()))
    deviation = max(abs(rss - baseline) for _, rss in samples) / baseline
    return {
        "messages": messages,
        "baseline_mib": baseline / 2**20,
        "final_mib": samples[-1][1] / 2**20,
        "growth_bytes_per_message": (samples[-1][1] - baseline) / messages,
        "max_deviation": deviation,
        "samples_mib": [(count, rss / 2**20) for count, rss in samples],
        "tolerance": TOLERANCE,
        "ok": deviation <= TOLERANCE,
    }
