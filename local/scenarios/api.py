"""The orders API in ``make demo`` and ``make chaos``: a seeded client (aiohttp) places, amends and
cancels orders through the world's HTTP host (``POST /api/orders``, ``.../amendments``,
``.../cancellations``, the function key in ``x-functions-key``), each intent under an
Idempotency-Key of its own (draft-ietf-httpapi-idempotency-key-header-06), and retries the
same key with the same body through the trouble it meets; then the world's consumers run
(``consume_order``, the relay, ``reserve_stock``, ``capture_payment``) and its table says
whether every intent became exactly one order version everywhere.

The trouble, drawn per intent from the seed (``TroubleKind``), each on that intent's first
attempt only:

- its answer lost after the function ran and committed (``local.standins.http_host``'s
  ``AnswerFault``): the connection reset, the answer held past the client's timeout, a front
  door's 504 in its place; the client retries at once;
- a retry while the first handling is still under way: the first one's sent mark is slow (a
  slow Cosmos DB answer below the app's SDK, ``local.standins.faults``), the client's timeout
  passes, its retry finds the record not yet marked sent: 409 with Retry-After (the draft's
  "Concurrent Request", section 2.6);
- a 503: the store refused the commit (a Cosmos DB 503 below the SDK), or the queue refused the
  send after the SDK's own retries (an AMQP ``internal-error`` at the sender's link), the
  intent kept; ``make chaos`` adds its faults below the Cosmos SDK on every request of the app
  (``local.scenarios.chaos``).

The client honours Retry-After by waiting on the world's clock (``ManualClock.advance``): the
world's time is its manual clock, as everywhere in the demo. A retry is handled by whichever
invocation takes it: the edge keeps nothing in memory between requests (``shared.edge.core``),
so "another worker instance" is every retry here; a second worker process is not started
(the runtime's state is the process's: ``local.standins.worker``).

The table's rows (``api_rows``), over what the run left (``ApiData``), each keyed by the
client's intents (what the API was asked, never what it answered): each place one order (one
head and one record in the requests container, one order document); each intent one version
(its record, the head and the order document at the order's last intent's version, its status
the last intent's); on the queue one MessageId per intent (copies only of the same MessageId);
every order in the state of its last intent and its events downstream in increasing versions
(``local.scenarios.lifecycle``'s ``converged`` and ``published_in_order``); stock reserved once
per order (``local.scenarios.inventory``'s functions over the intended orders); money captured
once per order (``local.scenarios.payments``'s); every retry answered the first response
(status, Location, ETag, body: the answers heard, the answers the host lost, the stored
response); each intent's trouble happened and each intent was answered; the stand-in's own figures.

A scenario on a world of its own (its queue, topic, containers); never imports the runner.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import json
import logging
import random
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from aiohttp import web
from azure.servicebus._pyamqp.error import ErrorCondition, MessageException
from rich.console import Console

from local.assembly.world import CosmosAccount, World, local_world
from local.scenarios.chaos import chaos_transport
from local.scenarios.deliveries import OutcomeLog
from local.scenarios.invariants import DEMO, STAND_IN, Row, demo_data
from local.scenarios.inventory import at_highest_versions, read_stock, reserved_is_the_sum
from local.scenarios.lifecycle import Change, converged, published_in_order
from local.scenarios.options import DemoOptions
from local.scenarios.payments import expected_nets, nets_are_the_totals, one_move_per_key
from local.scenarios.relay import RelayRun
from local.scenarios.tables import figures_table, invariants_table
from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.cosmos_server import ensure_container
from local.standins.faults import (
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
    batch_operations,
)
from local.standins.http_host import FUNCTIONS_KEY_HEADER, AnswerFault, LostAnswer, LostResponse
from local.standins.payment_provider import LedgerEntry
from local.standins.servicebus_link import LocalNamespace, async_servicebus_client
from ops.audit import Invariant, SeenEvent
from shared.adapters.cosmos_orders import create_client
from shared.adapters.http_in import FUNCTION_KEY_CLIENT, IDEMPOTENCY_KEY_HEADER
from shared.config import EdgeSettings
from shared.consumer.contract import (
    ORDER_AMENDED,
    ORDER_CANCELLED,
    ORDER_PLACED,
    lifecycle_message_id,
)
from shared.consumer.order import ORDER_TYPE
from shared.edge.requests import (
    HEAD_TYPE,
    REQUEST_TYPE,
    HeadField,
    RequestField,
    order_id_for,
    request_id,
)
from shared.payments.provider import Operation
from shared.stock.inventory import RESERVATION_TYPE

# The client's own timeout for one attempt, and how long the host holds a HOLD answer and the
# store a slow sent mark: past the timeout, so the client never hears them. Real seconds.
ATTEMPT_TIMEOUT_S = 1.5
HELD_S = 2.0
STALL_BOUND_S = 30.0  # a stalled sent mark leaves by then, released or not (never a hang)
MAX_ATTEMPTS = 8
# The edge's sender here: the SDK's own retries (``retry_total`` 3 by default, azure/servicebus/
# _common/_configuration.py) on a short backoff (0.8 s by default), so that a refused send costs
# milliseconds; a refusal of all four attempts is the SDK's error to the edge.
SEND_ATTEMPTS = 4
# A Cosmos DB 503 on a write is retried once by the SDK on a one-region account ("writes are
# retried for 503s"; "If an account only has 1 region, then we still want to retry once on the
# same region": azure/cosmos/_service_unavailable_retry_policy.py): refused twice, it is the
# SDK's error to the edge, which answers 503.
STORE_ATTEMPTS = 2
SENDER_OPTIONS = {"retry_backoff_factor": 0.01}
SKUS = 40  # the API's orders draw their lines from this many SKUs, each stocked in plenty
ON_HAND = 100_000
DOWNSTREAM = "downstream"
CLIENT = FUNCTION_KEY_CLIENT  # the one client a function key is (shared.adapters.http_in)

ONE_ORDER_PER_PLACE = "each place one order: one head, one record, one order document"
ONE_VERSION_PER_INTENT = (
    "each intent one version: its record; the head and the order document at the last intent's"
)
ONE_MESSAGE_ID_PER_INTENT = "on the queue one MessageId per intent (copies only of the same)"
STOCK_ONCE = "stock reserved once per order, at its last intent's version"
MONEY_ONCE = "money captured once per order: its net the last intent's total, one move per key"
SAME_ANSWER = "every retry answered the first response (status, Location, ETag, body)"
TROUBLE_HAPPENED = "each intent's trouble happened, and each intent was answered in the end"
NO_INVOCATION_FAILED = "no HTTP invocation failed"
CONSUMERS_DRAINED = "the queue and subscriptions drained, no consumer invocation failed"
CAPTION = (
    "checked by: demo = the client's intents against the requests and orders containers, the "
    "queue's sends, the inventory, the provider's ledger; stand-in = the stand-in's own figures"
)


class TroubleKind(enum.StrEnum):
    """What an intent's first attempt meets (the module docstring)."""

    RESET = "connection reset after the function ran"
    HELD = "answer held past the client's timeout"
    GATEWAY = "504 from the front door, the function ran"
    IN_PROGRESS = "409: retried while its first handling was still marking"
    STORE_REFUSED = "503: the store refused the commit"
    QUEUE_REFUSED = "503: the queue refused the send"


