"""``make demo``: orders in, exactly-once effect out, on local stand-ins, with realistic trouble.

A seeded producer sends a stream of orders through the peek-lock queue model; the local stand-in
(``local.assembly.world``) invokes the real function through Microsoft's worker runtime (its
decoding of the host's bytes, the real Cosmos SDK, the real settlement client). Trouble, each at its
own rate:
- producer retries: most arrive inside the duplicate-detection window and are dropped by the
  broker; some arrive after it (a day later) and reach the consumer, which completes them as
  duplicates;
- lock expiry while a delivery is still writing: a second delivery of the same message runs
  concurrently; one writes, the other sees a duplicate; the first one's settlement fails with a
  lost lock and is swallowed;
- a crash after the commit, before the settlement reaches the broker: the lock lapses, the
  redelivery is a duplicate and completed;
- the same order id with a different body (sent after the window): dead-lettered HashMismatch;
- poison messages (no id, not JSON, wrong schema, wrong version, id mismatch, too large).

Then each order is followed to the ``order-events`` subscription: after each phase the host's
Cosmos DB trigger (``local.standins.change_feed``) delivers the container's changes to
``relay_outbox`` through the worker, with relay trouble at its own seeded rates:
- a crash between the send and the mark: the topic accepted the batch, the worker dies before
  marking; the restarted trigger redelivers from the last checkpoint, the republish is dropped by
  the topic's duplicate detection and the marks complete;
- a send failure (a timeout): the invocation fails, the batch is not checkpointed and is re-run
  on the function's retry policy (5 s, 10 s ... on the manual clock);
- a relay stall (``--relay-stall``, in ``make chaos``): the topic disabled for that many sends in
  a row after phase 1, a systemic failure the relay retries without bound until it ends.

Last, the relay's edge: a few more orders are accepted while the relay's lease store is empty,
and its trigger then starts "from now" (as a binding without ``startFromBeginning`` does): the
change feed never delivers their events. The outbox watchdog (its timer trigger, through the
worker, ``local.standins.timer``) finds them pending past ``OUTBOX_WATCHDOG_MIN_AGE_SECONDS`` and
publishes them; an invariant checks that it did. ``make chaos`` adds throttled transactional
batches (207 with 429/449/503 on one operation) below the Cosmos SDK.

Then the operator's part: a few more orders are accepted while the topic refuses every send with
an error nobody classified (``_refusal``); the relay retries each batch ``park_after_attempts``
times and parks its events (``RetriesExhausted``). The cause fixed, ``python -m ops parked list``
lists them and ``python -m ops parked republish --reason RetriesExhausted`` sets them back to
pending; the change feed delivers the new version and the relay publishes it.

Time is a ``ManualClock``: lock expiry, backoff and "a day later" happen by advancing it, never
by sleeping. At the end a summary and the table of invariants (``local.scenarios.invariants``: the
live audit's, ``ops.audit.audit``, over the demo's own documents, dead letters and the events a
downstream subscription received; the demo's expectations, with ``ops.audit``'s functions; the
stand-in's own figures); exit status 1 if any fails. Last, the tool over the demo's own data
(``local.scenarios.tool_runs``): ``--dead-letters`` (``list`` by default), then ``python -m ops
audit
--since ...`` as an operator runs it, whose ``--json`` twin, run when the table is, must agree
with the table.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import shlex
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessagingEntityDisabledError, ServiceBusError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from local.assembly.world import World, cosmos_account, local_world
from local.scenarios.invariants import (
    AUDIT,
    DEMO,
    STAND_IN,
    Expected,
    Row,
    demo_data,
    expectations,
    flow_invariants,
    operator_audit_agrees,
    outbox_off,
    stand_in_checks,
)
from local.scenarios.lifecycle import (
    LifecycleMix,
    LifecycleReport,
    converged,
    mix,
    print_lifecycle,
    published_in_order,
    run_lifecycle,
)
from local.scenarios.options import DemoOptions
from local.scenarios.tool_runs import ToolRun, audit_arguments, run_tool
from local.standins.broker import Delivery, ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.cosmos_server import ensure_container
from local.standins.faults import (
    BATCHES,
    POINT_READS,
    WRITES,
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
)
from local.standins.topic import WorkerCrashed
from ops.audit import NO_ORDER_LOST, Invariant
from ops.sample_orders import random_order
from shared.adapters.cosmos_orders import create_client
from shared.config import WatchdogSettings
from shared.consumer.contract import (
    ORDER_ACCEPTED_EVENT_TYPE,
    ORDER_AMENDED,
    ORDER_CANCELLED,
    parse_order,
)
from shared.kit.message import MAX_BODY_BYTES
from shared.relay.core import PARKED_RETRIES_EXHAUSTED
from shared.relay.outbox import OUTBOX_TYPE, STATUS_PARKED, STATUS_PENDING
from shared.relay.outbox import OutboxField as F

POISON_KINDS = {
    "no-message-id": "MissingMessageId",
    "not-json": "InvalidPayload",
    "schema": "InvalidPayload",
    "version": "UnsupportedSchemaVersion",
    "id-mismatch": "MessageIdMismatch",
    "too-large": "PayloadTooLarge",
}
# A subscription the demo adds for downstream (it receives and completes what it is sent), so
# the Bicep's ``retained`` subscription keeps every event for the audit's peek.
DOWNSTREAM_SUBSCRIPTION = "downstream"
# Phase 4's refusal lasts until the operator's fix (``heal``); this only bounds it.
REFUSED_SENDS_BOUND = 1_000

REFUSED_SENDS = "topic sends refused (injected: timeouts and the stall)"

Tool = Callable[[Sequence[str]], ToolRun]


@dataclass
class DemoReport:
    figures: dict[str, int] = field(default_factory=dict)
    dead_lettered_by_reason: Counter[str] = field(default_factory=Counter)
    deliveries_per_message: Counter[int] = field(default_factory=Counter)  # deliveries -> ids
    outcomes: Counter[str] = field(default_factory=Counter)
    rows: list[Row] = field(default_factory=list)  # the table of invariants, in its order
    # ``python -m ops`` over the demo's data, in the order it ran: "parked list", "parked
    # republish", "requested" (``--dead-letters``), "audit".
    tool_runs: dict[str, ToolRun] = field(default_factory=dict)
    operator_audit: ToolRun | None = None  # ``audit ... --json``, run when the table is read
    lifecycle: LifecycleReport | None = None  # the lifecycle scenario's, with its own table

    @property
    def checks(self) -> list[Invariant]:
        lifecycle = self.lifecycle.checks if self.lifecycle is not None else []
        return [*(row.invariant for row in self.rows), *lifecycle]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


@dataclass
class _Plan:
    """What the producer will do, decided up front from the seed."""

    bodies: dict[str, bytes]
    early_retries: list[str]
    late_retries: list[str]
    crash: set[str]
    lock_expiry: set[str]
    mismatches: dict[str, bytes]
    poison: list[tuple[str, OutgoingMessage]]
    lifecycles: LifecycleMix = field(default_factory=LifecycleMix)


def plan(options: DemoOptions) -> _Plan:
    rng = random.Random(options.seed)
    start = datetime(2026, 11, 29, 8, 0, tzinfo=timezone(timedelta(hours=1)))
    bodies: dict[str, bytes] = {}
    for index in range(options.orders):
        order_id = f"ord-{options.seed}-{index:05d}"
        placed = start + timedelta(seconds=17 * index)
        bodies[order_id] = json.dumps(random_order(rng, order_id, placed)).encode()
    ids = list(bodies)

    def pick(rate: float) -> list[str]:
        return [order_id for order_id in ids if rng.random() < rate]

    retried = pick(options.duplicate_rate)
    late = {order_id for order_id in retried if rng.random() < 0.25}
    lifecycles = mix(bodies, options.lifecycle_rate, options.seed)
    mismatches: dict[str, bytes] = {}
    # Not for an id that also has a late retry: both are sent a day later, and the broker's
    # duplicate detection would (rightly) drop the second one. Nor for an order with a
    # lifecycle: created by a change that came first, its other OrderPlaced would be stale.
    for order_id in (
        i for i in pick(options.mismatch_rate) if i not in late and i not in lifecycles.histories
    ):
        changed = json.loads(bodies[order_id])
        changed["lines"][0]["quantity"] += 1
        mismatches[order_id] = json.dumps(changed).encode()
    poison: list[tuple[str, OutgoingMessage]] = []
    kinds = list(POISON_KINDS)
    for number in range(round(options.orders * options.poison_rate)):
        kind = kinds[number % len(kinds)]
        poison.append((kind, _poison(kind, f"bad-{options.seed}-{number:04d}", rng, start)))
    changes = sorted(lifecycles.message_ids)
    trouble = random.Random(f"{options.seed}-lifecycle-trouble")
    return _Plan(
        bodies=bodies,
        early_retries=[order_id for order_id in retried if order_id not in late],
        late_retries=sorted(late),
        crash=set(pick(options.crash_rate))
        | {i for i in changes if trouble.random() < options.crash_rate},
        lock_expiry=set(pick(options.lock_expiry_rate))
        | {i for i in changes if trouble.random() < options.lock_expiry_rate},
        mismatches=mismatches,
        poison=poison,
        lifecycles=lifecycles,
    )


def _poison(kind: str, message_id: str, rng: random.Random, start: datetime) -> OutgoingMessage:
    valid = random_order(rng, message_id, start)
    if kind == "no-message-id":
        return OutgoingMessage(message_id=None, body=json.dumps(valid).encode())
    if kind == "not-json":
        return OutgoingMessage(message_id=message_id, body=b"<order id='" + message_id.encode())
    if kind == "schema":
        valid["lines"] = []
    elif kind == "version":
        valid["schemaVersion"] = 2
    elif kind == "id-mismatch":
        return OutgoingMessage(message_id=message_id + "-x", body=json.dumps(valid).encode())
    elif kind == "too-large":
        valid["notes"] = "x" * MAX_BODY_BYTES
    return OutgoingMessage(message_id=message_id, body=json.dumps(valid).encode())


class _OutcomeLog(logging.Handler):
    """Counts the consumer's own structured log records: the telemetry an operator sees."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.outcomes: Counter[str] = Counter()
        self.settlement_failures = 0
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "settlement_error"):
            self.settlement_failures += 1
        elif hasattr(record, "attempt_outcome"):
            self.retries += 1
        elif isinstance(getattr(record, "outcome", None), str):
            self.outcomes[record.outcome] += 1  # type: ignore[attr-defined]


