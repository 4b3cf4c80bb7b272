"""``make demo`` and ``make chaos``: the runner that composes the scenarios on one local world,
each with its table of invariants; exit status 1 if any row fails.

The world (``local.assembly.world``) runs the real app through Microsoft's worker runtime (its
decoding of the host's bytes, the real Cosmos SDK, the real settlement client), on a
``ManualClock``: lock expiry, backoff and "a day later" happen by advancing it, never by
sleeping. The phases, in order:

1. the orders (``local.scenarios.orders``): the seeded producer's stream with its trouble, then
   the relay (``local.scenarios.relay``) publishing to the ``order-events`` topic through its own
   trouble (crashes between the send and the mark, refused sends; ``--relay-stall`` in ``make
   chaos``), then the events' downstream consumers: the inventory
   (``local.scenarios.inventory``) reserving stock and the payments
   (``local.scenarios.payments``) moving money at the provider stand-in;
2. a day later, outside the duplicate-detection window: late retries, mismatches, the
   lifecycles' late copies; the relay, the downstream consumers;
3. the relay's edge: orders accepted while its lease store is empty, their events left to the
   outbox watchdog (its timer, through the worker);
4. the operator's part: orders whose events the topic refuses until fixed, parked by the relay,
   listed and republished with ``python -m ops parked``;
5. the orders API (``local.scenarios.api``, on a world of its own, after the lifecycle's): a
   seeded client places, amends and cancels orders through the HTTP host, retrying each
   Idempotency-Key through lost answers, 409s and 503s, then the consumers run.

Then each table: the orders' (the live audit's invariants over the run's own data, the demo's
expectations, the phases' claims, the stand-in's figures), the inventory's, the payments', and
the order lifecycle's (``local.scenarios.lifecycle``, a scenario on a world of its own), the
orders API's. Last,
the tool over the run's own data (``local.scenarios.tool_runs``): ``--dead-letters`` (``list`` by
default), then ``python -m ops audit --since ...`` as an operator runs it, whose ``--json``
twin, run when the table is, must agree with the table. ``make chaos`` is the same at volume,
with faults below the Cosmos SDK (``local.scenarios.chaos``: answers held past the stores'
deadline among them), lifecycles, bursts on one hot SKU (``local.scenarios.orders``) and a
provider that honours no key for a share of the customers (``local.scenarios.payments``) mixed
in. After the payments' table, each container's logical partitions against the capacity plan's
bound (``local.scenarios.partitions``).

Composes and renders; what each scenario does and checks is its module's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import shlex
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import MessagingEntityDisabledError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from local.assembly.world import World, cosmos_account, local_world
from local.scenarios.api import ApiReport, print_api, run_api
from local.scenarios.chaos import STORE_DEADLINE_S, chaos_transport, late_answer_figures
from local.scenarios.deliveries import OutcomeLog, Trouble, quiet_logs, settled_for_good
from local.scenarios.invariants import Row, demo_data, stand_in_checks
from local.scenarios.inventory import (
    InventoryReport,
    InventoryRun,
    StockPlan,
    inventory_report,
    print_inventory,
    stock_plan,
    wanted_per_sku,
)
from local.scenarios.lifecycle import LifecycleReport, print_lifecycle, run_lifecycle
from local.scenarios.options import DemoOptions
from local.scenarios.orders import (
    DOWNSTREAM_SUBSCRIPTION,
    HOT_SKU,
    Plan,
    extra_orders,
    lost_orders,
    orders_figures,
    orders_rows,
    plan,
    send_a_day_later,
    send_after_stream,
    send_stream,
)
from local.scenarios.partitions import PARTITIONS_CAPTION, partition_rows
from local.scenarios.payments import (
    PROVIDER_TIMEOUT_S,
    PaymentsReport,
    PaymentsRun,
    keyless_settings,
    payments_report,
    print_payments,
)
from local.scenarios.relay import REFUSED_SENDS, ParkedRun, RelayRun, Tool, WatchdogRun
from local.scenarios.tables import figures_table, invariants_table, print_tool_run
from local.scenarios.tool_runs import ToolRun, audit_arguments, run_tool
from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.cosmos_server import ensure_container
from local.standins.faults import FaultKind
from ops.audit import Invariant
from shared.adapters.cosmos_orders import create_client
from shared.payments.consumer import CONSUMER_NAME as PAYMENT_CONSUMER
from shared.stock.consumer import CONSUMER_NAME as STOCK_CONSUMER

ORDERS_CAPTION = (
    "checked by: audit = ops.audit, what python -m ops audit checks on a live deployment; demo = "
    "what only the demo knows (it sent every message), with ops.audit's functions; stand-in = "
    "the stand-in's own figures"
)


@dataclass
class DemoReport:
    figures: dict[str, int] = field(default_factory=dict)
    dead_lettered_by_reason: Counter[str] = field(default_factory=Counter)
    deliveries_per_message: Counter[int] = field(default_factory=Counter)  # deliveries -> ids
    outcomes: Counter[str] = field(default_factory=Counter)
    rows: list[Row] = field(default_factory=list)  # the orders' table of invariants, in order
    # ``python -m ops`` over the demo's data, in the order it ran: "parked list", "parked
    # republish", "requested" (``--dead-letters``), "audit".
    tool_runs: dict[str, ToolRun] = field(default_factory=dict)
    operator_audit: ToolRun | None = None  # ``audit ... --json``, run when the table is read
    inventory: InventoryReport | None = None  # the inventory's, with its own table
    payments: PaymentsReport | None = None  # the payments', with its own table
    lifecycle: LifecycleReport | None = None  # the lifecycle scenario's, with its own table
    api: ApiReport | None = None  # the orders API's, with its own table
    # Each container's largest logical partition within its capacity-plan bound.
    partitions: list[Row] = field(default_factory=list)

    @property
    def checks(self) -> list[Invariant]:
        inventory = self.inventory.checks if self.inventory is not None else []
        payments = self.payments.checks if self.payments is not None else []
        lifecycle = self.lifecycle.checks if self.lifecycle is not None else []
        api = self.api.checks if self.api is not None else []
        partitions = [row.invariant for row in self.partitions]
        return [
            *(row.invariant for row in self.rows),
            *inventory,
            *payments,
            *partitions,
            *lifecycle,
            *api,
        ]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


async def run_demo(options: DemoOptions, console: Console | None = None) -> DemoReport:
    console = console or Console(quiet=options.quiet)
    logs = [OutcomeLog(), OutcomeLog(STOCK_CONSUMER), OutcomeLog(PAYMENT_CONSUMER)]
    with quiet_logs(*logs):
        return await _run(options, console, *logs)


@dataclass
class _Downstream:
    """The order events' consumers the run drives (each None when skipped): run to idle after
    each relay phase, their telemetry on readers their tables read."""

    inventory: InventoryRun | None
    payments: PaymentsRun | None

    async def until_idle(self) -> None:
        """Both at once, as the host runs each subscription's trigger on its own."""
        await asyncio.gather(
            *(run.until_idle() for run in (self.inventory, self.payments) if run is not None)
        )

    def telemetry(self) -> dict[str, Any]:
        """``World.compose``'s choices: each consumer's telemetry."""
        chosen: dict[str, Any] = {}
        if self.inventory is not None:
            chosen["stock_telemetry"] = self.inventory.telemetry()
        if self.payments is not None:
            chosen["payment_telemetry"] = self.payments.telemetry()
        return chosen