_LOST = {
    TroubleKind.RESET: LostAnswer.DISCONNECT,
    TroubleKind.HELD: LostAnswer.HOLD,
    TroubleKind.GATEWAY: LostAnswer.GATEWAY_TIMEOUT,
}


class IntentKind(enum.StrEnum):
    PLACE = "place"
    AMEND = "amend"
    CANCEL = "cancel"


_SUBJECT = {
    IntentKind.PLACE: ORDER_PLACED,
    IntentKind.AMEND: ORDER_AMENDED,
    IntentKind.CANCEL: ORDER_CANCELLED,
}


@dataclass(frozen=True)
class Intent:
    """One thing the client wants done, once: its key, its body, the version it becomes."""

    key: str
    kind: IntentKind
    order: int  # the plan's order it belongs to
    version: int  # 1 for a place, then the order's next
    body: Mapping[str, Any]
    place_key: str  # the key its order was placed under
    trouble: TroubleKind | None = None

    @property
    def subject(self) -> str | None:
        """Its message's Subject: none for an OrderPlaced (the contract)."""
        return None if self.kind is IntentKind.PLACE else _SUBJECT[self.kind]

    def message_id(self, order_id: str) -> str:
        """Its message's MessageId, the contract's: the order id, or ``{orderId}:v{n}``."""
        return (
            order_id
            if self.kind is IntentKind.PLACE
            else lifecycle_message_id(order_id, self.version)
        )

    @property
    def predicted_order_id(self) -> str:
        """The order id the edge publishes for its order's place key (``order_id_for``): used
        only to aim the trouble before the run; the table reads the ids the client was
        answered."""
        return order_id_for(CLIENT, self.place_key)


def plan(options: DemoOptions) -> list[list[Intent]]:
    """Each order's intents, in the order the client sends them: placed, amended 0 to 2 times,
    one in three cancelled; each intent's trouble drawn at ``api_trouble_rate``, the first
    troubled ones taking every kind in turn (so a small run shows each)."""
    rng = random.Random(f"{options.seed}-api")
    kinds = list(TroubleKind)
    drawn = 0
    orders: list[list[Intent]] = []
    for number in range(options.api_orders):
        prefix = f"api-{options.seed}-{number:04d}"
        placed = _order_body(rng)
        steps: list[tuple[IntentKind, Mapping[str, Any]]] = [(IntentKind.PLACE, placed)]
        for amendment in range(rng.choice((0, 0, 1, 2))):
            steps.append((IntentKind.AMEND, _amended(placed, amendment + 1)))
        if rng.random() < 1 / 3:
            steps.append((IntentKind.CANCEL, {"reason": "customer request"}))
        intents = []
        for version, (kind, body) in enumerate(steps, start=1):
            trouble = None
            if rng.random() < options.api_trouble_rate:
                trouble = kinds[drawn % len(kinds)] if drawn < len(kinds) else rng.choice(kinds)
                drawn += 1
            step = f"amend{version - 1}" if kind is IntentKind.AMEND else kind.value
            key = f"{prefix}-{step}"
            intents.append(Intent(key, kind, number, version, body, f"{prefix}-place", trouble))
        orders.append(intents)
    return orders


