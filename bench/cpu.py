"""Target 2: the consumer's own CPU per message (``decide``, no I/O) against the SDK's CPU for
one ``create_item``, both measured in this run, on this machine: a ratio, so it does not drift
with the machine as an absolute figure does.

``create_item_cpu_us`` is the SDK's side of the stock reservation's and the payment capture's
comparisons too (``bench.stock``, ``bench.payments``), and ``order_decide_cpu_us`` the figure the
payment capture's kit CPU is set beside. Also the no-I/O harness ``bench.memory`` reuses: the
bytes the host hands the worker. The store is the port's one double in its benchmark mode
(``InMemoryOrderStore(keep=...)``: no I/O, no copies, no request log). It never touches
product code paths other than through their API.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import IncomingMessage

from bench.floor_app import write_documents
from bench.orders import order_bytes
from bench.stats import distribution
from local.standins.doubles import InMemoryOrderStore
from local.standins.host_binding import encode_amqp, host_binding_bytes
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents, decide

TARGET_SHARE = 0.10  # decide's CPU ≤ 10% of one create_item's SDK CPU
CONCURRENCY = 16  # SDK calls in flight, as at maxConcurrentCalls


def host_bytes(order_id: str, body: bytes) -> bytes:
    """The bytes the Functions host hands the worker for one first delivery."""
    amqp = encode_amqp(body=body, message_id=order_id, correlation_id=f"corr-{order_id}")
    return host_binding_bytes(uuid.uuid4(), amqp)


async def measure(
    container: ContainerProxy, *, messages: int = 10_000, creates: int = 2_000
) -> dict[str, Any]:
    """``container``: the app's container through the production client (its transport too)."""
    decide_us = await order_decide_cpu_us(messages)
    create_us = await create_item_cpu_us(container, creates)
    share = decide_us["mean"] / create_us
    return {
        "messages": messages,
        "body_bytes": len(order_bytes("cpu-00000000-0")),
        "decide_cpu_us": decide_us,
        "creates": creates,
        "create_item_cpu_us": create_us,
        "share": share,
        "target_share": TARGET_SHARE,
        "ok": share <= TARGET_SHARE,
    }


async def order_decide_cpu_us(messages: int) -> dict[str, Any]:
    """The order consumer's own work per new order (validation, fingerprint, documents,
    decision): CPU time of this thread per message, other processes on the machine not
    counted. The payment capture's target (``bench.payments``) sets its kit's figure beside it."""
    prefix = uuid.uuid4().hex[:8]
    warmup = max(1, min(500, messages // 10))
    incoming = [
        IncomingMessage(order_id, order_bytes(order_id), f"corr-{order_id}", delivery_count=1)
        for order_id in (f"cpu-{prefix}-{index}" for index in range(warmup + messages))
    ]
    store = InMemoryOrderStore(keep=256)
    return await decide_cpu_us(lambda message: decide(message, store), incoming, warmup)


async def decide_cpu_us[T](
    decide_one: Callable[[T], Awaitable[object]], incoming: Sequence[T], warmup: int
) -> dict[str, Any]:
    """The CPU time of this thread per ``decide_one`` call, in microseconds, over
    ``incoming`` after its first ``warmup`` (run, not measured): the one sampling loop of every
    target's "own work per message" figure."""
    for message in incoming[:warmup]:
        await decide_one(message)
    gc.collect()
    samples_ns = []
    for message in incoming[warmup:]:
        start = time.thread_time_ns()
        await decide_one(message)
        samples_ns.append(time.thread_time_ns() - start)
    return distribution([sample / 1000 for sample in samples_ns])


async def create_item_cpu_us(container: ContainerProxy, creates: int) -> float:
    """The SDK's CPU for one create_item of a ~1 KB order document, 16 in flight: CPU time of
    this process (the event loop and any SDK thread), per call."""
    prefix = uuid.uuid4().hex[:8]
    incoming = [
        IncomingMessage(order_id, order_bytes(order_id), f"corr-{order_id}", delivery_count=1)
        for order_id in (f"create-{prefix}-{index}" for index in range(creates + 50))
    ]
    now = datetime.now(UTC)
    documents = [
        build_documents(parse_order(m.body, m.message_id), m, outbox_enabled=False, accepted_at=now)
        for m in incoming
    ]
    await _create_all(container, documents[creates:])  # warm-up: the client's metadata reads
    gc.collect()
    cpu_before = time.process_time()
    await _create_all(container, documents[:creates])
    return (time.process_time() - cpu_before) * 1e6 / creates


async def _create_all(container: ContainerProxy, documents: list[list[dict[str, Any]]]) -> None:
    pending = iter(documents)

    async def worker() -> None:
        for order in pending:
            await write_documents(container, order)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
