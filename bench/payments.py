"""Target 10: the payment capture consumer (``shared.payments`` on ``shared.kit.external``):
Cosmos DB requests and provider calls per event for each path, and the kit's CPU per event.

Requests: each path's event is decided by the kit (``shared.kit.external.decide_call``) through
the app's document store adapter (``CosmosDocumentStore``) and the production client on the
bench's counting transport, against the local server's atomic transactional batch, in a
``payments`` container of its own (``/orderId``); the provider is the stand-in
(``local.standins.payment_provider``) through the app's adapter (``HttpPaymentProvider``,
aiohttp), its calls counted by the stand-in (``requests_received``): a capture or refund is a
POST, a lookup by reference a GET. Not through the function: ``capture_payment`` is wired by
another change; the requests are the adapter's either way.

The floor the issue states is one call and two writes: the in-progress record, then the
completed record with the marker (one batch). An acceptance's first delivery is at it (its
in-progress record created unread: the create is the check that no state exists); a change is
one read more, the read of the payment's state: what is captured so far decides the call
(capture or refund, and how much), and its revision conditions the in-progress record.
docs/benchmarks.md argues why that read cannot go. A resumed call counts the redelivery alone;
the stopped delivery's requests are kept beside it (``stopped``): a stop before the completed
record is made at the transport (the completing batch answered 207, throttled), a call that
never reached the provider by the stand-in's 503 before committing.

CPU: ``decide_call`` for new ``OrderAccepted`` events over the kit's in-memory store in its
benchmark mode (no copies, no request log) and a provider answering at once in this thread
(``_AnsweringProvider``: the port, no I/O), CPU time of this thread per event; beside it the
order consumer's ``decide`` per new order measured the same way in the same run (target 2's
figure, ``bench.cpu.order_decide_cpu_us``), and the ratio to the SDK's CPU for the path's two
floor writes (``bench.cpu.create_item_cpu_us``).

It owns the sequence and the counting, never the product's decisions.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from idempotent_consumer import SYSTEM_CLOCK, IncomingMessage, decide_call
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore

from bench import cpu
from bench.transport import METADATA, CountingTransport
from local.standins.broker import ManualClock
from local.standins.cosmos_server import ensure_container
from local.standins.faults import WRITES, FaultKind, FaultRule
from local.standins.payment_provider import (
    Fault,
    PaymentProviderStandIn,
)
from local.standins.payment_provider import (
    FaultRule as ProviderFaultRule,
)
from shared.adapters.payment_provider import (
    CAPTURES_PATH,
    OPERATIONS_PATH,
    REFUNDS_PATH,
    HttpPaymentProvider,
)
from shared.payments.consumer import payment_capture
from shared.payments.provider import (
    Lookup,
    LookupStatus,
    PaymentRequest,
    ProviderResult,
    ResultStatus,
)

TARGET_SHARE = 0.10  # the kit's CPU per event ≤ 10% of the SDK's for its two floor writes
FLOOR_WRITES = 2
FLOOR_CALLS = 1
MARKER_TTL_S = 600
CALL_TIMEOUT_S = 2.0  # the provider client's timeout, and so the call's deadline
PROCESSING_BOUND_S = 0.5  # the provider's stated processing bound (without keys)
CLOCK_SKEW_S = 0.5
NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
CALLS = {
    f"POST {CAPTURES_PATH}": "capture",
    f"POST {REFUNDS_PATH}": "refund",
    f"GET {OPERATIONS_PATH}": "lookup",
}


def payment_event(order_id: str, version: int, total_minor: int | None) -> IncomingMessage:
    """Version ``version`` of an order as the relay publishes it (docs/events.md); ``None`` is
    its cancellation."""
    if total_minor is None:
        event_type = "OrderCancelled"
        payload: dict[str, Any] = {"orderId": order_id, "orderVersion": version}
    else:
        event_type = "OrderAccepted" if version == 1 else "OrderAmended"
        payload = {
            "orderId": order_id,
            "orderVersion": version,
            "customerId": "customer-1",
            "currency": "EUR",
            "totalMinor": total_minor,
        }
    event_id = f"{order_id}:v{version}"
    body = {
        "schemaVersion": 1,
        "eventId": event_id,
        "eventType": event_type,
        "occurredAt": "2026-12-01T10:00:00.000000Z",
        "payload": payload,
    }
    return IncomingMessage(event_id, json.dumps(body).encode(), subject=event_type)


@dataclass(frozen=True)
class Path:
    """One path: its event, how the delivery before it stopped (if it did), and what it must
    cost and end in."""

    sent: IncomingMessage
    outcome: str
    reads: int
    writes: int
    calls: dict[str, int]  # capture, refund, lookup
    honours_keys: bool = True
    # "answered": the call answered, the completing batch failed; "unsent": the provider
    # answered 503 before committing. The row counts the redelivery that follows.
    stop: str | None = None

    @property
    def expected(self) -> dict[str, int]:
        return {"reads": self.reads, "writes": self.writes, **self.calls}


def paths(order_id: str) -> dict[str, Path]:
    """Delivered in this order: each finds what the earlier ones of its order left."""
    a, b = order_id, f"{order_id}-b"
    resumed = {
        f"resumed after the answer (keys {mode})": (f"{order_id}-r{n}", keys)
        for n, (mode, keys) in enumerate((("honoured", True), ("ignored", False)))
    }
    unsent = {
        f"resumed unsent call (keys {mode})": (f"{order_id}-u{n}", keys)
        for n, (mode, keys) in enumerate((("honoured", True), ("ignored", False)))
    }
    found = {"lookup": 1}
    return {
        # The floor: the in-progress record created unread (a first version's first delivery:
        # the create is the check that no state exists), the call, the completed batch.
        "accepted": Path(payment_event(a, 1, 4200), "processed", 0, 2, {"capture": 1}),
        # The state read, the in-progress record patched from its revision, the call, the batch.
        "amendment capture": Path(payment_event(a, 2, 5000), "processed", 1, 2, {"capture": 1}),
        "amendment refund": Path(payment_event(a, 3, 1000), "processed", 1, 2, {"refund": 1}),
        "cancellation refund": Path(payment_event(a, 4, None), "processed", 1, 2, {"refund": 1}),
        # The state at version 4: the marker's create refused, the marker read: no call.
        "duplicate": Path(payment_event(a, 4, None), "duplicate", 2, 1, {}),
        # Nothing captured, nothing to call: the state created at its version with the marker.
        "cancellation before capture": Path(payment_event(b, 2, None), "processed", 1, 1, {}),
        # The acceptance after it: its unread create refused (what the floor costs a late
        # acceptance), the state read, its marker alone.
        "stale": Path(payment_event(b, 1, 4200), "stale", 1, 2, {}),
        # The call answered, the completed batch lost: the redelivery reads the pending call,
        # the lookup finds its result, the completed batch. No second call, either mode.
        **{
            name: Path(payment_event(o, 1, 4200), "processed", 1, 1, found, keys, "answered")
            for name, (o, keys) in resumed.items()
        },
        # The call never reached the provider's processing: the lookup finds nothing. Keys
        # honoured: the pending call claimed (one more write: its recorder can no longer
        # withdraw it as unsent), then the call again with the same key. Ignored: past its
        # deadline, the new attempt claimed first (one more write), then the call.
        **{
            name: Path(
                payment_event(o, 1, 4200),
                "processed",
                1,
                2,
                {"lookup": 1, "capture": 1},
                keys,
                "unsent",
            )
            for name, (o, keys) in unsent.items()
        },
    }


EXPECTED = {name: path.expected for name, path in paths("expected").items()}


def _counted(kinds: Counter[str], calls: Counter[str]) -> dict[str, int]:
    """One delivery's requests as a path's expectation names them."""
    reads = kinds["read"]
    writes = sum(count for kind, count in kinds.items() if kind not in ("read", METADATA))
    named = {CALLS.get(request, request): count for request, count in calls.items() if count}
    return {"reads": reads, "writes": writes, **named}


@contextmanager
def _delivery(
    transport: CountingTransport, provider: PaymentProviderStandIn
) -> Iterator[dict[str, Any]]:
    """The Cosmos requests (by kind) and provider calls of what runs inside."""
    seen: dict[str, Any] = {}
    cosmos_before = transport.snapshot()
    calls_before = provider.requests_received
    yield seen
    seen["kinds"] = transport.snapshot().minus(cosmos_before).kinds()
    seen["kinds"].pop(METADATA, None)
    seen["calls"] = provider.requests_received - calls_before


async def count_paths(client: Any, database: str, transport: CountingTransport) -> dict[str, Any]:
    """Each path's event decided through the SDK and the provider's HTTP API; what it sent."""
    name = f"payments-{uuid.uuid4().hex[:8]}"
    container = await ensure_container(client, database, name, "/orderId")
    outcomes: dict[str, dict[str, Any]] = {}
    # Each order's highest version seen and the total it asks (0: cancelled).
    highest: dict[str, tuple[int, int]] = {}
    try:
        store = CosmosDocumentStore(container)
        clock = ManualClock(NOW)
        with PaymentProviderStandIn() as provider:
            clients = {
                keys: HttpPaymentProvider(
                    provider.url,
                    provider.api_key,
                    honours_idempotency_keys=keys,
                    timeout_s=CALL_TIMEOUT_S,
                )
                for keys in (True, False)
            }
            definitions = {
                keys: payment_capture(
                    http,
                    call_deadline_s=CALL_TIMEOUT_S,
                    processing_bound_s=PROCESSING_BOUND_S,
                    clock_skew_s=CLOCK_SKEW_S,
                )
                for keys, http in clients.items()
            }
            try:
                for path_name, path in paths(f"pay-{uuid.uuid4().hex[:6]}").items():
                    provider.honour_keys = path.honours_keys
                    payload = json.loads(path.sent.body)["payload"]
                    order_id, version = payload["orderId"], payload["orderVersion"]
                    if version > highest.get(order_id, (0, 0))[0]:
                        highest[order_id] = (version, payload.get("totalMinor", 0))
                    definition = definitions[path.honours_keys]
                    stopped: dict[str, Any] | None = None
                    if path.stop is not None:
                        if path.stop == "answered":
                            transport.add(
                                FaultRule(
                                    FaultKind.BATCH_OPERATION,
                                    **WRITES,
                                    batches_only=True,
                                    status=429,
                                    failing_index=-1,
                                    retry_after_ms=10,
                                )
                            )
                        else:
                            provider.inject(
                                ProviderFaultRule(Fault.ERROR_BEFORE_COMMIT, status=503)
                            )
                        clock.advance(timedelta(seconds=1))
                        with _delivery(transport, provider) as first:
                            failed = await decide_call(
                                definition, path.sent, store, marker_ttl_s=MARKER_TTL_S, clock=clock
                            )
                        transport.clear()
                        provider.clear_faults()
                        stopped = {
                            "outcome": failed.outcome.value,
                            "counted": _counted(Counter(first["kinds"]), first["calls"]),
                        }
                    # Past the attempt's window, the provider's processing bound and the skew
                    # margin: a provider that ignores keys may be called again.
                    clock.advance(timedelta(seconds=2 * CALL_TIMEOUT_S + PROCESSING_BOUND_S + 1))
                    sent = path.sent if stopped is None else replace(path.sent, delivery_count=2)
                    with _delivery(transport, provider) as seen:
                        decision = await decide_call(
                            definition, sent, store, marker_ttl_s=MARKER_TTL_S, clock=clock
                        )
                    counted = _counted(Counter(seen["kinds"]), seen["calls"])
                    outcomes[path_name] = {
                        "message_type": path.sent.subject,
                        "keys": "honoured" if path.honours_keys else "ignored",
                        "outcome": decision.outcome.value,
                        "counted": counted,
                        "expected": path.expected,
                        "kinds": seen["kinds"],
                        "stopped": stopped,
                        "ok": counted == path.expected and decision.outcome.value == path.outcome,
                    }
                ledger = {
                    order: provider.net_captured(order)
                    for order in sorted({entry.order_id for entry in provider.ledger})
                }
            finally:
                for http in clients.values():
                    await http.close()
    finally:
        await client.get_database_client(database).delete_container(name)
    # The referee: the provider holds for every order what its highest version asks.
    expected_ledger = {
        order: total for order, (_, total) in highest.items() if total or order in ledger
    }
    return {
        "outcomes": outcomes,
        "ledger": ledger,
        "ledger_ok": ledger == expected_ledger,
        "ok": all(o["ok"] for o in outcomes.values()) and ledger == expected_ledger,
    }


class _AnsweringProvider:
    """The provider port answering at once in this thread (no I/O): so that only the kit and
    the payment effect are measured. Every capture and refund succeeds; nothing is looked up."""

    honours_idempotency_keys = True

    async def perform(self, request: PaymentRequest) -> ProviderResult:
        return ProviderResult(
            ResultStatus.SUCCEEDED, request.reference, "op", request.amount_minor, ""
        )

    async def lookup(self, reference: str) -> Lookup:
        return Lookup(LookupStatus.NOT_FOUND)


async def kit_cpu(events: int) -> dict[str, Any]:
    """The kit's CPU per new ``OrderAccepted`` over the in-memory store, the call answered at
    once."""
    definition = payment_capture(_AnsweringProvider(), call_deadline_s=CALL_TIMEOUT_S)
    store = InMemoryDocumentStore(keep=0)
    warmup = max(1, min(500, events // 10))
    prefix = uuid.uuid4().hex[:8]
    incoming = [payment_event(f"cpu-{prefix}-{n}", 1, 1000 + n) for n in range(warmup + events)]
    return await cpu.decide_cpu_us(
        # The production clock: the kit reads it where each moment matters.
        lambda message: decide_call(
            definition, message, store, marker_ttl_s=MARKER_TTL_S, clock=SYSTEM_CLOCK
        ),
        incoming,
        warmup,
    )


async def measure(
    client: Any,
    database: str,
    container: Any,
    transport: CountingTransport,
    *,
    events: int,
    creates: int,
) -> dict[str, Any]:
    """``client``: the bench's production client on ``transport``; ``container``: the app's
    orders container (the SDK's creates of target 2's documents)."""
    requests = await count_paths(client, database, transport)
    decide_us = await kit_cpu(events)
    order_decide_us = await cpu.order_decide_cpu_us(events)
    create_us = await cpu.create_item_cpu_us(container, creates)
    share = decide_us["mean"] / (create_us * FLOOR_WRITES)
    return {
        "requests": requests,
        "floor": {"writes": FLOOR_WRITES, "calls": FLOOR_CALLS},
        "events": events,
        "decide_cpu_us": decide_us,
        "order_decide_cpu_us": order_decide_us,
        "creates": creates,
        "create_item_cpu_us": create_us,
        "share": share,
        "target_share": TARGET_SHARE,
        "ok": requests["ok"] and share <= TARGET_SHARE,
    }
