"""Target 12: the orders API (the public edge, ``shared.edge``): Cosmos DB requests and queue
sends per accepted request and per replay, against the floor; replays at no send; and the
latency of a place through the local host against ``consume_order``'s for the same message.

Requests and sends: each request is a real HTTP request (aiohttp) to the world's HTTP host
(``local.standins.http_host``), which invokes the app's HTTP function through Microsoft's
worker; the app's edge (composed by ``World.compose`` on the stand-in's counting transport)
reads and commits through ``CosmosDocumentStore`` and the real azure-cosmos client against the
local server's atomic batch, and sends through a real aio ``ServiceBusSender`` into the queue
model. Cosmos DB requests are counted at the azure-core transport by kind (``bench.transport``:
a point ``read``; a ``batch``, the edge's commits and its sent mark, a batch of one patch),
sends at the queue model (``QueueStats.sent``: every message the sender hands it, one the queue
would drop as a duplicate included; the bench's queue keeps no duplicate window,
``bench.standin``). One place, one amendment and one cancellation of one order, each counted
alone after a warm-up order (the SDK's metadata reads, the edge's composition); then, the clock
past the in-progress window (a client's retry after its timeout), ``replays`` repeats of each
with the same key and body. A replay must answer what the first answer said (status, body,
``ETag``, ``Location``) and send nothing: a replay that sends raises ``ReplaySent``, and the run
stops (a broken promise, not a figure to weigh).

The floor (docs/benchmarks.md, target 12): an accepted request is two writes and one send: the
atomic write of the request's identity and its message (with the order's head) before the send,
so that any retry finds them; the send; the mark after it, so that a replay answers without
sending and the record's expiry starts. A change also reads the head (its version is the
message's, its commit conditional on it): one read more. A replay: one point read, no send.

The optimistic place (an argued figure; the product is not changed): the product's own
``OrdersEdge`` over ``CommitFirstStore``, which answers the record's read before the commit
"absent" without a request, so the commit comes first and the record is read only after a
conflict (409): in this process, through the same adapter and client on the counting
transport, the queue sender the app's. The product's place is measured the same way beside it,
so that the two differ in that read alone.

Latency: ``places`` places one after another, each followed by ``consume_order`` handling its
message alone (the host's invocation through the worker, the function's settlement included,
timed by the host's ``on_delivery`` hook); the place from the request sent to the answer read
by the client; and a GET of the OpenAPI document, the host and the worker with no outside call.
Interleaved, so that all three see the same moments of a shared machine.

It owns the sequence, the counting and the timing, never the product's decisions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aiohttp
from idempotent_consumer import DocumentExists, DocumentStore, Write
from idempotent_consumer.cosmos import CosmosDocumentStore

from bench.standin import StandIn
from bench.stats import distribution
from bench.transport import METADATA, RequestSnapshot
from local.standins.broker import Delivery
from local.standins.http_host import FUNCTIONS_KEY_HEADER
from shared.adapters.http_in import FUNCTION_KEY_CLIENT
from shared.adapters.servicebus_out import ServiceBusOrderSender
from shared.edge import OrdersEdge
from shared.edge.requests import IN_PROGRESS_WINDOW, order_id_for, request_id

JSON = "application/json"
Counts = dict[str, float]  # reads, writes, sends (per request, or per replay on average)

# The floor (module docstring): reads, writes and sends per request.
FLOOR: dict[str, Counts] = {
    "place": {"reads": 0, "writes": 2, "sends": 1},
    "change": {"reads": 1, "writes": 2, "sends": 1},
    "replay": {"reads": 1, "writes": 0, "sends": 0},
}
# What shared.edge.core does: the record's read first (a change then the head's), one batch
# (record and head), the send, one batch (the mark); a replay the record's read alone.
EXPECTED: dict[str, Counts] = {
    "place": {"reads": 1, "writes": 2, "sends": 1},
    "amend": {"reads": 2, "writes": 2, "sends": 1},
    "cancel": {"reads": 2, "writes": 2, "sends": 1},
    "place replay": {"reads": 1, "writes": 0, "sends": 0},
    "amend replay": {"reads": 1, "writes": 0, "sends": 0},
    "cancel replay": {"reads": 1, "writes": 0, "sends": 0},
}
FLOOR_OF: dict[str, Counts] = {
    "place": FLOOR["place"],
    "amend": FLOOR["change"],
    "cancel": FLOOR["change"],
    "place replay": FLOOR["replay"],
    "amend replay": FLOOR["replay"],
    "cancel replay": FLOOR["replay"],
}
# In this process, the product's place and the optimistic one (commit first, the record read
# only after its conflict: a replay pays the refused batch).
IN_PROCESS_EXPECTED: dict[str, dict[str, Counts]] = {
    "product": {"place": EXPECTED["place"], "place replay": EXPECTED["place replay"]},
    "optimistic": {
        "place": {"reads": 0, "writes": 2, "sends": 1},
        "place replay": {"reads": 1, "writes": 1, "sends": 0},
    },
}
IN_PROCESS_CLIENT = "bench-in-process"
OPENAPI_ROUTE = "openapi.json"  # function_app's openapi function: anonymous, no outside call
_ACCEPTED = {"place": 201, "amend": 200, "cancel": 200}


class ReplaySent(AssertionError):
    """A replay (the same key and body again, its first answer given) sent a message."""


def counted(delta: RequestSnapshot, sends: int) -> Counts:
    """Reads (point reads, queries), writes (every other document request: creates, batches,
    patches, replaces) and sends."""
    reads = delta.counts.get("read", 0) + delta.counts.get("query", 0)
    return {"reads": reads, "writes": delta.documents - reads, "sends": sends}


def cost(counts: Mapping[str, float]) -> str:
    """``{"reads": 1, "writes": 2, "sends": 1}`` -> ``"1r+2w+1s"``."""
    return f"{counts['reads']:g}r+{counts['writes']:g}w+{counts['sends']:g}s"


def distance(counts: Mapping[str, float], floor: Mapping[str, float]) -> str:
    """What a path costs above its floor, e.g. ``"+1 read"``; ``"0"`` at the floor."""
    parts = []
    for name in ("reads", "writes", "sends"):
        extra = counts[name] - floor[name]
        if extra:
            parts.append(f"{extra:+g} {name[:-1] if abs(extra) == 1 else name}")
    return ", ".join(parts) or "0"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: Any
    elapsed_s: float = 0.0  # through HTTP: the request sent to the answer's body read

    def replayed_as(self) -> tuple[Any, ...]:
        """What a replay must repeat: status, body, the order's tag and place."""
        return (self.status, self.body, self.headers.get("ETag"), self.headers.get("Location"))