def _order_body(rng: random.Random) -> dict[str, Any]:
    """What a client sends to place an order: no field the API assigns."""
    return {
        "customerId": f"cust-{rng.randrange(1, 200):04d}",
        "currency": rng.choice(["EUR", "USD", "GBP"]),
        "lines": [
            {
                "sku": f"SKU-API-{rng.randrange(SKUS):03d}",
                "quantity": rng.randrange(1, 5),
                "unitPriceMinor": rng.randrange(100, 50_000),
            }
            for _ in range(rng.randrange(1, 5))
        ],
    }


def _amended(placed: Mapping[str, Any], times: int) -> dict[str, Any]:
    """An amendment: the order's whole new state, its first line ``times`` units more."""
    lines = [dict(line) for line in placed["lines"]]
    lines[0]["quantity"] += times
    return {"customerId": placed["customerId"], "currency": placed["currency"], "lines": lines}


# ---- the client -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What one attempt read: ``status`` None when it read no answer (reset, timed out)."""

    status: int | None
    location: str | None = None
    etag: str | None = None
    retry_after: str | None = None
    body: Any = None

    @property
    def accepted(self) -> bool:
        return self.status in (200, 201)

    @property
    def identity(self) -> tuple[Any, ...]:
        """What a repeat must answer the same: status, Location, ETag, body."""
        return (self.status, self.location, self.etag, json.dumps(self.body, sort_keys=True))


@dataclass
class IntentRun:
    """One intent as the client performed it: every answer it read, in order, and the order it
    is about (the one the place was answered: its body's ``orderId``)."""

    intent: Intent
    order_id: str | None = None
    answers: list[Answer] = field(default_factory=list)

    @property
    def message_id(self) -> str | None:
        return None if self.order_id is None else self.intent.message_id(self.order_id)

    @property
    def final(self) -> Answer | None:
        return next((a for a in reversed(self.answers) if a.accepted), None)


class Client:
    """The seeded client: one session; each order's intents in turn (a change sent once the
    previous one was answered, with its ETag as If-Match and the order id the place was
    answered), in steps: every order's next intent at once, ``concurrency`` requests at a time.

    A lost answer (none read, or a 504 from the front door) is retried at once; a 409 or 503
    with Retry-After (RFC 9110, section 10.2.3) waits that long on the world's clock. The waits
    of a step are taken together once no first attempt of that step is in flight: moving the
    world's clock while another intent is under way would make its handling look stopped to
    its own retry (``IN_PROGRESS_WINDOW``, on that clock)."""

    def __init__(
        self,
        world: World,
        session: aiohttp.ClientSession,
        concurrency: int,
        found_under_way: Callable[[str], None] = lambda _key: None,
    ) -> None:
        self.world = world
        self.session = session
        # Told each key whose retry heard its first handling under way (a 409 with Retry-After).
        self.found_under_way = found_under_way
        self.slots = asyncio.Semaphore(concurrency)
        # The client's own timeout for one attempt (aiohttp's ClientTimeout).
        self.attempt_timeout = aiohttp.ClientTimeout(total=ATTEMPT_TIMEOUT_S)

    async def run(self, orders: Sequence[Sequence[Intent]]) -> list[IntentRun]:
        runs = [[IntentRun(intent) for intent in intents] for intents in orders]
        for step in range(max((len(r) for r in runs), default=0)):
            due: list[tuple[IntentRun, str | None]] = []
            for order in runs:
                if step >= len(order):
                    continue
                previous = order[step - 1].final if step else None
                if step and previous is None:
                    continue  # its order's previous intent was never answered
                order[step].order_id = order[0].order_id
                due.append((order[step], previous.etag if previous else None))
            while due:
                waits = await asyncio.gather(*(self._until_wait(run, tag) for run, tag in due))
                due = [pair for pair, wait in zip(due, waits, strict=True) if wait is not None]
                if due:
                    seconds = max(wait for wait in waits if wait is not None)
                    self.world.clock.advance(timedelta(seconds=seconds))
            for order in runs:
                place = order[0].final
                if step == 0 and place is not None and isinstance(place.body, Mapping):
                    order[0].order_id = str(place.body.get("orderId"))
        return [run for order in runs for run in order]

    async def _until_wait(self, run: IntentRun, if_match: str | None) -> int | None:
        """Attempts of the intent, the same key and body, until it is answered 2xx (None), it
        must wait (the seconds of its Retry-After), or a retry cannot change its answer."""
        intent = run.intent
        path = "orders"
        if intent.kind is IntentKind.AMEND:
            path = f"orders/{run.order_id}/amendments"
        elif intent.kind is IntentKind.CANCEL:
            path = f"orders/{run.order_id}/cancellations"
        headers = {
            FUNCTIONS_KEY_HEADER: self.world.function_key,
            IDEMPOTENCY_KEY_HEADER: f'"{intent.key}"',  # an RFC 8941 String
            "Content-Type": "application/json",
        }
        if if_match is not None:
            headers["If-Match"] = if_match
        data = json.dumps(intent.body).encode()
        url = self.world.http.function_url(path)
        # One slot for the intent's attempts: a retry goes at once, not behind other intents.
        async with self.slots:
            while len(run.answers) < MAX_ATTEMPTS:
                answer = await self._attempt(url, data, headers)
                run.answers.append(answer)
                if answer.status == 409 and answer.retry_after is not None:
                    self.found_under_way(intent.key)
                if answer.accepted:
                    return None
                if answer.status is None or answer.status == 504:
                    continue  # no answer of the API's: retry at once, the same key and body
                if answer.status in (409, 503) and answer.retry_after is not None:
                    return int(answer.retry_after)
                return None  # an answer a retry cannot change: the table shows it
        return None

    async def _attempt(self, url: str, data: bytes, headers: Mapping[str, str]) -> Answer:
        try:
            async with self.session.post(
                url, data=data, headers=headers, timeout=self.attempt_timeout
            ) as r:
                raw = await r.read()
                body = json.loads(raw) if raw else None
                return Answer(
                    r.status,
                    r.headers.get("Location"),
                    r.headers.get("ETag"),
                    r.headers.get("Retry-After"),
                    body,
                )
        except (aiohttp.ClientConnectionError, TimeoutError):
            return Answer(None)