async def _run(
    options: DemoOptions,
    console: Console,
    log: OutcomeLog,
    stock_log: OutcomeLog,
    payment_log: OutcomeLog,
) -> DemoReport:
    suffix = f"{options.seed}-{uuid.uuid4().hex[:8]}"
    container_name = f"demo-{suffix}"
    own = {"INVENTORY_CONTAINER": f"demo-inventory-{suffix}"}
    own["PAYMENTS_CONTAINER"] = f"demo-payments-{suffix}"
    own["PAYMENT_PROVIDER_TIMEOUT_SECONDS"] = str(PROVIDER_TIMEOUT_S)
    own.update(keyless_settings(options))
    the_plan = plan(options)
    # The consumers' own containers: make chaos holds some of their answers past the deadline.
    consumer_containers = {
        "orders": container_name,
        "inventory": own["INVENTORY_CONTAINER"],
        "payments": own["PAYMENTS_CONTAINER"],
    }
    transport = (
        chaos_transport(options, list(consumer_containers.values()))
        if options.transport_fault_rate > 0
        else None
    )
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
            env=own,
        ) as world:
            downstream = _Downstream(
                InventoryRun.on(
                    world, options, stock_log, the_plan.lifecycles.accepted_then_changed
                )
                if options.inventory and options.outbox
                else None,
                PaymentsRun.on(world, options, payment_log, the_plan.bodies)
                if options.payments and options.outbox
                else None,
            )
            settings = world.settings
            # An independent client sets up the container and reads the outcome: the verdict
            # must not depend on the faults under test.
            async with create_client(settings) as verifier:
                container = await ensure_container(
                    verifier, settings.cosmos_database, container_name
                )
                # The app on the world's clock (an outage is ridden out without real sleeping),
                # with the chaos faults below its Cosmos SDK, if any; the downstream consumers'
                # telemetry on readers their tables read.
                world.compose(
                    transport=transport,
                    jitter=random.Random(options.seed).random,
                    store_deadline_s=STORE_DEADLINE_S if transport is not None else None,
                    **downstream.telemetry(),
                )
                tool = functools.partial(
                    run_tool, world=world, account=account, container_name=container_name
                )
                report = await _drive(
                    options, the_plan, world, container, log, downstream, console, tool
                )
                if transport is not None:
                    report.figures["injected Cosmos faults"] = sum(r.fired for r in transport.rules)
                    report.figures["throttled transactional batches (207, injected)"] = sum(
                        r.fired for r in transport.rules if r.kind is FaultKind.BATCH_OPERATION
                    )
                    report.figures.update(late_answer_figures(transport, consumer_containers))
                if not account.is_local_server:
                    database = verifier.get_database_client(settings.cosmos_database)
                    for name in consumer_containers.values():
                        await database.delete_container(name)
        if options.lifecycle and options.outbox:
            # The lifecycle, a scenario of its own on a world of its own: its own table.
            report.lifecycle = await run_lifecycle(
                account,
                seed=options.seed,
                verify_tls=options.verify_tls,
                concurrency=options.concurrency,
            )
        if options.api and options.outbox:
            # The orders API, a client's retries through the HTTP host: a world of its own.
            report.api = await run_api(account, options)
    return report


