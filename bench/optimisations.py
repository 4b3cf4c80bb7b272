"""What the design choices are worth, measured here rather than asserted.

Micro-benchmarks (``timeit``, best of 5, µs per call) of the consumer's CPU choices, each against
its alternative, plus two candidates that are NOT in the product (proposed changes to
``shared/contract.py`` and ``local/memory_store.py``): ``decide`` is measured with them patched in,
in this process only, after checking they give the same fields and fingerprint.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import timeit
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import pydantic_core
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, TypeAdapter, with_config
from pydantic_core import SchemaValidator
from typing_extensions import TypedDict

import shared.core as core
from bench.cpu import _timed_async, _us, incoming
from bench.orders import order_bytes
from local.memory_store import InMemoryOrderStore
from shared.contract import (
    CONTRACT_FIELDS,
    MAX_BODY_BYTES,
    SCHEMA_VERSION,
    DeadletterReason,
    InvalidMessage,
    OrderPlaced,
    ValidOrder,
    fingerprint_v1,
    normalise_timestamp,
    parse_order,
)
from shared.core import IncomingMessage, decide
from shared.errors import OrderAlreadyExists
from shared.telemetry import ConsumerTelemetry


def per_call_us(call: Callable[[], Any], number: int = 2_000) -> float:
    return min(timeit.repeat(call, number=number, repeat=5)) / number * 1e6


# --- candidate 1: validate into plain dicts (TypedDict), no model objects, no model_dump -------


@with_config(ConfigDict(strict=True, extra="ignore"))
class _Line(TypedDict):
    sku: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    quantity: Annotated[int, Field(ge=1, le=10_000)]
    unitPriceMinor: Annotated[int, Field(ge=0, le=1_000_000_000)]


@with_config(ConfigDict(strict=True, extra="ignore"))
class _Order(TypedDict):
    schemaVersion: int
    orderId: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]
    customerId: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    placedAt: Annotated[str, AfterValidator(normalise_timestamp)]
    lines: Annotated[list[_Line], Field(min_length=1, max_length=100)]


_ORDER_ADAPTER: TypeAdapter[_Order] = TypeAdapter(_Order)


def fingerprint_to_json(fields: Mapping[str, Any]) -> str:
    """Candidate 2: the same bytes as ``fingerprint_v1`` (keys sorted by construction, compact,
    UTF-8 unescaped) serialised by pydantic-core instead of the json module."""
    canonical = {name: fields[name] for name in sorted(CONTRACT_FIELDS)}
    canonical["lines"] = [
        {"quantity": line["quantity"], "sku": line["sku"], "unitPriceMinor": line["unitPriceMinor"]}
        for line in fields["lines"]
    ]
    return hashlib.sha256(pydantic_core.to_json(canonical)).hexdigest()


@dataclass(frozen=True, slots=True)
class _LeanTotals:
    fields: dict[str, Any]

    @property
    def total_minor(self) -> int:
        return sum(line["quantity"] * line["unitPriceMinor"] for line in self.fields["lines"])

    @property
    def orderId(self) -> str:  # noqa: N802 - what ValidOrder.order_id reads
        return str(self.fields["orderId"])


def lean_parse_order(body: bytes, message_id: str | None) -> ValidOrder:
    """``parse_order`` with candidates 1 and 2; same checks, same order, same result."""
    if not message_id:
        raise InvalidMessage(DeadletterReason.MISSING_MESSAGE_ID, "the message has no MessageId")
    if len(body) > MAX_BODY_BYTES:
        raise InvalidMessage(DeadletterReason.PAYLOAD_TOO_LARGE, f"{len(body)} bytes")
    try:
        document = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, "not JSON") from None
    if not isinstance(document, dict):
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, "not an object")
    version = document.get("schemaVersion")
    if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
        raise InvalidMessage(DeadletterReason.UNSUPPORTED_SCHEMA_VERSION, str(version))
    try:
        fields = dict(_ORDER_ADAPTER.validate_python(document))
    except pydantic_core.ValidationError as error:
        raise InvalidMessage(DeadletterReason.INVALID_PAYLOAD, str(error)[:200]) from None
    if fields["orderId"] != message_id:
        raise InvalidMessage(DeadletterReason.MESSAGE_ID_MISMATCH, "differs")
    totals: Any = _LeanTotals(fields)
    return ValidOrder(order=totals, fields=fields, request_hash=fingerprint_to_json(fields))


class JsonCopyStore(InMemoryOrderStore):
    """Candidate 3: ``InMemoryOrderStore`` copying through JSON (as the SDK serialises a
    document) instead of ``copy.deepcopy``."""

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        self.requests.append("create" if len(documents) == 1 else "batch")
        keys = [(document["orderId"], document["id"]) for document in documents]
        if any(key in self.documents for key in keys):
            raise OrderAlreadyExists(keys[0][0])
        for key, document in zip(keys, documents, strict=True):
            self.documents[key] = pydantic_core.from_json(pydantic_core.to_json(document))

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        self.requests.append("read")
        document = self.documents.get((order_id, order_id))
        return pydantic_core.from_json(pydantic_core.to_json(document)) if document else None


async def _decide_p(
    messages: Sequence[IncomingMessage], store: Any, parse: Callable[..., ValidOrder]
) -> dict[str, Any]:
    original = getattr(core, "parse_order")  # noqa: B009 - patched in this process only
    setattr(core, "parse_order", parse)  # noqa: B010
    try:

        async def run(message: IncomingMessage) -> None:
            await decide(message, store)

        await _timed_async(messages[:300], run)
        return _us(await _timed_async(messages[300:], run))
    finally:
        setattr(core, "parse_order", original)  # noqa: B010


async def measure(messages: int = 5_000) -> dict[str, Any]:
    body = order_bytes("opt-1")
    document = pydantic_core.from_json(body)
    valid = parse_order(body, "opt-1")
    order = OrderPlaced.model_validate(document)
    lean = lean_parse_order(body, "opt-1")
    equivalent = lean.fields == valid.fields and lean.request_hash == valid.request_hash
    docs = core.build_documents(
        valid, IncomingMessage("opt-1", body), outbox_enabled=True, accepted_at=datetime.now(UTC)
    )
    schema = OrderPlaced.__pydantic_core_schema__

    micro: dict[str, dict[str, float]] = {
        "single JSON parse": {
            "pydantic_core.from_json + model_validate (current)": per_call_us(
                lambda: OrderPlaced.model_validate(pydantic_core.from_json(body))
            ),
            "json.loads + model_validate": per_call_us(
                lambda: OrderPlaced.model_validate(json.loads(body))
            ),
            "json.loads (version check) + model_validate_json (two parses)": per_call_us(
                lambda: (json.loads(body), OrderPlaced.model_validate_json(body))
            ),
        },
        "precompiled validation": {
            "model compiled once at import (current)": per_call_us(
                lambda: OrderPlaced.model_validate(document)
            ),
            "validator rebuilt per message": per_call_us(
                lambda: SchemaValidator(schema).validate_python(document), number=200
            ),
        },
        "validation result (candidate 1)": {
            "BaseModel + model_dump (current)": per_call_us(
                lambda: OrderPlaced.model_validate(document).canonical_fields()
            ),
            "TypedDict TypeAdapter, plain dicts": per_call_us(
                lambda: _ORDER_ADAPTER.validate_python(document)
            ),
        },
        "fingerprint (candidate 2)": {
            "json.dumps sort_keys (current)": per_call_us(lambda: fingerprint_v1(valid.fields)),
            "pydantic_core.to_json, keys sorted by construction": per_call_us(
                lambda: fingerprint_to_json(valid.fields)
            ),
        },
        "parse_order": {
            "current": per_call_us(lambda: parse_order(body, "opt-1")),
            "candidates 1+2": per_call_us(lambda: lean_parse_order(body, "opt-1")),
        },
        "in-memory store copy (candidate 3)": {
            "copy.deepcopy (current InMemoryOrderStore)": per_call_us(
                lambda: [copy.deepcopy(dict(d)) for d in docs]
            ),
            "pydantic_core JSON round trip": per_call_us(
                lambda: [pydantic_core.from_json(pydantic_core.to_json(d)) for d in docs]
            ),
        },
        "telemetry instruments": _telemetry_costs(order.orderId, body),
    }

    prefix = uuid.uuid4().hex[:8]
    ids = [f"opt-{prefix}-{index}" for index in range(messages + 300)]
    batch = [incoming(order_id, order_bytes(order_id)) for order_id in ids]
    decide_variants = {
        "current (InMemoryOrderStore)": await _decide_p(batch, InMemoryOrderStore(), parse_order),
        "candidate 3 (JSON-copy store)": await _decide_p(batch, JsonCopyStore(), parse_order),
        "candidates 1+2+3": await _decide_p(batch, JsonCopyStore(), lean_parse_order),
    }
    return {
        "candidates_equivalent_on_sample": equivalent,
        "micro_us": micro,
        "decide_us": decide_variants,
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
    import time

    from bench.throughput import _documents, _messages
    from bench.transport import CountingTransport
    from shared.cosmos_store import create_client

    documents = _documents(_messages(f"cpm-{uuid.uuid4().hex[:6]}", messages * 2), False)
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