# ---- the trouble's plumbing ---------------------------------------------------------------


@dataclass
class _DocumentBatchRule(FaultRule):
    """A fault on the one transactional batch that creates (``Create``) or patches (``Patch``:
    the sent mark) the document ``document_id``: one intent's commit or mark, whatever else
    runs at the same time."""

    document_id: str = ""
    operation: str = "Create"

    def matches(self, request: Any) -> bool:
        for operation in batch_operations(request):
            if operation.get("operationType") != self.operation:
                continue
            named = operation.get("id") or (operation.get("resourceBody") or {}).get("id")
            if named == self.document_id:
                return super().matches(request)
        return False


class QueueSends:
    """The orders queue as the edge's sender reaches it: every send recorded (MessageId,
    accepted or dropped by duplicate detection), and the sends of chosen MessageIds refused
    ``SEND_ATTEMPTS`` times in a row, as a link answers ``amqp:internal-error`` (the SDK
    retries it, then raises what the edge answers 503)."""

    def __init__(self, queue: PeekLockQueue) -> None:
        self.queue = queue
        self.sent: list[tuple[str, bool]] = []
        self.refuse: dict[str, int] = {}
        self.refused = 0

    def send_batch(self, messages: list[OutgoingMessage]) -> list[bool]:
        for message in messages:
            left = self.refuse.get(str(message.message_id), 0)
            if left:
                self.refuse[str(message.message_id)] = left - 1
                self.refused += 1
                raise MessageException(
                    ErrorCondition.InternalError, description="injected: the queue refused"
                )
        accepted = self.queue.send_batch(messages)
        self.sent += [(str(m.message_id), ok) for m, ok in zip(messages, accepted, strict=True)]
        return accepted