async def run_demo(options: DemoOptions, console: Console | None = None) -> DemoReport:
    console = console or Console(quiet=options.quiet)
    container_name = f"demo-{options.seed}-{uuid.uuid4().hex[:8]}"
    handler = _OutcomeLog()
    consumer_logger = logging.getLogger("orders.consumer")
    consumer_logger.addHandler(handler)
    consumer_logger.setLevel(logging.INFO)
    consumer_logger.propagate = False  # the summary tells the story; no log spam on the console
    relay_logger = logging.getLogger("orders.relay")
    relay_logger.propagate = False  # injected send failures and crashes: counted in the figures
    quiet_relay = logging.NullHandler()
    relay_logger.addHandler(quiet_relay)
    transport = _chaos_transport(options) if options.transport_fault_rate > 0 else None
    try:
        with cosmos_account(options.cosmos_endpoint, options.cosmos_key) as account:
            if account.is_local_server:
                console.print(f"[dim]local Cosmos DB API server at {account.endpoint}[/dim]")
            async with local_world(
                account=account,
                container=container_name,
                outbox=options.outbox,
                verify_tls=options.verify_tls,
                clock=ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
                max_concurrent_calls=options.concurrency,
            ) as world:
                settings = world.settings
                # An independent client sets up the container and reads the outcome: the
                # verdict must not depend on the faults under test.
                async with create_client(settings) as verifier:
                    container = await ensure_container(
                        verifier, settings.cosmos_database, container_name
                    )
                    # The app on the world's clock (an outage is ridden out without real
                    # sleeping), with the chaos faults below its Cosmos SDK, if any.
                    world.compose(
                        transport=transport,
                        jitter=random.Random(options.seed).random,
                        **_chaos_client_options(transport),
                    )
                    tool = functools.partial(
                        run_tool, world=world, account=account, container_name=container_name
                    )
                    report = await _drive(options, world, container, handler, console, tool)
                    if transport is not None:
                        report.figures["injected Cosmos faults"] = sum(
                            r.fired for r in transport.rules
                        )
                        report.figures["throttled transactional batches (207, injected)"] = sum(
                            r.fired for r in transport.rules if r.kind is FaultKind.BATCH_OPERATION
                        )
                    if not account.is_local_server:
                        await verifier.get_database_client(
                            settings.cosmos_database
                        ).delete_container(container_name)
            if options.lifecycle and options.outbox:
                # The lifecycle, a scenario of its own on a world of its own: its own table.
                report.lifecycle = await run_lifecycle(
                    account,
                    seed=options.seed,
                    verify_tls=options.verify_tls,
                    concurrency=options.concurrency,
                )
            return report
    finally:
        consumer_logger.removeHandler(handler)
        consumer_logger.propagate = True
        relay_logger.propagate = True
        relay_logger.removeHandler(quiet_relay)


