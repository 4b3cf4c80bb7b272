"""A payment provider on 127.0.0.1 (aiohttp.web, on a thread of its own): the HTTP API that
``shared.adapters.payment_provider`` documents, with the Idempotency-Key rules of the IETF draft
"The Idempotency-Key HTTP Header Field" and a ledger of the money that moved, the referee of
every payment test.

The draft cited is draft-ietf-httpapi-idempotency-key-header-06 (February 2025), the latest
revision whose whole text was at hand (github.com/ietf-wg-httpapi/idempotency at dab060c,
``draft-ietf-httpapi-idempotency-key-header.md``). Revisions -07 (October 2025) to -09
(November 2026) are published; only their front matter could be read here, so a section number
below is -06's. What each behaviour follows:

- the key (section 2, 2.1): the ``Idempotency-Key`` request header, "an Item Structured Header
  [RFC 8941]. Its value MUST be a String (Section 3.3.3 of [RFC 8941])": a quoted string of
  printable ASCII, ``\\`` and ``"`` escaped (parsed as RFC 8941 section 4.2.5 says). The
  resource publishes its key format (sections 2.5.2 and 5, "Establish a fixed format for the
  idempotency key ... Always validate the key"): here, a String of 1 to 255 characters, without
  parameters. A header that is not one is refused like a missing one: 400.
- a missing key (section 2.7): "the resource SHOULD reply with an HTTP 400 status code with body
  containing a link pointing to relevant documentation", shown as an ``application/problem+json``
  document (``type``, ``title``, ``detail``): so here on both POST endpoints, which require it.
- uniqueness and the fingerprint (sections 2.2, 2.4): a key "MUST NOT be reused with another
  request with a different request payload"; the resource MAY fingerprint the payload. Here the
  fingerprint is a SHA-256 of the method, the path and the body's JSON with sorted keys (a
  "checksum of the entire request payload", insensitive to the order of its fields).
- a repeat after the first completed (section 2.6, "Retry"): "The resource SHOULD respond with
  the result of the previously completed operation, success or an error": the first answer's
  status and body, byte for byte, and nothing moves.
- the same key with another payload (section 2.7): 422 with a problem document; the same key
  while the first is still being processed (sections 2.6 "Concurrent Request" and 2.7): 409 with
  a problem document. The key errors are worded as the draft's examples: one ``type`` for all,
  ``https://developer.example.com/idempotency`` (the link to the resource's documentation the
  draft asks for), and the examples' titles and details (an invalid key, which the draft has no
  example of, worded alike), so a client tells them apart by their status only, as it must
  with any provider following the draft (whose other form, a ``Link`` header, has no body). A
  request answered 400, 409 or 422 for the key is not processed (2.7: "Clients MUST correct the
  requests (with the exception of 409 ...) before performing a retry operation, or the resource
  MUST fail the request").
- other errors (section 2.7): "For other 4xx/5xx errors, such as 401, 403, 500, 502, 503, 504,
  429 ... the client SHOULD act appropriately by following the resource's documentation": here
  401 (``WWW-Authenticate: Bearer``, RFC 6750 section 3) for a missing or wrong credential, 402
  for a declined card, 422 ``refund-exceeds-captured`` for a refund above what is left (a 422
  the client tells from the key's by that ``type``: ``shared.adapters.payment_profile``), 503
  from the faults below. The problem types of these are this provider's own (``Problem``).

The HTTP API (``shared.adapters.payment_provider`` has the client's side):

- ``POST /v1/captures``: ``{"order_id", "reference", "customer_id", "amount_minor",
  "currency"}``: charges the customer; 201 with the operation ``{"id", "operation", "status":
  "succeeded", "order_id", "reference", "amount_minor", "currency", "created_at"}``; 402 when
  the customer is in ``declined_customers``.
- ``POST /v1/refunds``: the same body (``customer_id`` optional): 201 likewise; 422
  (``refund-exceeds-captured``) when the amount exceeds the order's captures minus its refunds.
- ``GET /v1/operations?reference=<reference>``: every operation under the merchant's
  reference, oldest first: ``{"reference", "operations": [{"id", "operation", "state":
  "processing" | "completed", "outcome": "succeeded" | "declined" | "refused" | null,
  "order_id", "amount_minor", "currency", "detail"}]}``; 404 when there is none. An operation is
  "processing" from its acceptance to its commit; one dropped before committing (a 5xx before
  commit) leaves nothing.
- Every endpoint requires ``Authorization: Bearer <api_key>``.

Faults, set from Python per test (``inject``), each for the next ``times`` POSTs to an
operation's endpoint that pass authentication, validation and the key's rules (first attempts
and replays alike; a 400, 409 or 422 consumes no fault):

- ``TIMEOUT_AFTER_COMMIT``: commits, then holds the answer ``delay_s``, longer than the client
  waits: the client times out, the money moved;
- ``ERROR_BEFORE_COMMIT``: answers ``status`` (503) at once: nothing moves, the key stays free;
  with ``problem``, that document instead of the stand-in's own: a refusal worded as another
  provider would (a 418, a 400 of an unknown ``type``);
- ``ERROR_AFTER_COMMIT``: commits, then answers ``status``: the money moved and the key holds
  the real answer, as when a gateway loses it;
- ``SLOW_BEFORE_COMMIT``: waits ``delay_s`` before committing, the key being processed all
  along: a repeat gets 409, a lookup "processing".

``honour_keys=False`` ignores the header entirely (no 400, no replay, no 409, no 422): every
request moves money again; only the lookup by reference tells. ``keyless_customers``: the same,
for the requests of those customers only (their ``customer_id``), as when part of a merchant's
customers are served by an acquirer or an account that honours no key; ``make chaos`` sends a
seeded share of its customers there. Whether a real provider splits so is not known here: a
client that cannot tell which of its requests are honoured must treat every one as not
(``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS=ignored``).

Not reproduced: key expiry (section 2.3: keys are kept for the server's life), key scoping to a
client or account (section 5's composite key: one credential here), a provider that stores its
own 5xx under the key and replays it, fingerprints of selected fields only (section 2.4's other
approaches), the ``Link`` header form of the errors, headers in a replay other than the
Content-Type, authorisations and voids (a capture is immediate), currencies (amounts are summed
per order whatever their currency), 403 and 429 (the adapter maps them; nothing here answers
them), Retry-After on a 409, TLS. Fault delays run on real time (the clock only stamps the
ledger).

Imports ``shared`` only (the port's ``Operation``, the API's paths from the adapter, the refund
refusal's type from the profile, ``shared.clock``); never the app, ``local.assembly`` or
``local.scenarios``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import threading
import uuid
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import TracebackType
from typing import Any, Self

from aiohttp import web
from aiohttp.typedefs import Handler
from idempotent_consumer import SYSTEM_CLOCK, Clock, document_timestamp

from shared.adapters.payment_profile import REFUND_EXCEEDS_CAPTURED
from shared.adapters.payment_provider import (
    CAPTURES_PATH,
    IDEMPOTENCY_KEY_HEADER,
    OPERATIONS_PATH,
    PROBLEM_JSON,
    REFUNDS_PATH,
)
from shared.edge.requests import parse_sf_string  # the one parser of the key's header
from shared.payments.provider import Operation

__all__ = [
    "DEFAULT_API_KEY",
    "MAX_KEY_LENGTH",
    "Fault",
    "FaultRule",
    "LedgerEntry",
    "PaymentProviderStandIn",
    "Problem",
    "parse_sf_string",
]

DEFAULT_API_KEY = "local-payment-provider-key"
MAX_KEY_LENGTH = 255  # the published key format (draft sections 2.5.2, 5)
_SHUTDOWN_TIMEOUT_S = 0.2  # answers held by a fault are not waited for at stop
_PROBLEMS = "https://payments.example/problems/"


class Problem(StrEnum):
    """The ``type`` of each problem document this provider answers with."""

    # The draft's examples' one link for its three key errors (section 2.7): 400 a missing or
    # invalid key, 409 a request outstanding under the key, 422 the key with another payload.
    IDEMPOTENCY_KEY = "https://developer.example.com/idempotency"
    INVALID_REQUEST = _PROBLEMS + "invalid-request"  # 400: the body is wrong
    CARD_DECLINED = _PROBLEMS + "card-declined"  # 402
    REFUND_EXCEEDS_CAPTURED = REFUND_EXCEEDS_CAPTURED  # 422
    UNAUTHORIZED = _PROBLEMS + "unauthorized"  # 401
    NOT_FOUND = _PROBLEMS + "not-found"  # 404 (lookup)
    UNAVAILABLE = _PROBLEMS + "unavailable"  # 5xx


class Fault(StrEnum):
    TIMEOUT_AFTER_COMMIT = "timeout_after_commit"  # commit, then hold the answer delay_s
    ERROR_BEFORE_COMMIT = "error_before_commit"  # answer ``status``; nothing moves
    ERROR_AFTER_COMMIT = "error_after_commit"  # commit, then answer ``status``
    SLOW_BEFORE_COMMIT = "slow_before_commit"  # wait delay_s (key in progress), then commit


@dataclass
class FaultRule:
    fault: Fault
    operation: Operation | None = None  # None: captures and refunds
    times: int | None = 1  # the next N matching requests; None: every one
    delay_s: float = 0.0  # TIMEOUT_AFTER_COMMIT: the hold; SLOW_BEFORE_COMMIT: the delay
    status: int = 503  # the ERROR_* answers
    problem: Mapping[str, Any] | None = None  # ERROR_*: answered instead of "unavailable"
    fired: int = 0

    def _take(self, operation: Operation) -> bool:
        if self.operation not in (None, operation):
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.fired += 1
        return True


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """Money that moved: a capture from the customer, or a refund to them."""

    order_id: str
    operation: Operation
    amount_minor: int
    currency: str
    reference: str
    idempotency_key: str | None  # as received, honoured or not (None: no valid header)
    provider_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    content_type: str

    def response(self) -> web.Response:
        return web.Response(status=self.status, body=self.body, content_type=self.content_type)


@dataclass(slots=True)
class _KeyRecord:
    fingerprint: str
    answer: _Answer | None = None  # None: being processed


@dataclass(slots=True)
class _OperationRecord:
    id: str
    operation: Operation
    order_id: str
    reference: str
    amount_minor: int
    currency: str
    state: str = "processing"
    outcome: str | None = None
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operation": str(self.operation),
            "state": self.state,
            "outcome": self.outcome,
            "order_id": self.order_id,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class _Payload:
    order_id: str
    reference: str
    customer_id: str
    amount_minor: int
    currency: str


def _problem(status: int, problem: Problem, title: str, detail: str, **extra: Any) -> _Answer:
    body = {"type": str(problem), "title": title, "status": status, "detail": detail, **extra}
    return _Answer(status, json.dumps(body).encode(), PROBLEM_JSON)


def _payload(body: Any, operation: Operation) -> _Payload | str:
    """The request's fields, or what is wrong with them."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    for name in ("order_id", "reference", "currency"):
        if not isinstance(body.get(name), str) or not body[name]:
            return f"{name} must be a non-empty string"
    customer_id = body.get("customer_id", "")
    if not isinstance(customer_id, str) or (operation is Operation.CAPTURE and not customer_id):
        return "customer_id must be a non-empty string for a capture"
    amount = body.get("amount_minor")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        return "amount_minor must be a positive integer"
    return _Payload(body["order_id"], body["reference"], customer_id, amount, body["currency"])