class StallingTransport(FaultInjectingTransport):
    """``FaultInjectingTransport`` with stalls: a request a stall matches waits, before it
    leaves, until the stall is released (``release``, by the document it writes) or
    ``STALL_BOUND_S`` passed, as a request of an instance stalled (or on a slow path to the
    store) lands late: the sent mark of a request still under way when its client's retry
    comes. Released by the client once a retry has heard that handling under way (a 409 with
    Retry-After), not merely answered: a retry answered otherwise (its own attempt timed out,
    the first attempt having been slowed before its commit so that the retry made the record
    and its mark is the one held; a chaos 503) leaves the mark held for the next retry. So a
    retry always finds the first handling under way, however loaded the machine: the premise is
    made, not timed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stalls: list[_DocumentBatchRule] = []
        self._released: set[str] = set()
        self._lock = threading.Lock()

    def release(self, document_id: str) -> None:
        with self._lock:
            self._released.add(document_id)

    async def send(self, request: Any, **kwargs: Any) -> Any:
        stall = next((rule for rule in self.stalls if rule.matches(request)), None)
        if stall is not None:
            stall.fired += 1
            # Polled: the app's requests may run on another event loop than the client's.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STALL_BOUND_S
            while loop.time() < deadline:
                with self._lock:
                    if stall.document_id in self._released:
                        break
                await asyncio.sleep(0.01)
        return await super().send(request, **kwargs)


def _keyed(key: str, request: web.Request) -> bool:
    """Whether ``request`` is a request under the Idempotency-Key ``key``."""
    return request.headers.get(IDEMPOTENCY_KEY_HEADER) == f'"{key}"'


def _arm(intent: Intent, world: World, transport: StallingTransport, sends: QueueSends) -> None:
    trouble = intent.trouble
    record = request_id(CLIENT, intent.key)
    if trouble in _LOST:
        world.http.answer_faults.append(
            AnswerFault(_LOST[trouble], functools.partial(_keyed, intent.key), hold_s=HELD_S)
        )
    elif trouble is TroubleKind.IN_PROGRESS:
        # Matched as a rule is; the transport holds it until released, then sends it on.
        transport.stalls.append(
            _DocumentBatchRule(FaultKind.SLOW_RESPONSE, document_id=record, operation="Patch")
        )
    elif trouble is TroubleKind.STORE_REFUSED:
        transport.add(
            _DocumentBatchRule(
                FaultKind.STATUS, status=503, times=STORE_ATTEMPTS, document_id=record
            )
        )
    elif trouble is TroubleKind.QUEUE_REFUSED:
        sends.refuse[intent.message_id(intent.predicted_order_id)] = SEND_ATTEMPTS


# ---- what the run left, and its table ---------------------------------------------------------


@dataclass
class ApiData:
    """What the table reads: the client's runs, the host's lost answers, the requests and
    orders containers, the queue's sends, the events downstream, the inventory, the ledger."""

    runs: Sequence[IntentRun]
    lost: Sequence[LostResponse]
    requests: Sequence[Mapping[str, Any]]
    orders: Sequence[Mapping[str, Any]]
    sent: Sequence[tuple[str, bool]]
    events: Sequence[SeenEvent]
    inventory: Sequence[Mapping[str, Any]]
    ledger: Sequence[LedgerEntry]

    def answered(self) -> list[IntentRun]:
        """The intents answered 2xx in the end (the others are the trouble row's)."""
        return [run for run in self.runs if run.final is not None and run.order_id is not None]

    def placed(self) -> dict[str, IntentRun]:
        """The orders the client was answered for its places, by order id."""
        return {
            str(run.order_id): run for run in self.answered() if run.intent.kind is IntentKind.PLACE
        }

    def last_intents(self) -> dict[str, IntentRun]:
        """Each order's last intent answered: the state it must end in."""
        return {str(run.order_id): run for run in self.answered()}

    def records(self) -> dict[str, list[Mapping[str, Any]]]:
        """The request records, by Idempotency-Key (wherever the edge stored them)."""
        found: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for document in self.requests:
            if document.get("type") == REQUEST_TYPE:
                found[str(document.get(RequestField.IDEMPOTENCY_KEY))].append(document)
        return found


def _invariant(name: str, wrong: Mapping[str, Sequence[str]], ok: str) -> Invariant:
    offending = sorted({i for ids in wrong.values() for i in ids})
    detail = "; ".join(f"{len(ids)} {what} {sorted(ids)[:3]}" for what, ids in wrong.items() if ids)
    return Invariant(name, not offending, offending, detail or ok)


def one_order_per_place(data: ApiData) -> Invariant:
    placed = data.placed()
    records = data.records()
    heads = Counter(
        str(d.get(HeadField.ORDER_ID)) for d in data.requests if d.get("type") == HEAD_TYPE
    )
    stored = Counter(str(d.get("orderId")) for d in data.orders if d.get("type") == ORDER_TYPE)
    wrong = {
        "places without exactly one record": [
            run.intent.key for run in placed.values() if len(records[run.intent.key]) != 1
        ],
        "places without exactly one head": [i for i in placed if heads[i] != 1],
        "places without exactly one order document": [i for i in placed if stored[i] != 1],
        "orders no place was answered": sorted((set(heads) | set(stored)) - set(placed)),
    }
    places = placed
    return _invariant(
        ONE_ORDER_PER_PLACE,
        wrong,
        f"{len(places)} places: {len(heads)} heads, {sum(stored.values())} order documents",
    )