async def _drive(
    options: DemoOptions,
    world: World,
    container: ContainerProxy,
    log: _OutcomeLog,
    console: Console,
    tool: Tool,
) -> DemoReport:
    started = datetime.now(UTC)  # the wall clock: the audit's window is on Cosmos DB's _ts
    the_plan = plan(options)
    queue, settlement, host, clock = world.queue, world.settlement, world.host, world.clock
    # Before any send: a subscription receives only what is sent after its creation.
    world.topic.add_subscription(DOWNSTREAM_SUBSCRIPTION)
    # Phase 1: the stream, immediate producer retries, poison.
    lifecycles = the_plan.lifecycles
    for order_id, body in the_plan.bodies.items():
        for message in lifecycles.sends.get(order_id, []):  # a lifecycle, in its permutation
            queue.send(message)
        if order_id not in lifecycles.sends:
            queue.send(OutgoingMessage(order_id, body, correlation_id=f"checkout-{order_id}"))
    for order_id in the_plan.early_retries:
        queue.send(OutgoingMessage(order_id, the_plan.bodies[order_id], correlation_id="retry"))
    for _, message in the_plan.poison:
        queue.send(message)

    troubled: set[str] = set()
    deliveries: Counter[str] = Counter()
    world.topic.add_random_faults(
        random.Random(options.seed * 104_729),
        send_failure_rate=options.send_failure_rate,
        crash_after_send_rate=options.relay_crash_rate,
    )
    world.change_feed.max_items = options.relay_batch
    relay = _RelayRun()

    async def with_trouble(delivery: Delivery, invoke: Callable[[], Awaitable[None]]) -> None:
        message_id = delivery.message.message_id or ""
        deliveries[message_id] += 1
        if delivery.delivery_count == 1 and message_id not in troubled:
            if message_id in the_plan.crash:
                troubled.add(message_id)
                settlement.servicer.lost_settlements.add(delivery.lock_token)
            elif message_id in the_plan.lock_expiry:
                troubled.add(message_id)
                queue.expire_lock(delivery.lock_token)  # a second delivery starts now
        await invoke()
        progress.update(task, completed=_settled_for_good(queue))

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    with progress:
        accepted = queue.stats.accepted
        task = progress.add_task("phase 1: stream", total=accepted)
        await host.run_until_idle(on_delivery=with_trouble)
        progress.update(task, description="phase 1: relay")
        if options.relay_stall:
            # A stall: the topic disabled (systemic) for a run of sends; the batch is retried on
            # the policy's backoff (5 s doubling to 5 min), nothing skipped, until it is back.
            world.topic.fail_next_sends(
                lambda: MessagingEntityDisabledError(message="injected: topic disabled"),
                times=options.relay_stall,
            )
        await relay.until_idle(world)

        # Phase 2: a day later, outside the duplicate-detection window.
        clock.advance(queue.settings.duplicate_detection_window + timedelta(seconds=1))
        for order_id in the_plan.late_retries:
            queue.send(OutgoingMessage(order_id, the_plan.bodies[order_id], correlation_id="late"))
        for order_id, body in the_plan.mismatches.items():
            queue.send(OutgoingMessage(order_id, body, correlation_id="changed"))
        for message in lifecycles.late:
            queue.send(message)
        progress.update(task, description="phase 2: a day later", total=queue.stats.accepted)
        await host.run_until_idle(on_delivery=with_trouble)
        progress.update(task, completed=_settled_for_good(queue))
        progress.update(task, description="phase 2: relay")
        await relay.until_idle(world)

        watchdog: _WatchdogRun | None = None
        if options.outbox and options.skipped_orders:
            progress.update(task, description="phase 3: skipped by the change feed")
            extra = extra_orders(options, "w", options.skipped_orders)
            the_plan.bodies.update(extra)
            for order_id, body in extra.items():
                queue.send(OutgoingMessage(order_id, body, correlation_id=f"checkout-{order_id}"))
            progress.update(task, total=queue.stats.accepted)
            await host.run_until_idle(on_delivery=with_trouble)
            watchdog = _WatchdogRun(set(extra))
            await watchdog.run(world, container, relay)

        parked: _ParkedRun | None = None
        if options.outbox and options.parked_events:
            progress.update(task, description="phase 4: refused, parked, republished")
            extra = extra_orders(options, "p", options.parked_events)
            the_plan.bodies.update(extra)
            for order_id, body in extra.items():
                queue.send(OutgoingMessage(order_id, body, correlation_id=f"checkout-{order_id}"))
            progress.update(task, total=queue.stats.accepted)
            await host.run_until_idle(on_delivery=with_trouble)
            parked = _ParkedRun(set(extra))
            await parked.run(world, container, relay, tool)

    phases = [phase.check() for phase in (watchdog, parked) if phase is not None]
    report = await _report(the_plan, world, log, options, phases, tool, started)
    report.figures.update(relay.figures(world))
    if watchdog is not None:
        report.figures.update(watchdog.figures())
    if parked is not None:
        # The topic's refused sends, split: phase 4's own figure, the rest the relay trouble's.
        report.figures[REFUSED_SENDS] -= parked.refused_sends
        report.figures.update(parked.figures())
        report.tool_runs.update(parked.tool_runs())
    report.deliveries_per_message = Counter(
        count for message_id, count in deliveries.items() if message_id
    )
    if options.dead_letters.strip():
        report.tool_runs["requested"] = tool(shlex.split(options.dead_letters))
    report.tool_runs["audit"] = tool(audit_arguments(started))  # as an operator runs it, last
    return report