def _fingerprint(method: str, path: str, body: Any) -> str:
    canonical = json.dumps([method, path, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class PaymentProviderStandIn:
    """The provider, served from ``start`` (or ``with``) to ``stop`` on a thread of its own, so
    that a test, the worker or a scenario may block its own loop. Its state (ledger, faults,
    modes) is read and set from any thread."""

    def __init__(
        self,
        *,
        api_key: str = DEFAULT_API_KEY,
        honour_keys: bool = True,
        keyless_customers: set[str] | frozenset[str] = frozenset(),
        declined_customers: set[str] | frozenset[str] = frozenset(),
        port: int = 0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.api_key = api_key
        self.honour_keys = honour_keys
        self.keyless_customers = set(keyless_customers)
        self.declined_customers = set(declined_customers)
        self.port = port
        self.clock = clock
        self._lock = threading.Lock()
        self._ledger: list[LedgerEntry] = []
        self._keys: dict[str, _KeyRecord] = {}
        self._operations: dict[str, list[_OperationRecord]] = {}
        self._rules: list[FaultRule] = []
        self._received: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- what a test reads and sets ---------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        with self._lock:
            return tuple(self._ledger)

    @property
    def requests_received(self) -> Counter[str]:
        """Every request that reached the server, by ``"<METHOD> <path>"`` (the bench's provider
        calls per event), whatever its answer."""
        with self._lock:
            return Counter(self._received)

    def net_captured(self, order_id: str) -> int:
        """The order's captures minus its refunds, in minor units: what the customer paid."""
        with self._lock:
            return self._net_captured(order_id)

    def inject(self, rule: FaultRule) -> FaultRule:
        """Add a fault rule (checked in the order added, the first that matches fires)."""
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    # -- lifetime -------------------------------------------------------------------------------

    def start(self) -> Self:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="payment-provider", daemon=True
        )
        self._thread.start()
        self._run(self._serve())
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._run(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._count])
        app.router.add_post(CAPTURES_PATH, self._capture)
        app.router.add_post(REFUNDS_PATH, self._refund)
        app.router.add_get(OPERATIONS_PATH, self._lookup)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port when 0 was asked

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        with self._lock:
            self._received[f"{request.method} {request.path}"] += 1
        return await handler(request)

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- the endpoints ----------------------------------------------------------------------

    async def _capture(self, request: web.Request) -> web.Response:
        return await self._operate(request, Operation.CAPTURE)

    async def _refund(self, request: web.Request) -> web.Response:
        return await self._operate(request, Operation.REFUND)

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        response = _problem(
            401, Problem.UNAUTHORIZED, "Unauthorized", "a valid Bearer credential is required"
        ).response()
        response.headers["WWW-Authenticate"] = 'Bearer realm="payments"'
        return response

    async def _operate(self, request: web.Request, operation: Operation) -> web.Response:
        if (refusal := self._unauthorized(request)) is not None:
            return refusal
        try:
            body = await request.json()
        except ValueError:
            body = None
        headers = request.headers.getall(IDEMPOTENCY_KEY_HEADER, [])
        received_key = parse_sf_string(", ".join(headers)) if headers else None
        key: str | None = None  # the key enforced: None when keys are ignored
        if self.honours_keys_of(body):
            if not headers:
                return _problem(
                    400,
                    Problem.IDEMPOTENCY_KEY,
                    "Idempotency-Key is missing",
                    "This operation is idempotent and it requires correct usage of "
                    "Idempotency Key.",
                ).response()
            key = received_key
            if key is None or not 1 <= len(key) <= MAX_KEY_LENGTH:
                return _problem(
                    400,
                    Problem.IDEMPOTENCY_KEY,
                    "Idempotency-Key is invalid",
                    f"The key must be one Structured Field String of 1 to {MAX_KEY_LENGTH} "
                    "printable ASCII characters.",
                ).response()
        payload = _payload(body, operation)
        if isinstance(payload, str):
            return _problem(400, Problem.INVALID_REQUEST, "Invalid request", payload).response()
        fingerprint = _fingerprint(request.method, request.path, body)

        # From the key's check to its registration nothing awaits: of two concurrent requests
        # with one key, exactly one is processed and the other sees it in progress.
        with self._lock:
            record = self._keys.get(key) if key is not None else None
            replay = None if record is None else self._repeat(record, fingerprint)
            if replay is not None and replay.status in (409, 422):
                return replay.response()  # refused for the key: no fault, nothing processed
            rule = next((rule for rule in self._rules if rule._take(operation)), None)
            if rule is not None and rule.fault is Fault.ERROR_BEFORE_COMMIT:
                return _injected(rule, "before committing").response()
            if replay is None:
                if key is not None:
                    self._keys[key] = _KeyRecord(fingerprint)
                pending = _OperationRecord(
                    f"{'cap' if operation is Operation.CAPTURE else 'ref'}_{uuid.uuid4().hex[:16]}",
                    operation,
                    payload.order_id,
                    payload.reference,
                    payload.amount_minor,
                    payload.currency,
                )
                self._operations.setdefault(payload.reference, []).append(pending)

        if replay is None:
            delay_s = rule.delay_s if rule and rule.fault is Fault.SLOW_BEFORE_COMMIT else 0.0
            # Shielded: a client that gives up (or a handler cancelled) does not stop the commit.
            task = asyncio.ensure_future(self._commit(pending, payload, key, received_key, delay_s))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            answer = await asyncio.shield(task)
        else:
            answer = replay
        if rule is not None and rule.fault is Fault.TIMEOUT_AFTER_COMMIT:
            await asyncio.sleep(rule.delay_s)
        if rule is not None and rule.fault is Fault.ERROR_AFTER_COMMIT:
            return _injected(rule, "after committing").response()
        return answer.response()

    def honours_keys_of(self, body: Any) -> bool:
        """Whether the key is honoured for this request: never with ``honour_keys`` off, nor
        for a customer in ``keyless_customers``."""
        customer = body.get("customer_id") if isinstance(body, dict) else None
        return self.honour_keys and customer not in self.keyless_customers

    def _repeat(self, record: _KeyRecord, fingerprint: str) -> _Answer:
        if record.fingerprint != fingerprint:
            return _problem(
                422,
                Problem.IDEMPOTENCY_KEY,
                "Idempotency-Key is already used",
                "This operation is idempotent and it requires correct usage of Idempotency Key. "
                "Idempotency Key MUST not be reused across different payloads of this operation.",
            )
        if record.answer is None:
            return _problem(
                409,
                Problem.IDEMPOTENCY_KEY,
                "A request is outstanding for this Idempotency-Key",
                "A request with the same Idempotency-Key for the same operation is being "
                "processed or is outstanding.",
            )
        return record.answer

    async def _commit(
        self,
        pending: _OperationRecord,
        payload: _Payload,
        key: str | None,
        received_key: str | None,
        delay_s: float,
    ) -> _Answer:
        if delay_s:
            await asyncio.sleep(delay_s)
        with self._lock:
            answer = self._decide(pending, payload, received_key)
            pending.state = "completed"
            if key is not None:
                self._keys[key].answer = answer
        return answer

    def _decide(self, pending: _OperationRecord, payload: _Payload, key: str | None) -> _Answer:
        """The money rules; called with the lock held, so a check and its commit are one."""
        if (
            pending.operation is Operation.CAPTURE
            and payload.customer_id in self.declined_customers
        ):
            pending.outcome, pending.detail = "declined", "the card was declined"
            return _problem(402, Problem.CARD_DECLINED, "Card declined", pending.detail)
        if pending.operation is Operation.REFUND:
            left = self._net_captured(payload.order_id)
            if payload.amount_minor > left:
                pending.outcome = "refused"
                pending.detail = (
                    f"a refund of {payload.amount_minor} exceeds the {left} left captured "
                    f"for order {payload.order_id}"
                )
                return _problem(
                    422, Problem.REFUND_EXCEEDS_CAPTURED, "Refund exceeds captured", pending.detail
                )
        at = self.clock.now()
        self._ledger.append(
            LedgerEntry(
                payload.order_id,
                pending.operation,
                payload.amount_minor,
                payload.currency,
                payload.reference,
                key,
                pending.id,
                at,
            )
        )
        pending.outcome = "succeeded"
        pending.detail = f"{pending.operation} {payload.amount_minor} {payload.currency}"
        body = {
            "id": pending.id,
            "operation": str(pending.operation),
            "status": "succeeded",
            "order_id": payload.order_id,
            "reference": payload.reference,
            "amount_minor": payload.amount_minor,
            "currency": payload.currency,
            "created_at": document_timestamp(at),
        }
        return _Answer(201, json.dumps(body).encode(), "application/json")

    def _net_captured(self, order_id: str) -> int:
        return sum(
            entry.amount_minor if entry.operation is Operation.CAPTURE else -entry.amount_minor
            for entry in self._ledger
            if entry.order_id == order_id
        )

    async def _lookup(self, request: web.Request) -> web.Response:
        if (refusal := self._unauthorized(request)) is not None:
            return refusal
        reference = request.query.get("reference", "")
        if not reference:
            return _problem(
                400, Problem.INVALID_REQUEST, "Invalid request", "reference is required"
            ).response()
        with self._lock:
            records = [record.as_json() for record in self._operations.get(reference, [])]
        if not records:
            return _problem(
                404, Problem.NOT_FOUND, "Not found", "no operation has this reference"
            ).response()
        return web.json_response({"reference": reference, "operations": records})


def _injected(rule: FaultRule, when: str) -> _Answer:
    """The answer of an ERROR_* fault: its ``problem``, or the stand-in's "unavailable"."""
    if rule.problem is not None:
        return _Answer(rule.status, json.dumps(dict(rule.problem)).encode(), PROBLEM_JSON)
    return _problem(rule.status, Problem.UNAVAILABLE, "Service unavailable", f"injected: {when}")


def main(argv: list[str] | None = None) -> None:
    """``python -m local.standins.payment_provider --port 7081``: serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else "")
    parser.add_argument("--port", type=int, default=7081)
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    parser.add_argument("--ignore-keys", action="store_true", help="honour no Idempotency-Key")
    parser.add_argument("--decline", action="append", default=[], help="a declined customer id")
    args = parser.parse_args(argv)
    provider = PaymentProviderStandIn(
        api_key=args.api_key,
        honour_keys=not args.ignore_keys,
        declined_customers=set(args.decline),
        port=args.port,
    )
    with provider:
        print(f"payment provider on {provider.url} (Bearer {provider.api_key})", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