def one_version_per_intent(data: ApiData) -> Invariant:
    records = data.records()
    heads = {str(d.get(HeadField.ORDER_ID)): d for d in data.requests if d.get("type") == HEAD_TYPE}
    stored = {str(d.get("orderId")): d for d in data.orders if d.get("type") == ORDER_TYPE}
    wrong: dict[str, list[str]] = {
        "intents without exactly one record": [],
        "records not at the intent's version or order": [],
        "heads not at the last intent's version": [],
        "order documents not at the last intent's version and status": [],
    }
    answered = data.answered()
    for run in answered:
        found = records[run.intent.key]
        if len(found) != 1:
            wrong["intents without exactly one record"].append(run.intent.key)
        elif (found[0].get(RequestField.ORDER_VERSION), found[0].get("orderId")) != (
            run.intent.version,
            run.order_id,
        ):
            wrong["records not at the intent's version or order"].append(run.intent.key)
    for order_id, run in data.last_intents().items():
        last = run.intent
        head = heads.get(order_id, {})
        cancelled = last.kind is IntentKind.CANCEL
        if (head.get(HeadField.ORDER_VERSION), head.get(HeadField.STATUS) == "cancelled") != (
            last.version,
            cancelled,
        ):
            wrong["heads not at the last intent's version"].append(order_id)
        order = stored.get(order_id, {})
        if (order.get("orderVersion", 1), order.get("status") == "cancelled") != (
            last.version,
            cancelled,
        ) or not order:
            wrong["order documents not at the last intent's version and status"].append(order_id)
    return _invariant(
        ONE_VERSION_PER_INTENT,
        wrong,
        f"{len(answered)} intents, {len(data.last_intents())} orders at their last version",
    )


def one_message_id_per_intent(data: ApiData) -> Invariant:
    """The MessageIds sent are the intents' (a place's the order id, a change's
    ``{orderId}:v{version}``: the contract's), each at least once; any other send a copy."""
    sends = Counter(message_id for message_id, _ in data.sent)
    accepted = Counter(message_id for message_id, ok in data.sent if ok)
    wanted = {str(run.message_id) for run in data.answered()}
    wrong = {
        "intents never sent": sorted(wanted - set(accepted)),
        "MessageIds of no intent answered": sorted(set(sends) - wanted),
    }
    copies = sum(sends.values()) - len(sends)
    return _invariant(
        ONE_MESSAGE_ID_PER_INTENT,
        wrong,
        f"{len(wanted)} intents, {len(sends)} MessageIds, {copies} copies "
        f"({sum(sends.values()) - sum(accepted.values())} dropped by duplicate detection)",
    )


def intended_orders(data: ApiData) -> list[Mapping[str, Any]]:
    """The order documents of orders the client placed: what the downstream consumers must
    have acted on, and nothing else."""
    placed = data.placed()
    return [d for d in data.orders if d.get("type") == ORDER_TYPE and d.get("orderId") in placed]


def stock_once(data: ApiData) -> Invariant:
    """``reserve_stock``'s reservations: at each intended order's highest version (none for an
    order no intent placed), and each SKU's ``reserved`` their sum."""
    at_highest = at_highest_versions(intended_orders(data), data.inventory)
    summed = reserved_is_the_sum(read_stock(data.inventory))
    reservations = sum(1 for d in data.inventory if d.get("type") == RESERVATION_TYPE)
    return Invariant(
        STOCK_ONCE,
        at_highest.passed and summed.passed,
        sorted({*at_highest.offending, *summed.offending}),
        at_highest.detail
        if not at_highest.passed
        else summed.detail
        if not summed.passed
        else f"{reservations} reservations; {summed.detail}",
    )


def money_once(data: ApiData) -> Invariant:
    nets = nets_are_the_totals(expected_nets(intended_orders(data), None), data.ledger)
    keys = one_move_per_key(data.ledger)
    captures = sum(1 for e in data.ledger if e.operation is Operation.CAPTURE)
    return Invariant(
        MONEY_ONCE,
        nets.passed and keys.passed,
        sorted({*nets.offending, *keys.offending}),
        nets.detail
        if not nets.passed
        else keys.detail
        if not keys.passed
        else f"{captures} captures, {len(data.ledger) - captures} refunds; {nets.detail}",
    )


def same_answer(data: ApiData) -> Invariant:
    """Each intent's accepted answers, heard or lost on the way, are one answer, and it is its
    record's stored response."""
    lost: dict[str, list[Answer]] = defaultdict(list)
    for response in data.lost:
        key = str(response.request_headers.get(IDEMPOTENCY_KEY_HEADER, "")).strip('"')
        if response.status in (200, 201):
            lost[key].append(_answer_of(response.status, response.headers, response.body))
    records = data.records()
    wrong: dict[str, list[str]] = {"answered differently": [], "not the stored response": []}
    repeated = 0
    for run in data.runs:
        key = run.intent.key
        answers = [a for a in run.answers if a.accepted] + lost[key]
        repeated += len(answers) > 1 or len(run.answers) > 1
        if len({a.identity for a in answers}) > 1:
            wrong["answered differently"].append(key)
        if answers and len(records[key]) == 1:
            stored = records[key][0][RequestField.RESPONSE]
            headers = stored.get("headers", {})
            first = Answer(
                stored.get("status"),
                headers.get("Location"),
                headers.get("ETag"),
                body=stored.get("body"),
            )
            if answers[0].identity != first.identity:
                wrong["not the stored response"].append(key)
    return _invariant(
        SAME_ANSWER, wrong, f"{repeated} intents retried, each answered its first response"
    )


def _answer_of(status: int, headers: Mapping[str, str], body: bytes) -> Answer:
    lowered = {name.lower(): value for name, value in headers.items()}
    return Answer(
        status, lowered.get("location"), lowered.get("etag"), None, json.loads(body or b"null")
    )