def extra_orders(options: DemoOptions, tag: str, count: int) -> dict[str, bytes]:
    """A later phase's orders (``ord-<seed>-<tag><n>``), from an RNG of their own (the plan of
    phases 1 and 2 is unchanged)."""
    rng = random.Random(f"{options.seed}-{tag}")
    placed = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
    return {
        f"ord-{options.seed}-{tag}{index:03d}": json.dumps(
            random_order(rng, f"ord-{options.seed}-{tag}{index:03d}", placed)
        ).encode()
        for index in range(count)
    }


@dataclass
class _WatchdogRun:
    """Phase 3: the change feed restarted "from now" skips the new orders' events; the outbox
    watchdog's timer (every 5 minutes, on the manual clock) publishes them."""

    order_ids: set[str]
    skipped: int = 0  # pending outbox documents the change feed never delivered
    ticks: int = 0
    failed_ticks: int = 0  # a refused send or a crash: the next occurrence retries
    left_pending: int = 0

    async def run(self, world: World, container: ContainerProxy, relay: _RelayRun) -> None:
        world.recreate_leases(start_from_beginning=False)  # the lease store, started from now
        await relay.until_idle(world)
        self.skipped = len(await self._pending(container))
        age = WatchdogSettings.from_env(world.env).min_age_s
        world.clock.advance(timedelta(seconds=age + 1))
        for _ in range(50):  # every 5 minutes until nothing is left (refused sends, crashes)
            if not await self._pending(container):
                break
            self.ticks += 1
            try:
                succeeded = (await world.watchdog.tick()).succeeded
            except WorkerCrashed:
                succeeded = False  # died between the send and the mark: the next run marks
            self.failed_ticks += 0 if succeeded else 1
            world.clock.advance(timedelta(minutes=5))
        await relay.until_idle(world)  # the watchdog's marks come back as changes: ignored
        self.left_pending = len(await self._pending(container))

    async def _pending(self, container: ContainerProxy) -> list[str]:
        # Filtered in the query: a page of pending documents, not the whole container (a scan of
        # every document per watchdog run would dominate a chaos run of 10,000 orders).
        pending = container.query_items(
            f"SELECT c.{F.ORDER_ID} FROM c WHERE c.{F.TYPE} = @type AND c.{F.STATUS} = @pending",
            parameters=[
                {"name": "@type", "value": OUTBOX_TYPE},
                {"name": "@pending", "value": STATUS_PENDING},
            ],
        )
        return [d[F.ORDER_ID] async for d in pending if d.get(F.ORDER_ID) in self.order_ids]

    def figures(self) -> dict[str, int]:
        return {
            "events skipped by the change feed (lease from now)": self.skipped,
            "watchdog runs (timer, through the worker)": self.ticks,
            "watchdog runs failed (retried at the next)": self.failed_ticks,
        }

    def check(self) -> Invariant:
        """The phase's claim: the change feed skipped every one of its events (else it showed
        nothing), and the watchdog's runs left none of them pending."""
        return Invariant(
            "every event the change feed skipped published by the watchdog",
            self.skipped == len(self.order_ids) and self.left_pending == 0,
            [],
            f"{self.skipped} skipped, {self.left_pending} still pending after "
            f"{self.ticks} watchdog run(s)",
        )


