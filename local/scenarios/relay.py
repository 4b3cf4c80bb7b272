"""The relay's phases in ``make demo`` and ``make chaos``: the host's Cosmos DB trigger run to
idle through the relay's trouble (``RelayRun``), the change feed's edge left to the outbox
watchdog (``WatchdogRun``, phase 3) and the topic's refusal until an operator's fix, its events
parked, listed and republished with ``python -m ops parked`` (``ParkedRun``, phase 4). Each
phase makes one claim, its ``check``: a row of the demo's table.

Drives the world's triggers and reads the orders container; never sends an order (the orders
scenario does, ``local.scenarios.orders``) and never imports the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import ServiceBusError

from local.assembly.world import World
from local.scenarios.tool_runs import ToolRun
from local.standins.topic import WorkerCrashed
from ops.audit import Invariant
from shared.config import WatchdogSettings
from shared.relay.core import PARKED_RETRIES_EXHAUSTED
from shared.relay.outbox import OUTBOX_TYPE, STATUS_PARKED, STATUS_PENDING
from shared.relay.outbox import OutboxField as F

# Phase 4's refusal lasts until the operator's fix (``heal``); this only bounds it.
REFUSED_SENDS_BOUND = 1_000

REFUSED_SENDS = "topic sends refused (injected: timeouts and the stall)"

Tool = Callable[[Sequence[str]], ToolRun]


@dataclass
class WatchdogRun:
    """Phase 3: the change feed restarted "from now" skips the new orders' events; the outbox
    watchdog's timer (every 5 minutes, on the manual clock) publishes them."""

    order_ids: set[str]
    skipped: int = 0  # pending outbox documents the change feed never delivered
    ticks: int = 0
    failed_ticks: int = 0  # a refused send or a crash: the next occurrence retries
    left_pending: int = 0

    async def run(self, world: World, container: ContainerProxy, relay: RelayRun) -> None:
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
        # every document per watchdog run would dominate a chaos run of thousands of orders).
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
class ParkedRun:
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
        self, world: World, container: ContainerProxy, relay: RelayRun, tool: Tool
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
class RelayRun:
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