def trouble_happened(data: ApiData) -> Invariant:
    """Each intent's trouble was met on its way (its answer lost as drawn, which the host
    recorded under its key; a 409 heard; a 503 heard whose title says who refused), and every
    intent was answered 2xx in the end."""
    lost = {(str(r.request_headers.get(IDEMPOTENCY_KEY_HEADER, "")), r.kind) for r in data.lost}
    met: Counter[TroubleKind] = Counter()
    missed: list[str] = []
    for run in data.runs:
        trouble = run.intent.trouble
        if trouble is None:
            continue
        # Every answer the intent heard: under make chaos's faults an intent may hear two 503s
        # (its drawn refusal and a store fault of chaos's), and the drawn one is one of them.
        heard = {(a.status, _title(a.body)) for a in run.answers}
        if trouble in _LOST:
            happened = (f'"{run.intent.key}"', _LOST[trouble]) in lost
        elif trouble is TroubleKind.IN_PROGRESS:
            happened = any(status == 409 for status, _ in heard)
        else:
            happened = (503, _REFUSED_TITLE[trouble]) in heard
        if happened:
            met[trouble] += 1
        else:
            missed.append(run.intent.key)
    wrong = {
        "intents whose trouble never happened": missed,
        "intents never answered 2xx": [run.intent.key for run in data.runs if run.final is None],
    }
    return _invariant(
        TROUBLE_HAPPENED,
        wrong,
        ", ".join(f"{met[k]} {k.value}" for k in TroubleKind if met[k]) or "none drawn",
    )


# The title of the edge's 503 for each refusal (shared.edge.responses: ``unavailable``, and
# ``not_yet_sent``: the intent recorded, its send refused).
_REFUSED_TITLE = {
    TroubleKind.STORE_REFUSED: "The service is unavailable",
    TroubleKind.QUEUE_REFUSED: "The order is recorded but not yet sent",
}


def _title(body: Any) -> str | None:
    return str(body.get("title")) if isinstance(body, Mapping) else None


def api_rows(data: ApiData, stand_in: Sequence[Invariant]) -> list[Row]:
    highest = {
        order_id: Change(
            order_id,
            run.intent.version,
            run.intent.subject,
            _message_body(data, run.intent),
            str(run.message_id),
        )
        for order_id, run in data.last_intents().items()
    }
    return [
        *(
            Row(invariant, DEMO)
            for invariant in (
                one_order_per_place(data),
                one_version_per_intent(data),
                one_message_id_per_intent(data),
                converged(intended_orders(data), highest),
                published_in_order(data.events, highest),
                stock_once(data),
                money_once(data),
                same_answer(data),
                trouble_happened(data),
            )
        ),
        *(Row(invariant, STAND_IN) for invariant in stand_in),
    ]


def _message_body(data: ApiData, intent: Intent) -> bytes:
    """The message the edge stored for ``intent`` (its record's exact text): what the
    consumer's document must end in."""
    found = data.records().get(intent.key, [])
    return str(found[0].get(RequestField.MESSAGE_BODY, "{}")).encode() if found else b"{}"


# ---- the run ----------------------------------------------------------------------------------


@dataclass
class ApiReport:
    figures: dict[str, int] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    data: ApiData | None = None  # what the table read (the tests break it to see rows fail)

    @property
    def checks(self) -> list[Invariant]:
        return [row.invariant for row in self.rows]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


async def run_api(account: CosmosAccount, options: DemoOptions) -> ApiReport:
    """The scenario on a world (queue, topic, containers) of its own, then its table."""
    suffix = f"{options.seed}-{uuid.uuid4().hex[:8]}"
    container_name = f"api-{suffix}"
    own = {
        "INVENTORY_CONTAINER": f"api-inventory-{suffix}",
        "PAYMENTS_CONTAINER": f"api-payments-{suffix}",
        "REQUESTS_CONTAINER": f"api-requests-{suffix}",
    }
    counted = OutcomeLog()
    consumer_logger = logging.getLogger("orders.consumer")
    consumer_logger.addHandler(counted)
    try:
        async with (
            local_world(
                account=account,
                container=container_name,
                verify_tls=options.verify_tls,
                clock=ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
                max_concurrent_calls=options.concurrency,
                env=own,
            ) as world,
            create_client(world.settings) as verifier,
        ):
            container = await ensure_container(
                verifier, world.settings.cosmos_database, container_name
            )
            report = await _run(world, options, container)
            if not account.is_local_server:
                database = verifier.get_database_client(world.settings.cosmos_database)
                for name in (container_name, *own.values()):
                    await database.delete_container(name)
            return report
    finally:
        consumer_logger.removeHandler(counted)