def _refusal() -> BaseException:
    """What the topic answers in phase 4: an AMQP condition the SDK neither retries nor maps to
    a specific error, ``amqp:not-allowed`` (a plain ``ServiceBusError``:
    azure/servicebus/_transport/_pyamqp_transport.py:154 and :1156; not retryable, being in
    ``RetryPolicy.no_retry``: _pyamqp/error.py:105 and _pyamqp_transport.py:1164-1165). The
    relay's publisher leaves it unclassified (``shared.adapters.servicebus_out.translate``), so the
    relay retries the batch ``park_after_attempts`` times, then parks it (shared.relay.core)."""
    return ServiceBusError(message="injected: amqp:not-allowed")


@dataclass
class _ParkedRun:
    """Phase 4: the topic refuses every send until the cause is fixed; the relay parks the
    phase's events (``RetriesExhausted``). The operator lists them and republishes them with
    ``python -m ops parked``; the change feed delivers the new version and the relay publishes
    it (the flow's invariants then check it was, once)."""

    order_ids: set[str]
    parked: dict[str, str] = field(default_factory=dict)  # order id -> parkedReason
    refused_sends: int = 0
    listing: ToolRun | None = None
    republishing: ToolRun | None = None

    async def run(
        self, world: World, container: ContainerProxy, relay: _RelayRun, tool: Tool
    ) -> None:
        topic = world.topic
        topic.heal()  # phases 1-3's random relay trouble ends: this phase's is one refusal
        refused_before = topic.stats.failed_sends
        topic.fail_next_sends(_refusal, times=REFUSED_SENDS_BOUND)
        await relay.until_idle(world)  # retried on the policy's backoff, then parked
        self.refused_sends = topic.stats.failed_sends - refused_before
        topic.heal()  # the cause fixed
        found = container.query_items(
            f"SELECT c.{F.ORDER_ID}, c.{F.PARKED_REASON} FROM c"
            f" WHERE c.{F.TYPE} = @type AND c.{F.STATUS} = @parked",
            parameters=[
                {"name": "@type", "value": OUTBOX_TYPE},
                {"name": "@parked", "value": STATUS_PARKED},
            ],
        )
        self.parked = {d[F.ORDER_ID]: str(d.get(F.PARKED_REASON)) async for d in found}
        self.listing = tool(["parked", "list"])
        self.republishing = tool(["parked", "republish", "--reason", PARKED_RETRIES_EXHAUSTED])
        await relay.until_idle(world)  # the republished version, published

    def tool_runs(self) -> dict[str, ToolRun]:
        runs = {"parked list": self.listing, "parked republish": self.republishing}
        return {name: run for name, run in runs.items() if run is not None}

    def figures(self) -> dict[str, int]:
        return {
            "topic sends refused (phase 4, until the fix)": self.refused_sends,
            "events parked by the relay (RetriesExhausted)": sum(
                reason == PARKED_RETRIES_EXHAUSTED for reason in self.parked.values()
            ),
        }

    def check(self) -> Invariant:
        """The phase's claim: exactly its events were parked, for their exhausted retries, and
        the tool listed each and republished each (exit 0: every one done)."""
        wanted = sorted(self.order_ids)
        listing, republishing = self.listing, self.republishing
        problems = {
            "not parked RetriesExhausted": [
                i for i in wanted if self.parked.get(i) != PARKED_RETRIES_EXHAUSTED
            ],
            "parked, not of this phase": sorted(set(self.parked) - self.order_ids),
            "not listed": [i for i in wanted if listing is None or i not in listing.output],
            "not republished": [
                i
                for i in wanted
                if republishing is None
                or republishing.exit_status != 0
                or i not in republishing.output
            ],
        }
        offending = sorted({i for ids in problems.values() for i in ids})
        return Invariant(
            "every event the topic refused parked, listed and republished with python -m ops",
            not offending,
            offending,
            "; ".join(f"{len(ids)} {what} {ids[:3]}" for what, ids in problems.items() if ids)
            or f"{len(self.parked)} parked, listed and republished",
        )