def _stock(the_plan: Plan, later: list[dict[str, bytes]], seed: int) -> StockPlan:
    """The stock for every SKU any version of the plan's orders, and the later phases', wants."""
    changes = [step.body for steps in the_plan.lifecycles.histories.values() for step in steps]
    bodies = [*the_plan.bodies.values(), *(b for orders in later for b in orders.values())]
    return stock_plan(wanted_per_sku([*bodies, *changes]), seed)


async def _drive(
    options: DemoOptions,
    the_plan: Plan,
    world: World,
    container: ContainerProxy,
    log: OutcomeLog,
    downstream: _Downstream,
    console: Console,
    tool: Tool,
) -> DemoReport:
    started = datetime.now(UTC)  # the wall clock: the audit's window is on Cosmos DB's _ts
    inventory, payments = downstream.inventory, downstream.payments
    queue, clock = world.queue, world.clock
    # Later phases' orders, from RNGs of their own: known now, so the stock covers them too.
    watchdog_orders = extra_orders(options, "w", options.skipped_orders) if options.outbox else {}
    parked_orders = extra_orders(options, "p", options.parked_events) if options.outbox else {}
    stock: StockPlan | None = None
    if inventory is not None:
        stock = _stock(the_plan, [watchdog_orders, parked_orders], options.seed)
        await inventory.seed(stock)
    # Before any send: a subscription receives only what is sent after its creation.
    world.topic.add_subscription(DOWNSTREAM_SUBSCRIPTION)
    send_stream(the_plan, world.queue)
    world.topic.add_random_faults(
        random.Random(options.seed * 104_729),
        send_failure_rate=options.send_failure_rate,
        crash_after_send_rate=options.relay_crash_rate,
    )
    world.change_feed.max_items = options.relay_batch
    relay = RelayRun()

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = progress.add_task("phase 1: stream", total=queue.stats.accepted)
    trouble = Trouble(
        queue,
        world.settlement,
        crash=the_plan.crash.__contains__,
        lock_expiry=the_plan.lock_expiry.__contains__,
        on_settled=lambda: progress.update(task, completed=settled_for_good(queue)),
    )

    async def accept(description: str, orders: dict[str, bytes] | None = None) -> None:
        progress.update(task, description=description)
        for order_id, body in (orders or {}).items():
            the_plan.bodies[order_id] = body
            queue.send(OutgoingMessage(order_id, body, correlation_id=f"checkout-{order_id}"))
        progress.update(task, total=queue.stats.accepted)
        await world.host.run_until_idle(on_delivery=trouble)
        progress.update(task, completed=settled_for_good(queue))

    with progress:
        await accept("phase 1: stream")
        if send_after_stream(the_plan, world.queue):  # two orders' order of arrival, pinned
            await accept("phase 1: held back until the stream was consumed")
        progress.update(task, description="phase 1: relay")
        if options.relay_stall:
            # A stall: the topic disabled (systemic) for a run of sends; the batch is retried on
            # the policy's backoff (5 s doubling to 5 min), nothing skipped, until it is back.
            world.topic.fail_next_sends(
                lambda: MessagingEntityDisabledError(message="injected: topic disabled"),
                times=options.relay_stall,
            )
        await relay.until_idle(world)
        await downstream.until_idle()

        # Phase 2: a day later, outside the duplicate-detection window.
        clock.advance(queue.settings.duplicate_detection_window + timedelta(seconds=1))
        send_a_day_later(the_plan, world.queue)
        await accept("phase 2: a day later")
        progress.update(task, description="phase 2: relay")
        await relay.until_idle(world)
        await downstream.until_idle()

        watchdog: WatchdogRun | None = None
        if watchdog_orders:
            await accept("phase 3: skipped by the change feed", watchdog_orders)
            watchdog = WatchdogRun(set(watchdog_orders))
            await watchdog.run(world, container, relay)
            await downstream.until_idle()

        parked: ParkedRun | None = None
        if parked_orders:
            await accept("phase 4: refused, parked, republished", parked_orders)
            parked = ParkedRun(set(parked_orders))
            await parked.run(world, container, relay, tool)
            await downstream.until_idle()

    phases = [phase.check() for phase in (watchdog, parked) if phase is not None]
    report = await _orders_report(the_plan, world, log, options, phases, tool, started)
    report.figures.update(relay.figures(world))
    if watchdog is not None:
        report.figures.update(watchdog.figures())
    if parked is not None:
        # The topic's refused sends, split: phase 4's own figure, the rest the relay trouble's.
        report.figures[REFUSED_SENDS] -= parked.refused_sends
        report.figures.update(parked.figures())
        report.tool_runs.update(parked.tool_runs())
    report.deliveries_per_message = trouble.spread()
    # The orders' highest versions, what the downstream consumers' tables are checked against.
    stored = await _documents(world.change_feed.container)
    orders = [d for d in stored if d.get("type") == "order"]
    if inventory is not None and stock is not None:
        report.inventory = await inventory_report(
            inventory,
            stock,
            orders,
            tool if options.stock_audit else None,
            # Each order one version and nothing failing below the SDK: the shortfall counted
            # once is the shortfall backordered (local.scenarios.inventory).
            exact_shortfall=not the_plan.lifecycles.histories and not options.transport_fault_rate,
        )
        if the_plan.hot_sku_orders:
            report.inventory.figures[f"orders in bursts on the hot SKU {HOT_SKU}"] = len(
                the_plan.hot_sku_orders
            )
    if payments is not None:
        report.payments = await payments_report(
            payments,
            orders,
            # Each order one version: each declined card counted once.
            exact=not the_plan.lifecycles.histories,
        )
    # Each container's largest logical partition against the capacity plan's bound.
    report.partitions = await partition_rows(
        orders,
        stored,
        world.inventory_documents if inventory is not None else None,
        world.payments_documents if payments is not None else None,
        the_plan.lifecycles.change_messages(),
    )
    if options.dead_letters.strip():
        report.tool_runs["requested"] = tool(shlex.split(options.dead_letters))
    report.tool_runs["audit"] = tool(audit_arguments(started))  # as an operator runs it, last
    return report