@dataclass(frozen=True)
class EdgeRequest:
    """One mutating request: its route under the host's prefix (the core's method for it in
    this process), its Idempotency-Key and body."""

    action: str  # place, amend, cancel
    path: str
    key: str
    body: dict[str, Any]


def _lines(quantity: int) -> list[dict[str, Any]]:
    """Ten lines, as target 1's orders (``bench.orders``)."""
    return [
        {"sku": f"SKU-{index:05d}", "quantity": quantity, "unitPriceMinor": 1250 + index}
        for index in range(10)
    ]


def lifecycle(prefix: str, client_id: str = FUNCTION_KEY_CLIENT) -> dict[str, EdgeRequest]:
    """A place under key ``{prefix}-place``, its order's amendment and its cancellation."""
    order_id = order_id_for(client_id, f"{prefix}-place")
    order = {"customerId": "cust-000042", "currency": "EUR"}
    return {
        "place": EdgeRequest("place", "orders", f"{prefix}-place", {**order, "lines": _lines(2)}),
        "amend": EdgeRequest(
            "amend",
            f"orders/{order_id}/amendments",
            f"{prefix}-amend",
            {**order, "lines": _lines(3)},
        ),
        "cancel": EdgeRequest(
            "cancel",
            f"orders/{order_id}/cancellations",
            f"{prefix}-cancel",
            {"reason": "customer request"},
        ),
    }


class EdgeClient:
    """A client of the world's HTTP host, authenticated with the host's function key (the
    edge's client id is then ``FUNCTION_KEY_CLIENT``)."""

    def __init__(self, session: aiohttp.ClientSession, standin: StandIn) -> None:
        self._session = session
        self._standin = standin

    async def post(self, request: EdgeRequest) -> Answer:
        world = self._standin.world
        headers = {
            FUNCTIONS_KEY_HEADER: world.function_key,
            "Idempotency-Key": f'"{request.key}"',  # an RFC 8941 String
            "Content-Type": JSON,
        }
        data = json.dumps(request.body).encode()
        started = time.perf_counter()
        async with self._session.post(
            world.http.function_url(request.path), data=data, headers=headers
        ) as response:
            text = await response.read()
            elapsed = time.perf_counter() - started
            body = json.loads(text) if text else None
            return Answer(response.status, dict(response.headers), body, elapsed)

    async def get(self, path: str) -> Answer:
        started = time.perf_counter()
        async with self._session.get(self._standin.world.http.function_url(path)) as response:
            text = await response.read()
            return Answer(
                response.status, dict(response.headers), text, time.perf_counter() - started
            )


Send = Callable[[EdgeRequest], Awaitable[Answer]]