async def _run(world: World, options: DemoOptions, container: Any) -> ApiReport:
    orders = plan(options)
    transport = StallingTransport(connection_verify=False)
    if options.transport_fault_rate > 0:  # make chaos: its faults on every request of the app
        for rule in chaos_transport(options).rules:
            transport.add(rule)
    sends = QueueSends(world.queue)
    queue_name = EdgeSettings.from_env(world.env).queue_name
    # The edge's sender: the SDK's own, into the queue model through ``sends`` (a send target
    # under the queue's name, which the namespace looks up before its entities).
    namespace = LocalNamespace(entities={queue_name: world.queue}, topics={queue_name: sends})
    servicebus = async_servicebus_client(namespace, **SENDER_OPTIONS)
    sender = servicebus.get_queue_sender(queue_name)
    world.compose(
        transport=transport, queue_sender=sender, jitter=random.Random(options.seed).random
    )
    world.topic.add_subscription(DOWNSTREAM)
    skus = {line["sku"] for intents in orders for i in intents for line in i.body.get("lines", [])}
    await asyncio.gather(*(world.seed_stock({sku: ON_HAND}) for sku in sorted(skus)))
    for intents in orders:
        for intent in intents:
            _arm(intent, world, transport, sends)
    try:
        async with aiohttp.ClientSession() as session:
            client = Client(
                world,
                session,
                options.concurrency,
                found_under_way=lambda key: transport.release(request_id(CLIENT, key)),
            )
            runs = await client.run(orders)
            await world.http.until_idle()  # the answers held and the marks slowed, done
    finally:
        await sender.close()
        await servicebus.close()
    # The consumers, as the host runs them: the queue, the relay, the two subscriptions.
    await world.host.run_until_idle()
    await RelayRun().until_idle(world)
    await asyncio.gather(world.stock_host.run_until_idle(), world.payment_host.run_until_idle())
    documents = [d async for d in container.query_items("SELECT * FROM c")]
    data = ApiData(
        runs=runs,
        lost=list(world.http.lost),
        requests=[d async for d in world.requests.query_items("SELECT * FROM c")],
        orders=[d for d in documents if d.get("type") == ORDER_TYPE],
        sent=list(sends.sent),
        events=demo_data(documents, [], world.topic.delivered(DOWNSTREAM)).events or [],
        inventory=[d async for d in world.inventory_documents.query_items("SELECT * FROM c")],
        ledger=list(world.payment_provider.ledger),
    )
    report = ApiReport(figures=_figures(data, sends, world), data=data)
    report.rows = api_rows(data, _stand_in(world))
    if options.transport_fault_rate > 0:
        report.figures["injected Cosmos faults (chaos, all the app's requests)"] = sum(
            r.fired for r in transport.rules if not isinstance(r, _DocumentBatchRule)
        )
    return report


def _figures(data: ApiData, sends: QueueSends, world: World) -> dict[str, int]:
    kinds = Counter(run.intent.kind for run in data.runs)
    answers = [a for run in data.runs for a in run.answers]
    heard = Counter(a.status for a in answers)
    lost = Counter(r.kind for r in data.lost)
    return {
        "intents: places": kinds[IntentKind.PLACE],
        "intents: amendments": kinds[IntentKind.AMEND],
        "intents: cancellations": kinds[IntentKind.CANCEL],
        "requests sent (attempts)": len(answers),
        "retries with the same key": len(answers) - len(data.runs),
        "answers lost: connection reset after the function ran": lost[LostAnswer.DISCONNECT],
        "answers lost: held past the client's timeout": lost[LostAnswer.HOLD],
        "answers lost: 504 from the front door": lost[LostAnswer.GATEWAY_TIMEOUT],
        "409 in progress, heard": heard[409],
        "503 heard (store or queue refused; chaos: its faults)": heard[503],
        "queue sends refused (injected, SDK retries included)": sends.refused,
        "queue sends": len(data.sent),
        "dropped by duplicate detection": sum(1 for _, ok in data.sent if not ok),
        "order documents": len(data.orders),
        "events received downstream": len(data.events),
        "stock reservations": sum(1 for d in data.inventory if d.get("type") == RESERVATION_TYPE),
        "captures and refunds in the ledger": len(data.ledger),
        "HTTP requests served by the host": world.http.stats.requests,
    }


def _stand_in(world: World) -> list[Invariant]:
    http = world.http.stats
    hosts = [world.host, world.stock_host, world.payment_host]
    active = sum(host.queue.active_count() for host in hosts)
    errors = [e for host in hosts for e in host.stats.errors]
    return [
        Invariant(
            NO_INVOCATION_FAILED,
            http.failed_invocations == 0,
            [],
            "; ".join(http.errors[:3]) or f"{http.invocations} invocations",
        ),
        Invariant(
            CONSUMERS_DRAINED,
            active == 0 and not errors,
            [],
            "; ".join(errors[:3]) or f"{active} still active",
        ),
    ]


def print_api(report: ApiReport, console: Console) -> None:
    console.print(figures_table("The orders API: a client's retries", report.figures))
    console.print(invariants_table("Orders API invariants", report.rows, CAPTION))