@dataclass
class _RelayRun:
    """The host's Cosmos DB trigger run to idle, restarted after each injected crash."""

    crashes: int = 0
    invocations: int = 0
    failed_invocations: int = 0

    async def until_idle(self, world: World) -> None:
        feed = world.change_feed
        while True:
            try:
                await feed.drain()
                break
            except WorkerCrashed:
                self.crashes += 1
                self._count(feed)
                feed = world.restart_change_feed()  # same lease: from the last checkpoint
        self._count(feed)
        world.restart_change_feed()  # fresh stats for the next phase, same lease

    def _count(self, feed: Any) -> None:
        self.invocations += feed.stats.invocations
        self.failed_invocations += feed.stats.failed_invocations

    def figures(self, world: World) -> dict[str, int]:
        topic = world.topic.stats
        return {
            "relay invocations": self.invocations,
            "relay invocations failed (retried)": self.failed_invocations,
            "relay crashes between send and mark": self.crashes,
            REFUSED_SENDS: topic.failed_sends,
            "events dropped by topic duplicate detection": topic.dropped_duplicates,
        }


async def _documents(container: ContainerProxy) -> list[dict[str, Any]]:
    return [item async for item in container.query_items("SELECT * FROM c")]


def _chaos_client_options(transport: FaultInjectingTransport | None) -> dict[str, Any]:
    """The client's own settings: the slow-response faults carry the read timeout they outlive
    (``FaultRule.read_timeout_s``), so no other request runs on a short one."""
    return {}