async def _documents(container: ContainerProxy) -> list[dict[str, Any]]:
    return [item async for item in container.query_items("SELECT * FROM c")]


async def _orders_report(
    the_plan: Plan,
    world: World,
    log: OutcomeLog,
    options: DemoOptions,
    phases: list[Invariant],
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
    report = DemoReport(outcomes=log.outcomes, figures=orders_figures(data, queue, log))
    report.dead_lettered_by_reason = Counter(letter.reason for letter in data.dead_letters)
    # The operator's audit over the same data, now: it must say what the table says.
    report.operator_audit = tool([*audit_arguments(started), "--json"])
    report.rows = orders_rows(
        the_plan,
        data,
        now=world.clock.now(),
        outbox_enabled=options.outbox,
        phases=phases,
        operator_audit=report.operator_audit,
        stand_in=stand_in_checks(
            active_messages=queue.active_count(),
            failed_invocations=host.stats.failed_invocations,
            errors=host.stats.errors,
        ),
    )
    report.figures["lost valid orders"] = lost_orders(report.rows)
    return report


def print_report(report: DemoReport, console: Console) -> None:
    reasons = sorted(report.dead_lettered_by_reason.items())
    dead_lettered = [(f"  dead-lettered: {reason}", count) for reason, count in reasons]
    console.print(figures_table("Idempotent consumer demo", report.figures, dead_lettered))
    if report.deliveries_per_message:
        spread = Table(title="Deliveries per message")
        spread.add_column("deliveries", justify="right")
        spread.add_column("messages", justify="right")
        for deliveries, messages in sorted(report.deliveries_per_message.items()):
            spread.add_row(str(deliveries), str(messages))
        console.print(spread)
    console.print(invariants_table("Invariants", report.rows, ORDERS_CAPTION))
    if report.inventory is not None:
        console.rule("The inventory: reserve_stock on the same orders' events")
        print_inventory(report.inventory, console)
    if report.payments is not None:
        console.rule("The payments: capture_payment on the same orders' events")
        print_payments(report.payments, console)
    if report.partitions:
        console.print(invariants_table("Logical partitions", report.partitions, PARTITIONS_CAPTION))
    if report.lifecycle is not None:
        console.rule(
            "The order lifecycle: a scenario of its own, on a queue, topic and container of its own"
        )
        print_lifecycle(report.lifecycle, console)
    if report.api is not None:
        console.rule(
            "The orders API: a client places, amends and cancels through the HTTP host, "
            "retrying each Idempotency-Key"
        )
        print_api(report.api, console)
    if report.tool_runs:
        console.rule("python -m ops, over this demo's own queue, topic and containers")
    for run in report.tool_runs.values():
        print_tool_run(run, console)
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