async def _counted_call(
    standin: StandIn, send: Send, request: EdgeRequest
) -> tuple[Answer, RequestSnapshot, int]:
    before = standin.transport.snapshot()
    sent = standin.queue.stats.sent
    answer = await send(request)
    delta = standin.transport.snapshot().minus(before)
    return answer, delta, standin.queue.stats.sent - sent


async def replays_of(
    standin: StandIn, name: str, first: Answer, send: Send, request: EdgeRequest, times: int
) -> dict[str, Any]:
    """``times`` replays of one request: each must answer as ``first`` did and send nothing,
    ``ReplaySent`` the moment one sends. Their requests, summed and per replay."""
    before = standin.transport.snapshot()
    sent = standin.queue.stats.sent
    differing = 0
    for _ in range(times):
        answer = await send(request)
        if standin.queue.stats.sent != sent:
            raise ReplaySent(
                f"a replay of {name} sent {standin.queue.stats.sent - sent} message(s) to the "
                f"queue (answered {answer.status}; the first answer {first.status})"
            )
        differing += answer.replayed_as() != first.replayed_as()
    delta = standin.transport.snapshot().minus(before)
    total = counted(delta, standin.queue.stats.sent - sent)
    return {
        "replays": times,
        "total": total,
        "per_replay": {kind: value / times for kind, value in total.items()},
        "kinds": {kind: count / times for kind, count in delta.kinds().items()},
        "metadata": delta.counts.get(METADATA, 0),
        "differing_answers": differing,
    }


async def count_paths(
    standin: StandIn,
    send: Send,
    requests: Mapping[str, EdgeRequest],
    replays: int,
    expected: Mapping[str, Counts] = EXPECTED,
) -> dict[str, dict[str, Any]]:
    """Each request sent once, counted alone; then, the clock past the in-progress window (a
    client's retry after its timeout), ``replays`` replays of each. A row per request and per
    request's replays: counts (a replay's on average), kinds, the floor and the distance from
    it, and a verdict: the expected counts exactly, no metadata request, the accepted status,
    every replay answered as the first."""
    firsts: dict[str, Answer] = {}
    rows: dict[str, dict[str, Any]] = {}
    for name, request in requests.items():
        answer, delta, sends = await _counted_call(standin, send, request)
        firsts[name] = answer
        measured = counted(delta, sends)
        rows[name] = {
            **measured,
            "status": answer.status,
            "kinds": delta.kinds(),
            "expected": dict(expected[name]),
            "floor": FLOOR_OF[name],
            "distance": distance(measured, FLOOR_OF[name]),
            "ok": measured == expected[name]
            and delta.total == delta.documents
            and answer.status == _ACCEPTED[request.action],
        }
    standin.world.clock.advance(IN_PROGRESS_WINDOW + timedelta(seconds=1))
    for name, request in requests.items():
        replayed = await replays_of(standin, name, firsts[name], send, request, replays)
        row_name = f"{name} replay"
        per = replayed["per_replay"]
        rows[row_name] = {
            **per,
            "status": firsts[name].status,
            "kinds": replayed["kinds"],
            "replays": replays,
            "sends_total": replayed["total"]["sends"],
            "differing_answers": replayed["differing_answers"],
            "expected": dict(expected[row_name]),
            "floor": FLOOR_OF[row_name],
            "distance": distance(per, FLOOR_OF[row_name]),
            "ok": per == expected[row_name]
            and replayed["metadata"] == 0
            and replayed["differing_answers"] == 0,
        }
    return rows


class CommitFirstStore:
    """The optimistic place's store, over the app's adapter: a read before the commit answers
    "absent" without a request, so the commit comes first; after a commit refused as existing
    (a repeat's 409), the next read goes through. For places, one at a time: a change's read of
    the head would be skipped too."""

    def __init__(self, inner: DocumentStore) -> None:
        self.inner = inner
        self._conflicted = False

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        try:
            await self.inner.commit(partition_key, writes)
        except DocumentExists:
            self._conflicted = True
            raise

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        if not self._conflicted:
            return None
        self._conflicted = False
        return await self.inner.read(partition_key, document_id)


def in_process_send(edge: OrdersEdge) -> Send:
    """Requests straight to a core in this process (no HTTP), as the HTTP function calls it."""

    async def send(request: EdgeRequest) -> Answer:
        assert request.action == "place"  # CommitFirstStore's scope
        response = await edge.place(IN_PROCESS_CLIENT, request.key, request.body)
        return Answer(response.status, dict(response.headers), response.body)

    return send