def _chaos_transport(options: DemoOptions) -> FaultInjectingTransport:
    """Faults below the real SDK, each on its share of the requests, from one seeded RNG:
    single requests answered 429/503/408, slow or reset, and transactional batches answered
    207 with one operation throttled (429 with its retry-after, 449, 503: the SDK's throttling
    retries never see these)."""
    transport = FaultInjectingTransport(connection_verify=False)
    rng = random.Random(options.seed * 7919)
    share = options.transport_fault_rate / 8
    for rule in (
        FaultRule(FaultKind.STATUS, status=429, headers={"x-ms-retry-after-ms": "1"}, **WRITES),
        FaultRule(FaultKind.STATUS, status=503, **WRITES),
        # Committed, then slower than a 0.25 s read timeout: unheard.
        FaultRule(FaultKind.SLOW_RESPONSE, delay_s=1.0, read_timeout_s=0.25, **WRITES),
        FaultRule(FaultKind.CONNECTION_ERROR, **WRITES),
        FaultRule(FaultKind.STATUS, status=408, **POINT_READS),
        FaultRule(
            FaultKind.BATCH_OPERATION, status=429, sub_status=3200, retry_after_ms=2000, **BATCHES
        ),
        FaultRule(FaultKind.BATCH_OPERATION, status=449, failing_index=-1, **BATCHES),
        FaultRule(FaultKind.BATCH_OPERATION, status=503, failing_index=-1, **BATCHES),
    ):
        rule.times, rule.probability, rule.rng = None, share, rng
        transport.add(rule)
    return transport


def _settled_for_good(queue: PeekLockQueue) -> int:
    stats = queue.stats
    return stats.completed + stats.dead_lettered


