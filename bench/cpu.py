"""Target 2: the consumer's own CPU per message, with no I/O.

``decide`` runs against ``tests.memory_store.InMemoryOrderStore`` (its copies, a JSON round trip
each document, are included: they stand in for the SDK's serialisation). The full path adds what
the Python worker does with the host's bytes (``local.host_binding.decode_host_binding``, the
extension's converter), ``to_incoming``, the no-op telemetry of the OpenTelemetry API (no SDK
configured), and settlement through ``asyncio.to_thread`` with message actions that do nothing.
The thread hop is measured on its own, so the path can be read without it.

Each sample is one message, timed with ``perf_counter_ns``; the garbage collector stays on.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.orders import order_bytes
from bench.stats import distribution
from local.host_binding import decode_host_binding, encode_amqp, host_binding_bytes
from shared.consumer import OrderConsumer
from shared.contract import fingerprint_v1, parse_order
from shared.core import Decision, IncomingMessage, Outcome, build_documents, decide
from shared.settlement import to_incoming
from shared.telemetry import ConsumerTelemetry
from tests.memory_store import InMemoryOrderStore

P50_LIMIT_US = 150.0
P99_LIMIT_US = 500.0
_PROCESSED = Decision(Outcome.PROCESSED, order_id="x", request_hash="0" * 64)


class NoopActions:
    """``ServiceBusMessageActions`` that settle nothing: the settlement's I/O is left out."""

    def complete(self, message: Any) -> None:
        return None

    def abandon(self, message: Any) -> None:
        return None

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        return None


def _us(samples_ns: Sequence[int]) -> dict[str, Any]:
    return distribution([sample / 1000 for sample in samples_ns])


async def _timed_async[T](items: Sequence[T], call: Callable[[T], Awaitable[Any]]) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for item in items:
        start = clock()
        await call(item)
        samples.append(clock() - start)
    return samples


def _timed[T](items: Sequence[T], call: Callable[[T], Any]) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for item in items:
        start = clock()
        call(item)
        samples.append(clock() - start)
    return samples


def incoming(order_id: str, body: bytes) -> IncomingMessage:
    return IncomingMessage(order_id, body, correlation_id=f"corr-{order_id}", delivery_count=1)


def host_bytes(order_id: str, body: bytes) -> bytes:
    """The bytes the Functions host hands the worker for one delivery."""
    return host_binding_bytes(
        uuid.uuid4(),
        encode_amqp(
            body=body,
            message_id=order_id,
            correlation_id=f"corr-{order_id}",
            content_type="application/json",
        ),
    )


async def measure(
    messages: int = 10_000,
    lines: int = 10,
    warmup: int = 500,
    samples_sink: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """``samples_sink``, if given, receives the raw per-message samples (µs) of the three
    distributions, for the figure; the results keep only their summaries."""
    sink = samples_sink if samples_sink is not None else {}

    def keep(label: str, samples_ns: Sequence[int]) -> dict[str, Any]:
        sink[label] = [sample / 1000 for sample in samples_ns]
        return _us(samples_ns)

    prefix = uuid.uuid4().hex[:8]
    ids = [f"cpu-{prefix}-{index}" for index in range(warmup + messages)]
    bodies = {order_id: order_bytes(order_id, lines=lines) for order_id in ids}
    results: dict[str, Any] = {
        "messages": messages,
        "lines": lines,
        "body_bytes": len(bodies[ids[0]]),
    }

    # decide(), new orders, InMemoryOrderStore.
    store = InMemoryOrderStore()
    new = [incoming(order_id, bodies[order_id]) for order_id in ids]

    async def run_decide(message: IncomingMessage) -> None:
        await decide(message, store)

    await _timed_async(new[:warmup], run_decide)
    gc.collect()
    results["decide_new"] = keep("decide, new order", await _timed_async(new[warmup:], run_decide))
    # The same messages again: every one conflicts and is read back (duplicate path).
    sample = new[warmup : warmup + min(messages, 5_000)]
    results["decide_duplicate"] = keep("decide, duplicate", await _timed_async(sample, run_decide))

    # The full consumer path minus I/O: host bytes -> ServiceBusReceivedMessage -> handle().
    consumer = OrderConsumer(InMemoryOrderStore(), ConsumerTelemetry("orders"))
    actions = NoopActions()
    contents = [host_bytes(order_id, bodies[order_id]) for order_id in ids]

    async def run_handle(content: bytes) -> None:
        await consumer.handle(decode_host_binding(content), actions)

    await _timed_async(contents[:warmup], run_handle)
    gc.collect()
    results["handle_path"] = keep(
        "decode + handle + thread hop", await _timed_async(contents[warmup:], run_handle)
    )

    # Where the time goes (smaller samples).
    part = ids[warmup : warmup + min(messages, 3_000)]
    part_contents = contents[warmup : warmup + len(part)]
    received = [decode_host_binding(content) for content in part_contents]
    valid = [parse_order(bodies[order_id], order_id) for order_id in part]
    now = datetime.now(UTC)
    telemetry = ConsumerTelemetry("orders")

    def run_telemetry(message: IncomingMessage) -> None:
        with telemetry.processing(message) as span:
            telemetry.record_outcome(span, message, _PROCESSED, settled=True, duration_s=0)

    async def run_hop(_: object) -> None:
        await asyncio.to_thread(actions.complete, None)

    memory_store = InMemoryOrderStore()
    documents = [build_documents(v, new[0], outbox_enabled=True, accepted_at=now) for v in valid]

    async def run_store(docs: list[dict[str, Any]]) -> None:
        await memory_store.create(docs)

    results["parts"] = {
        "host_encode (stand-in host, not the worker)": _us(
            _timed(part, lambda order_id: host_bytes(order_id, bodies[order_id]))
        ),
        "decode_host_binding (worker, extension converter)": _us(
            _timed(part_contents, decode_host_binding)
        ),
        "to_incoming": _us(_timed(received, to_incoming)),
        "parse_order (JSON + validation + fingerprint)": _us(
            _timed(part, lambda order_id: parse_order(bodies[order_id], order_id))
        ),
        "fingerprint_v1": _us(_timed(valid, lambda v: fingerprint_v1(v.fields))),
        "build_documents": _us(
            _timed(
                valid, lambda v: build_documents(v, new[0], outbox_enabled=True, accepted_at=now)
            )
        ),
        "InMemoryOrderStore.create (JSON copy)": _us(await _timed_async(documents, run_store)),
        "telemetry span + outcome (OTel API, no SDK)": _us(
            _timed([new[0]] * len(part), run_telemetry)
        ),
        "asyncio.to_thread hop (settlement)": _us(await _timed_async(range(len(part)), run_hop)),
    }
    hop = results["parts"]["asyncio.to_thread hop (settlement)"]["p50"]
    results["handle_path_minus_hop_p50"] = results["handle_path"]["p50"] - hop
    decide_new = results["decide_new"]
    results["target"] = {"p50_limit_us": P50_LIMIT_US, "p99_limit_us": P99_LIMIT_US}
    results["ok"] = decide_new["p50"] <= P50_LIMIT_US and decide_new["p99"] <= P99_LIMIT_US
    return results