async def count_in_process(standin: StandIn, run: str, replays: int) -> dict[str, Any]:
    """The product's place and the optimistic one, each a core in this process on the app's
    adapter over the requests container (the bench's client on the counting transport) and the
    app's queue sender."""
    world = standin.world
    requests = standin.client.get_database_client(
        standin.settings.cosmos_database
    ).get_container_client(world.requests.id)
    assert world.queue_sender is not None
    sender = ServiceBusOrderSender(world.queue_sender)
    stores: dict[str, DocumentStore] = {
        "product": CosmosDocumentStore(requests),
        "optimistic": CommitFirstStore(CosmosDocumentStore(requests)),
    }
    # The bench's client has not read this container yet: its metadata reads, here.
    await CosmosDocumentStore(requests).read("warmup", "warmup")
    results: dict[str, Any] = {}
    for variant, store in stores.items():
        edge = OrdersEdge(store, sender, world.clock)
        place = lifecycle(f"{run}-{variant}", IN_PROCESS_CLIENT)["place"]
        results[variant] = await count_paths(
            standin,
            in_process_send(edge),
            {"place": place},
            replays,
            IN_PROCESS_EXPECTED[variant],
        )
    return results


async def latency(
    standin: StandIn, client: EdgeClient, run: str, places: int, warmup: int = 5
) -> dict[str, Any]:
    """``places`` places through the host, each followed by ``consume_order`` handling its
    message alone; seconds per place (the client's) and per invocation (the host's). Beside
    them, the front alone: a GET of the API's OpenAPI document, an invocation through the host
    and the worker that calls nothing outside (its answer about 25 KB)."""
    await standin.run_until_idle()  # what the counted paths left on the queue
    host = standin.hosts["consumer"]
    place_s: list[float] = []
    consume_s: list[float] = []
    front_s: list[float] = []

    async def timed(_delivery: Delivery, invoke: Callable[[], Awaitable[None]]) -> None:
        started = time.perf_counter()
        await invoke()
        consume_s.append(time.perf_counter() - started)

    completed = standin.queue.stats.completed
    for index in range(warmup + places):
        answer = await client.post(lifecycle(f"{run}-latency-{index}")["place"])
        if answer.status != 201:
            raise RuntimeError(f"a place answered {answer.status}: {answer.body}")
        place_s.append(answer.elapsed_s)
        failed = host.stats.failed_invocations
        await host.run_until_idle(on_delivery=timed)
        if host.stats.failed_invocations != failed or len(consume_s) != len(place_s):
            raise RuntimeError(f"consume_order: {host.stats.errors[-3:]}")
        front = await client.get(OPENAPI_ROUTE)
        if front.status != 200:
            raise RuntimeError(f"GET {OPENAPI_ROUTE} answered {front.status}")
        front_s.append(front.elapsed_s)
    if standin.queue.stats.completed - completed != warmup + places:
        raise RuntimeError("consume_order did not complete every placed order's message")
    place_ms = distribution([s * 1000 for s in place_s[warmup:]])
    consume_ms = distribution([s * 1000 for s in consume_s[warmup:]])
    front_ms = distribution([s * 1000 for s in front_s[warmup:]])
    return {
        "places": places,
        "warmup": warmup,
        "place_ms": place_ms,
        "consume_ms": consume_ms,
        "front_ms": front_ms,
        "ratio_p50": place_ms["p50"] / consume_ms["p50"],
        "ratio_p99": place_ms["p99"] / consume_ms["p99"],
    }


async def _record_bytes(standin: StandIn, key: str) -> int:
    """A place's request record as stored (compact JSON, system fields included), read through
    the world's own client, not the counted one: what a replay's point read loads (Cosmos DB
    charges a point read by the item's size, 1 RU for 1 KB: learn.microsoft.com/cosmos-db/
    request-units)."""
    order_id = order_id_for(FUNCTION_KEY_CLIENT, key)
    item = await standin.world.requests.read_item(
        request_id(FUNCTION_KEY_CLIENT, key), partition_key=order_id
    )
    return len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())


async def measure(standin: StandIn, *, replays: int = 100, places: int = 300) -> dict[str, Any]:
    """Target 12 (module docstring)."""
    run = f"bench-{time.time_ns():x}"  # keys of this run: the requests container may be reused
    async with aiohttp.ClientSession() as session:
        client = EdgeClient(session, standin)
        for request in lifecycle(f"{run}-warmup").values():  # composition, SDK metadata reads
            await client.post(request)
        paths = await count_paths(standin, client.post, lifecycle(run), replays)
        record_bytes = await _record_bytes(standin, f"{run}-place")
        in_process = await count_in_process(standin, run, replays)
        timed = await latency(standin, client, run, places)
    return {
        "floor": FLOOR,
        "replays": replays,
        "paths": paths,
        "in_process": in_process,
        "latency": timed,
        "record_bytes": record_bytes,
        "replay_sends": sum(row.get("sends_total", 0) for row in paths.values()),
        "ok": all(row["ok"] for row in paths.values())
        and all(row["ok"] for rows in in_process.values() for row in rows.values()),
    }
