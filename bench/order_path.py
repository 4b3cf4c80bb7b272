"""Where the consumer's CPU per ``OrderPlaced`` goes beyond the platform floor's (target 3's
second figure, issue 35: "say where each microsecond goes").

Each step of ``consume_order``'s own work is timed alone, CPU time of this thread per message,
over messages of its own (a new order each), in the order a delivery meets them:

- ``to_incoming``: the extension's message read into the kit's terms (id, body, properties,
  lock expiry, subject);
- ``contract``: ``parse_message``, the JSON read, the schema and the fingerprint;
- ``documents``: ``build_documents``, the order and its outbox event;
- ``decision``: the rest of ``decide`` (the call of the store port, the outcome): ``decide`` on
  a store double that does no I/O, less the two steps before and less the double's own create
  (timed alone: it stands for the adapter's request, which the floor sends too);
- ``kit service``: ``Consumer.handle`` with an observer that does nothing, less ``decide`` (the
  retry loop's deadline, the settle callback's call);
- ``telemetry``: the app's observer (spans, metrics, the outcome's log record) with the
  providers this process has (none configured in the bench: the API's no-op ones), less the
  silent observer's run.

The floor does none of these: it decodes the same bytes, sends the same request with documents
built in advance and settles the same way. These are the steps' hot costs: through the worker
the same code runs cold between the host's, the worker's and the SDK's, and costs 3-4 x as much
(``bench.path_profile`` measures it there), which is most of the consumer-minus-floor CPU that
target 3 reports beside them. Each step is measured ``passes`` times, interleaved, and the median
kept.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import Decision, IncomingMessage
from idempotent_consumer.servicebus import to_incoming

from bench.cpu import host_bytes
from bench.orders import order_bytes
from local.standins.doubles import InMemoryOrderStore
from local.standins.host_binding import decode_host_binding
from shared.consumer.contract import ValidOrder, parse_message, parse_order
from shared.consumer.core import build_documents, decide
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry

STEPS = ("to_incoming", "contract", "documents", "decision", "kit service", "telemetry")


class SilentObserver:
    """The ``ConsumerObserver`` that reports nothing: the kit service's cost without telemetry."""

    def processing(self, message: IncomingMessage) -> AbstractContextManager[str | None]:
        return nullcontext()  # the cheapest context manager: none of its cost is the kit's

    def retrying(self, *args: Any, **kwargs: Any) -> None:
        pass

    def settlement_failed(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record_outcome(self, *args: Any, **kwargs: Any) -> None:
        pass

    def configuration_invalid(self, *args: Any, **kwargs: Any) -> None:
        pass


def _received(count: int) -> list[Any]:
    prefix = uuid.uuid4().hex[:8]
    return [
        decode_host_binding(host_bytes(f"path-{prefix}-{i}", order_bytes(f"path-{prefix}-{i}")))
        for i in range(count)
    ]


def _cpu_us_per_item[T](items: list[T], step: Callable[[T], object]) -> float:
    start = time.thread_time_ns()
    for item in items:
        step(item)
    return (time.thread_time_ns() - start) / 1000 / len(items)


async def _async_cpu_us_per_item[T](items: list[T], step: Callable[[T], Any]) -> float:
    start = time.thread_time_ns()
    for item in items:
        await step(item)
    return (time.thread_time_ns() - start) / 1000 / len(items)


def _pairs(incoming: list[IncomingMessage]) -> list[tuple[ValidOrder, IncomingMessage]]:
    return [(parse_order(m.body, m.message_id), m) for m in incoming]


async def _settle_nothing(decision: Decision) -> None:
    pass


async def _one_pass(messages: int) -> dict[str, float]:
    """CPU µs per message of each measured call, each on orders of its own."""
    store = InMemoryOrderStore(keep=256)
    silent = OrderConsumer(store, SilentObserver())
    observed = OrderConsumer(store, ConsumerTelemetry("orders"))
    now = datetime.now(UTC)

    received = _received(messages)
    incoming = [to_incoming(message) for message in received]
    pairs = _pairs(incoming)
    documents = [
        build_documents(v, m, outbox_enabled=True, accepted_at=now)
        for v, m in _pairs([to_incoming(message) for message in _received(messages)])
    ]
    return {
        "store double": await _async_cpu_us_per_item(documents, store.create),
        "to_incoming": _cpu_us_per_item(received, to_incoming),
        "contract": _cpu_us_per_item(
            incoming, lambda m: parse_message(m.body, m.message_id, m.subject)
        ),
        "documents": _cpu_us_per_item(
            pairs, lambda p: build_documents(p[0], p[1], outbox_enabled=True, accepted_at=now)
        ),
        "decide": await _async_cpu_us_per_item(
            [to_incoming(m) for m in _received(messages)], lambda m: decide(m, store)
        ),
        "silent handle": await _async_cpu_us_per_item(
            [to_incoming(m) for m in _received(messages)],
            lambda m: silent.handle(m, _settle_nothing),
        ),
        "observed handle": await _async_cpu_us_per_item(
            [to_incoming(m) for m in _received(messages)],
            lambda m: observed.handle(m, _settle_nothing),
        ),
    }


async def measure(messages: int = 3_000, passes: int = 5) -> dict[str, Any]:
    """Each step's CPU µs per ``OrderPlaced`` (median of ``passes``, after one unmeasured)."""
    await _one_pass(min(messages, 500))  # warm-up: code paths, caches
    found = [await _one_pass(messages) for _ in range(passes)]
    median = {key: statistics.median(run[key] for run in found) for key in found[0]}
    steps = {
        "to_incoming": median["to_incoming"],
        "contract": median["contract"],
        "documents": median["documents"],
        # The double's create stands for the adapter's request, which target 3 counts apart.
        "decision": median["decide"]
        - median["contract"]
        - median["documents"]
        - median["store double"],
        "kit service": median["silent handle"] - median["decide"],
        "telemetry": median["observed handle"] - median["silent handle"],
    }
    return {
        "messages": messages,
        "passes": passes,
        "steps_us": steps,
        "total_us": sum(steps.values()),
    }
