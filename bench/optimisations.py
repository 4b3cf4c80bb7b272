"""What the design choices are worth, measured here rather than asserted.

Micro-benchmarks (``timeit``, best of 5, µs per call) of the consumer's CPU choices, each against
its alternative: the contract before this round of CPU work (``bench.baseline_contract``: pydantic
models, ``model_dump``, a ``json.dumps`` fingerprint) against the current one (TypedDicts through
one ``TypeAdapter``, a ``pydantic_core.to_json`` fingerprint with the same bytes), the in-memory
store's copy, telemetry instruments, the Cosmos client's lifetime, and how settlement leaves the
event loop (``bench.settlement``). ``decide`` is also measured per message with the previous
contract and store patched in (this process only), after checking both give the same fields and
fingerprint.
"""

from __future__ import annotations

import copy
import json
import timeit
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pydantic_core
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from pydantic_core import SchemaValidator

import shared.core as core
import tests.memory_store as memory_store
from bench import baseline_contract, settlement
from bench.cpu import _timed_async, _us, incoming
from bench.orders import order_bytes
from shared import contract
from shared.contract import ValidOrder, fingerprint_v1, normalise_timestamp, parse_order
from shared.core import IncomingMessage, decide
from shared.telemetry import ConsumerTelemetry
from tests.memory_store import InMemoryOrderStore


def per_call_us(call: Callable[[], Any], number: int = 2_000) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


def _deepcopy_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """How ``InMemoryOrderStore`` copied documents before: ``copy.deepcopy``."""
    return copy.deepcopy(dict(document))


