"""Target 3: end-to-end throughput through the local stand-in against a bare ``create_item`` loop.

Both sides use one ``CosmosClient`` built by ``shared.cosmos_store.create_client`` (the production
client options) and keep 16 requests in flight: the host stand-in runs ``maxConcurrentCalls`` = 16
invocations of the real function; the bare loop runs 16 asyncio workers. The bare loop writes the
very documents the consumer would write (built by ``shared.core.build_documents`` from the same
bodies). Variants run alternately, round after round, and each is reported as the median of its
rounds, so that drift (other load on the machine, a growing container) hits all of them alike.

The consumer side includes everything the stand-in does in this process: the host's AMQP encoding
of each delivery (done by the .NET host in Azure), the worker's decoding, the function, and
settlement over gRPC to the settlement server (threads in this process).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from bench.cpu import NoopActions, host_bytes
from bench.orders import order_bytes
from bench.standin import StandIn
from bench.stats import rounds
from bench.transport import CountingTransport
from local.broker import OutgoingMessage
from local.host_binding import decode_host_binding
from shared import runtime
from shared.contract import parse_order
from shared.core import IncomingMessage, build_documents
from shared.cosmos_store import OPERATION_TIMEOUT_S, create_client

CONCURRENCY = 16
TARGET_RATIO = 0.85


def _messages(prefix: str, count: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(
            message_id=f"{prefix}-{index}",
            body=order_bytes(f"{prefix}-{index}"),
            correlation_id=f"corr-{prefix}-{index}",
        )
        for index in range(count)
    ]


def _documents(messages: list[OutgoingMessage], outbox: bool) -> list[list[dict[str, Any]]]:
    now = datetime.now(UTC)
    result = []
    for message in messages:
        assert message.message_id is not None
        incoming = IncomingMessage(
            message.message_id, message.body, message.correlation_id, delivery_count=1
        )
        valid = parse_order(message.body, message.message_id)
        result.append(build_documents(valid, incoming, outbox_enabled=outbox, accepted_at=now))
    return result


async def bare_loop(container: Any, batches: list[list[dict[str, Any]]]) -> None:
    """16 workers, each awaiting one write at a time: create_item, or one batch per order."""
    pending = iter(batches)

    async def worker() -> None:
        for documents in pending:
            if len(documents) == 1:
                await container.create_item(dict(documents[0]), timeout=OPERATION_TIMEOUT_S)
            else:
                await container.execute_item_batch(
                    [("create", (dict(document),)) for document in documents],
                    partition_key=documents[0]["orderId"],
                    timeout=OPERATION_TIMEOUT_S,
                )

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def _run_host(standin: StandIn) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        await standin.host.run_until_idle()

    return run


async def _timed(call: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def measure(
    standin: StandIn,
    *,
    messages: int = 1_000,
    rounds_count: int = 5,
    variants: tuple[str, ...] = (
        "bare_create",
        "consumer_create",
        "consumer_create_executor16",
        "bare_create_with_response",
        "bare_batch",
        "consumer_batch",
        "consumer_direct_create",
    ),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    default_size = ThreadPoolExecutor()._max_workers  # what asyncio's default executor gets
    executors = {
        "default": ThreadPoolExecutor(thread_name_prefix="asyncio"),
        "16": ThreadPoolExecutor(max_workers=CONCURRENCY, thread_name_prefix="settle"),
    }
    loop.set_default_executor(executors["default"])
    standin.host.max_concurrent_calls = CONCURRENCY
    # A second client, identical but for no_response_on_write=False: what that option saves.
    with_response_transport = CountingTransport(connection_verify=False)
    with_response = create_client(
        standin.settings, transport=with_response_transport, no_response_on_write=False
    )
    container_with_response = with_response.get_database_client(
        standin.settings.cosmos_database
    ).get_container_client(standin.settings.cosmos_container)

    async def run_variant(variant: str, prefix: str) -> tuple[float, dict[str, float]]:
        outbox = variant.endswith("batch")
        batch = _messages(prefix, messages)
        transport = standin.transport
        if variant == "consumer_direct_create":
            # The consumer without the stand-in's host and gRPC settlement: decode the host's
            # bytes, then OrderConsumer.handle with actions that do nothing, 16 at a time.
            standin.use_outbox(outbox)
            loop.set_default_executor(executors["default"])
            consumer = await runtime.get_consumer()
            contents = [host_bytes(m.message_id or "", m.body) for m in batch]
            actions = NoopActions()
            pending = iter(contents)

            async def worker() -> None:
                for content in pending:
                    await consumer.handle(decode_host_binding(content), actions)

            before = transport.snapshot()

            async def direct() -> None:
                await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))

            elapsed = await _timed(direct)
        elif variant.startswith("consumer"):
            standin.use_outbox(outbox)
            loop.set_default_executor(
                executors["16" if variant.endswith("executor16") else "default"]
            )
            for message in batch:
                standin.queue.send(message)
            before = transport.snapshot()
            elapsed = await _timed(_run_host(standin))
        else:
            documents = _documents(batch, outbox)
            container = standin.container
            if variant == "bare_create_with_response":
                container, transport = container_with_response, with_response_transport
            before = transport.snapshot()
            elapsed = await _timed(lambda: bare_loop(container, documents))
        delta = transport.snapshot().minus(before)
        return elapsed, {
            "documents_per_message": delta.documents / messages,
            "response_bytes_per_message": delta.response_bytes / messages,
        }

    # Warm-up: both clients, the host path, the executors.
    for variant in variants:
        await run_variant(variant, f"warm-{variant}-{uuid.uuid4().hex[:6]}")
    results: dict[str, dict[str, Any]] = {v: {"seconds": [], "extra": {}} for v in variants}
    for round_index in range(rounds_count):
        order = variants if round_index % 2 == 0 else tuple(reversed(variants))
        for variant in order:
            if progress is not None:
                progress(f"round {round_index + 1}/{rounds_count}: {variant}")
            elapsed, extra = await run_variant(variant, f"r{round_index}-{uuid.uuid4().hex[:6]}")
            results[variant]["seconds"].append(elapsed)
            results[variant]["extra"] = extra
    await with_response.close()
    loop.set_default_executor(ThreadPoolExecutor())
    for executor in executors.values():
        executor.shutdown(wait=False)

    summary: dict[str, Any] = {
        "messages_per_round": messages,
        "rounds": rounds_count,
        "concurrency": CONCURRENCY,
        "default_executor_threads": default_size,
        "failed_invocations": standin.host.stats.failed_invocations,
        "dead_letters": len(standin.queue.dead_letters),
        "variants": {},
    }
    for variant, data in results.items():
        rates = [messages / seconds for seconds in data["seconds"]]
        summary["variants"][variant] = {"msgs_per_s": rounds(rates), **data["extra"]}

    def ratio(consumer: str, bare: str) -> float | None:
        found = summary["variants"]
        if consumer not in found or bare not in found:
            return None
        value: float = found[consumer]["msgs_per_s"]["median"] / found[bare]["msgs_per_s"]["median"]
        return value

    summary["ratios"] = {
        "consumer_create / bare_create": ratio("consumer_create", "bare_create"),
        "consumer_create_executor16 / bare_create": ratio(
            "consumer_create_executor16", "bare_create"
        ),
        "consumer_batch / bare_batch": ratio("consumer_batch", "bare_batch"),
        "consumer_direct_create / bare_create": ratio("consumer_direct_create", "bare_create"),
        "bare_create / bare_create_with_response": ratio(
            "bare_create", "bare_create_with_response"
        ),
    }
    primary = summary["ratios"]["consumer_create / bare_create"]
    summary["target_ratio"] = TARGET_RATIO
    summary["ok"] = (
        primary is not None
        and primary >= TARGET_RATIO
        and summary["failed_invocations"] == 0
        and summary["dead_letters"] == 0
    )
    return summary