async def _report(
    the_plan: _Plan,
    world: World,
    log: _OutcomeLog,
    options: DemoOptions,
    phases: Sequence[Invariant],
    tool: Tool,
    started: datetime,
) -> DemoReport:
    queue, host = world.queue, world.host
    data = demo_data(
        # Through the trigger's client (its read timeout is the local change feed's, 120 s): a
        # full chaos container is read in one scan of the local server, longer than the app's
        # 15 s read budget.
        await _documents(world.change_feed.container),
        queue.dead_letters,
        world.topic.delivered(DOWNSTREAM_SUBSCRIPTION),  # what downstream receives
    )
    stats = queue.stats
    report = DemoReport(outcomes=log.outcomes)
    stored = Counter(str(d.get("orderId")) for d in data.orders)
    report.figures = {
        "sent": stats.sent,  # every send, including those duplicate detection dropped
        "dropped by duplicate detection": stats.dropped_duplicates,
        "deliveries": stats.deliveries,
        "processed": log.outcomes["processed"],
        "duplicates": log.outcomes["duplicate"],
        "dead-lettered": stats.dead_lettered,
        "abandoned": stats.abandoned,
        "settlements lost (crash / lock expiry)": log.settlement_failures,
        "in-delivery retries": log.retries,
        "order documents": len(data.orders),
        "outbox documents": len(data.outbox),
        "duplicate order documents": sum(stored.values()) - len(stored),
        "OrderAccepted delivered to the subscription": sum(
            e.event_type in (None, ORDER_ACCEPTED_EVENT_TYPE) for e in data.events or []
        ),
        "OrderAmended and OrderCancelled delivered": sum(
            e.event_type in (ORDER_AMENDED, ORDER_CANCELLED) for e in data.events or []
        ),
        "stale": log.outcomes["stale"],
    }
    report.dead_lettered_by_reason = Counter(letter.reason for letter in data.dead_letters)
    expected = Expected(
        request_hashes={
            order_id: parse_order(body, order_id).request_hash
            for order_id, body in the_plan.bodies.items()
        },
        mismatches=set(the_plan.mismatches),
        poison=[(message.message_id, POISON_KINDS[kind]) for kind, message in the_plan.poison],
        lifecycle_orders=set(the_plan.lifecycles.histories),
        lifecycle_messages=the_plan.lifecycles.message_ids,
    )
    flow = flow_invariants(data, now=world.clock.now(), outbox_enabled=options.outbox)
    demo = expectations(data, expected)
    if the_plan.lifecycles.histories:  # make chaos: the lifecycles it mixed in converged
        highest = the_plan.lifecycles.highest
        demo += [converged(data.orders, highest), published_in_order(data.events or [], highest)]
    report.figures["lost valid orders"] = len(
        next(i for i in demo if i.name == NO_ORDER_LOST).offending
    )
    # The operator's audit over the same data, now: it must say what the table says.
    report.operator_audit = tool([*audit_arguments(started), "--json"])
    agreement = operator_audit_agrees(flow, data, report.operator_audit)
    host_stats = host.stats
    report.rows = [
        *(Row(invariant, AUDIT) for invariant in flow),
        *([] if options.outbox else [Row(outbox_off(data), DEMO)]),
        *(Row(invariant, DEMO) for invariant in [*demo, *phases, agreement]),
        *(
            Row(invariant, STAND_IN)
            for invariant in stand_in_checks(
                active_messages=queue.active_count(),
                failed_invocations=host_stats.failed_invocations,
                errors=host_stats.errors,
            )
        ),
    ]
    return report


def print_report(report: DemoReport, console: Console) -> None:
    figures = Table(title="Idempotent consumer demo", show_header=False)
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    for name, value in report.figures.items():
        figures.add_row(name, str(value))
    for reason, count in sorted(report.dead_lettered_by_reason.items()):
        figures.add_row(f"  dead-lettered: {reason}", str(count))
    console.print(figures)
    if report.deliveries_per_message:
        spread = Table(title="Deliveries per message")
        spread.add_column("deliveries", justify="right")
        spread.add_column("messages", justify="right")
        for deliveries, messages in sorted(report.deliveries_per_message.items()):
            spread.add_row(str(deliveries), str(messages))
        console.print(spread)
    checks = Table(
        title="Invariants",
        caption="checked by: audit = ops.audit, what python -m ops audit checks on a live "
        "deployment; demo = what only the demo knows (it sent every message), with ops.audit's "
        "functions; stand-in = the stand-in's own figures",
    )
    checks.add_column("invariant")
    checks.add_column("result")
    checks.add_column("checked by")
    checks.add_column("detail")
    for row in report.rows:
        check = row.invariant
        verdict = "[green]PASS[/green]" if check.passed else "[red]FAIL[/red]"
        checks.add_row(check.name, verdict, row.checked_by, check.detail)
    console.print(checks)
    if report.lifecycle is not None:
        console.rule(
            "The order lifecycle: a scenario of its own, on a queue, topic and container of its own"
        )
        print_lifecycle(report.lifecycle, console)
    if report.tool_runs:
        console.rule("python -m ops, over this demo's own queue, topic and container")
    for run in report.tool_runs.values():
        console.print(
            f"[bold]$ {escape(run.command)}[/bold]  [dim](exit {run.exit_status})[/dim]",
            highlight=False,
        )
        console.out(run.output.rstrip(), highlight=False)
    if report.tool_runs:
        console.print(
            '[dim]Another command before the audit: --dead-letters "show <MessageId>" (a '
            'HashMismatch shows its diff), "resubmit --reason InvalidPayload --dry-run", '
            '"parked show <orderId>", "list --json"; --dead-letters "" skips it.[/dim]'
        )


def main(options: DemoOptions) -> int:
    logging.basicConfig(level=logging.ERROR)  # the summary tells the story, not library logs
    console = Console()
    report = asyncio.run(run_demo(options, console))
    print_report(report, console)
    return 0 if report.passed else 1