async def _decide_p(
    messages: Sequence[IncomingMessage],
    parse: Callable[..., ValidOrder],
    copy_document: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``decide`` per message against a fresh ``InMemoryOrderStore``, with ``parse`` in place of
    ``parse_order`` and, if given, ``copy_document`` in place of the store's copy."""
    store = InMemoryOrderStore()
    with (
        mock.patch.object(core, "parse_order", parse),
        mock.patch.object(memory_store, "_copy", copy_document or memory_store._copy),
    ):

        async def run(message: IncomingMessage) -> None:
            await decide(message, store)

        await _timed_async(messages[:300], run)
        return _us(await _timed_async(messages[300:], run))


async def measure(messages: int = 5_000) -> dict[str, Any]:
    body = order_bytes("opt-1")
    document = pydantic_core.from_json(body)
    valid = parse_order(body, "opt-1")
    before = baseline_contract.parse_order(body, "opt-1")
    equivalent = before.fields == valid.fields and before.request_hash == valid.request_hash
    docs = core.build_documents(
        valid, IncomingMessage("opt-1", body), outbox_enabled=True, accepted_at=datetime.now(UTC)
    )
    model = baseline_contract.OrderPlaced
    adapter = contract._ORDER_PLACED
    placed_at = document["placedAt"]

    micro: dict[str, dict[str, float]] = {
        "single JSON parse": {
            "pydantic_core.from_json + validate_python (current)": per_call_us(
                lambda: adapter.validate_python(pydantic_core.from_json(body))
            ),
            "json.loads + validate_python": per_call_us(
                lambda: adapter.validate_python(json.loads(body))
            ),
            "json.loads (version check) + validate_json (two parses)": per_call_us(
                lambda: (json.loads(body), adapter.validate_json(body))
            ),
        },
        "precompiled validation": {
            # The same call as "TypedDict TypeAdapter, plain dicts (current)" below: measured once.
            "TypeAdapter built once at import (current)": (
                validate_us := per_call_us(lambda: adapter.validate_python(document))
            ),
            "validator rebuilt per message": per_call_us(
                lambda: SchemaValidator(adapter.core_schema).validate_python(document), number=200
            ),
        },
        "validation result": {
            "BaseModel + model_dump (before)": per_call_us(
                lambda: model.model_validate(document).canonical_fields()
            ),
            "TypedDict TypeAdapter, plain dicts (current)": validate_us,
        },
        "placedAt normalisation": {
            "strftime, bounds computed per call (before)": per_call_us(
                lambda: baseline_contract.normalise_timestamp(placed_at)
            ),
            "isoformat, bounds precomputed (current)": per_call_us(
                lambda: normalise_timestamp(placed_at)
            ),
        },
        "fingerprint (same bytes)": {
            "json.dumps sort_keys (before)": per_call_us(
                lambda: baseline_contract.fingerprint_v1(valid.fields)
            ),
            "pydantic_core.to_json, keys sorted by construction (current)": per_call_us(
                lambda: fingerprint_v1(valid.fields)
            ),
        },
        "parse_order": {
            "before": per_call_us(lambda: baseline_contract.parse_order(body, "opt-1")),
            "current": per_call_us(lambda: parse_order(body, "opt-1")),
        },
        "in-memory store copy (2 documents)": {
            "copy.deepcopy (before)": per_call_us(lambda: [copy.deepcopy(dict(d)) for d in docs]),
            "pydantic_core JSON round trip (current)": per_call_us(
                lambda: [memory_store._copy(d) for d in docs]
            ),
        },
        "telemetry instruments": _telemetry_costs(valid.order_id, body),
    }

    prefix = uuid.uuid4().hex[:8]
    ids = [f"opt-{prefix}-{index}" for index in range(messages + 300)]
    batch = [incoming(order_id, order_bytes(order_id)) for order_id in ids]
    decide_variants = {
        "before (BaseModel contract, deepcopy store)": await _decide_p(
            batch, baseline_contract.parse_order, _deepcopy_document
        ),
        "current contract, deepcopy store": await _decide_p(batch, parse_order, _deepcopy_document),
        "current (InMemoryOrderStore)": await _decide_p(batch, parse_order),
    }
    return {
        "candidates_equivalent_on_sample": equivalent,
        "micro_us": micro,
        "decide_us": decide_variants,
        "settlement": await settlement.measure(),
    }


def _telemetry_costs(order_id: str, body: bytes) -> dict[str, float]:
    message = IncomingMessage(order_id, body, "corr", 1)
    decision = core.Decision(core.Outcome.PROCESSED, order_id=order_id)
    sdk_tracer, sdk_meter = TracerProvider(), MeterProvider()
    once_api = ConsumerTelemetry("orders")
    once_sdk = ConsumerTelemetry("orders", tracer_provider=sdk_tracer, meter_provider=sdk_meter)

    def record(telemetry: ConsumerTelemetry) -> None:
        with telemetry.processing(message) as span:
            telemetry.record_outcome(span, message, decision, settled=True, duration_s=0.001)

    costs = {
        "instruments once, API no-op (current)": per_call_us(lambda: record(once_api)),
        "instruments per message, API no-op": per_call_us(
            lambda: record(ConsumerTelemetry("orders"))
        ),
        "instruments once, SDK providers": per_call_us(lambda: record(once_sdk), number=500),
        "instruments per message, SDK providers": per_call_us(
            lambda: record(
                ConsumerTelemetry("orders", tracer_provider=sdk_tracer, meter_provider=sdk_meter)
            ),
            number=500,
        ),
    }
    sdk_tracer.shutdown()
    sdk_meter.shutdown()
    return costs


async def client_per_message(standin: Any, messages: int = 30) -> dict[str, Any]:
    """One client per process (current) against a new client per message: requests and time."""
    import asyncio
    import time

    from bench.orders import outgoing
    from bench.throughput import _documents
    from bench.transport import CountingTransport
    from shared.cosmos_store import create_client

    documents = _documents(outgoing(f"cpm-{uuid.uuid4().hex[:6]}", messages * 2), False)
    database, container_name = standin.settings.cosmos_database, standin.settings.cosmos_container

    async def write(container: Any, docs: list[dict[str, Any]]) -> None:
        await container.create_item(dict(docs[0]))

    shared_before = standin.transport.snapshot()
    start = time.perf_counter()
    for docs in documents[:messages]:
        await write(standin.container, docs)
    shared_s = (time.perf_counter() - start) / messages
    shared_requests = standin.transport.snapshot().minus(shared_before).total / messages

    total_requests = 0
    start = time.perf_counter()
    for docs in documents[messages:]:
        transport = CountingTransport(connection_verify=False)
        client = create_client(standin.settings, transport=transport)
        container = client.get_database_client(database).get_container_client(container_name)
        await write(container, docs)
        await client.close()
        total_requests += transport.snapshot().total
    fresh_s = (time.perf_counter() - start) / messages
    await asyncio.sleep(0)
    return {
        "one client per process": {"ms_per_message": shared_s * 1000, "requests": shared_requests},
        "new client per message": {
            "ms_per_message": fresh_s * 1000,
            "requests": total_requests / messages,
        },
    }
