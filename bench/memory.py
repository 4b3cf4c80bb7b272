"""Target 5: resident memory over many messages.

Default: the consumer path without I/O (host bytes decoded by the extension's converter,
``OrderConsumer.handle``, no-op telemetry, settlement through ``asyncio.to_thread`` with actions
that do nothing) against a store that forgets: it keeps only the last 256 orders, so the store's own
growth is not mistaken for the consumer's while duplicates (one message in ten) and invalid bodies
(one in twenty) still take their paths. RSS is read from /proc/self/statm after a warm-up and then
every ``sample_every`` messages.

``--memory-standin`` measures the full stand-in path instead (host, gRPC settlement, Cosmos
server); the peek-lock queue model keeps a settlement log and every lock token by design, so that
path includes the model's own growth.
"""

from __future__ import annotations

import gc
import os
import resource
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from bench.cpu import NoopActions, host_bytes
from bench.orders import INVALID_BODY, order_bytes, outgoing
from local.host_binding import decode_host_binding
from shared.consumer import OrderConsumer
from shared.errors import OrderAlreadyExists
from shared.telemetry import ConsumerTelemetry

TOLERANCE = 0.10


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: peak RSS is the best we have
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class ForgetfulStore:
    """The ``OrderStore`` port's semantics for the last ``keep`` orders; older ones are
    forgotten."""

    def __init__(self, keep: int = 256) -> None:
        self._keep = keep
        self._orders: OrderedDict[str, dict[str, Any]] = OrderedDict()

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        order_id = str(documents[0]["orderId"])
        if order_id in self._orders:
            raise OrderAlreadyExists(order_id)
        self._orders[order_id] = dict(documents[0])
        if len(self._orders) > self._keep:
            self._orders.popitem(last=False)

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        return self._orders.get(order_id)


def _content(index: int, prefix: str) -> bytes:
    if index % 20 == 19:
        return host_bytes(f"{prefix}-{index}", INVALID_BODY)
    if index % 10 == 9:  # a duplicate of the previous order
        return host_bytes(f"{prefix}-{index - 1}", order_bytes(f"{prefix}-{index - 1}"))
    return host_bytes(f"{prefix}-{index}", order_bytes(f"{prefix}-{index}"))


async def measure(
    messages: int = 10_000, warmup: int = 1_000, sample_every: int = 500
) -> dict[str, Any]:
    consumer = OrderConsumer(ForgetfulStore(), ConsumerTelemetry("orders"))
    actions = NoopActions()
    prefix = uuid.uuid4().hex[:8]
    for index in range(warmup):
        await consumer.handle(decode_host_binding(_content(index, f"w{prefix}")), actions)
    gc.collect()
    baseline = rss_bytes()
    samples: list[tuple[int, int]] = [(0, baseline)]
    for index in range(messages):
        await consumer.handle(decode_host_binding(_content(index, prefix)), actions)
        if (index + 1) % sample_every == 0:
            samples.append((index + 1, rss_bytes()))
    gc.collect()
    final = rss_bytes()
    return _summary("consumer path, forgetful store", messages, baseline, final, samples)


def _summary(
    path: str, messages: int, baseline: int, final: int, samples: list[tuple[int, int]]
) -> dict[str, Any]:
    peak = max(rss for _, rss in samples)
    low = min(rss for _, rss in samples)
    deviation = max(abs(peak - baseline), abs(low - baseline)) / baseline
    return {
        "path": path,
        "messages": messages,
        "baseline_mib": baseline / 2**20,
        "final_mib": final / 2**20,
        "peak_mib": peak / 2**20,
        "growth_bytes_per_message": (final - baseline) / messages,
        "max_deviation": deviation,
        "samples_mib": [(count, rss / 2**20) for count, rss in samples],
        "tolerance": TOLERANCE,
        "ok": deviation <= TOLERANCE,
    }


async def measure_standin(standin: Any, messages: int = 10_000, chunk: int = 500) -> dict[str, Any]:
    """The full stand-in path, ``chunk`` messages at a time."""
    await standin.deliver(*outgoing(f"mw-{uuid.uuid4().hex[:6]}", chunk))
    gc.collect()
    baseline = rss_bytes()
    samples: list[tuple[int, int]] = [(0, baseline)]
    done = 0
    while done < messages:
        await standin.deliver(*outgoing(f"m{done}-{uuid.uuid4().hex[:6]}", chunk))
        done += chunk
        samples.append((done, rss_bytes()))
    gc.collect()
    return _summary("full stand-in path", done, baseline, rss_bytes(), samples)
