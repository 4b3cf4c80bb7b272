"""Target 8: one run of the outbox watchdog over a backlog, through Microsoft's worker.

What a relay that does not run at all leaves behind: ``stuck`` pending OrderAccepted outbox
documents (10,000 by default), one a millisecond apart, in a container of their own (as the
consumer builds them; without their orders, which the query never reads). The app is composed
on that container with the relay bench's round trips (``bench.latency``: 10 ms per Cosmos DB
document request and per topic send), the clock moved past the watchdog's minimum age, and the
``outbox_watchdog`` timer ticked once through the worker.

Measured at the azure-core transport under the app's Cosmos client (``bench.transport``): every
query request and the documents its response carried. The local server has no request charge,
so what a query *loads* is read there; that equals what it returns only because the index serves
the query's whole filter and order (tests/infra/test_bicep.py holds the policy to the query),
and an aggregate returns one value whatever it loaded: the verdict allows none.

Verdicts: the run's queries load at most 1.1 x the documents it publishes plus one page, with no
aggregate; it publishes as many as its page limit allows (``MAX_PAGES_PER_RUN`` pages of
``OUTBOX_WATCHDOG_MAX_DOCUMENTS``), the oldest first; and that run fits in the schedule's period
(so the capacity it promises, ``WatchdogPolicy.drain_capacity_per_s``, is one it keeps). Reported
beside it: the drain rate against each tier of infra/tiers/ (orders/s): the watchdog is a
backstop for stragglers, not a relay, and a tier whose orders/s exceed its capacity relies on
the "watchdog falling behind" alert when the relay is dead (docs/capacity.md).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import IncomingMessage

from bench.latency import RoundTripTopicSender, RoundTripTransport
from bench.orders import order_bytes
from bench.relay import tier_needs
from bench.standin import StandIn
from local.standins.cosmos_server import ensure_container
from shared.config import WatchdogSettings
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.relay.watchdog import MAX_PAGES_PER_RUN, WatchdogPolicy
from shared.triggers import WATCHDOG_PERIOD_S

LOADED_PER_PUBLISHED = 1.1  # the bound: 1.1 x published + one page
WRITES_IN_FLIGHT = 32


async def _write_backlog(container: ContainerProxy, now: datetime, stuck: int) -> list[str]:
    """``stuck`` pending outbox documents, the first the oldest; the order ids. Only the outbox
    documents, as the consumer builds them: the watchdog's query never reads an order (the
    index skips them in Cosmos DB), and the local server, which has no index, would scan and
    sort them too for every page."""
    prefix = uuid.uuid4().hex[:6]
    ids = [f"wd-{prefix}-{index}" for index in range(stuck)]
    start = now - timedelta(milliseconds=stuck)
    slots = asyncio.Semaphore(WRITES_IN_FLIGHT)

    async def write(index: int, order_id: str) -> None:
        raw = order_bytes(order_id)
        [outbox] = [
            document
            for document in build_documents(
                parse_order(raw, order_id),
                IncomingMessage(order_id, raw, correlation_id=f"corr-{order_id}"),
                outbox_enabled=True,
                accepted_at=start + timedelta(milliseconds=index),
            )
            if document.get("type") == "outbox"
        ]
        async with slots:
            await container.create_item(outbox)

    await asyncio.gather(*(write(index, order_id) for index, order_id in enumerate(ids)))
    return ids


async def measure(
    standin: StandIn,
    *,
    stuck: int = 10_000,
    page_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    world, database = standin.world, standin.settings.cosmos_database
    settings = WatchdogSettings.from_env(world.env)
    page = page_size or settings.max_documents
    policy = WatchdogPolicy(settings.min_age_s, page)
    name = f"watchdog-{uuid.uuid4().hex[:10]}"
    env = {**world.env, "COSMOS_CONTAINER": name, "OUTBOX_WATCHDOG_MAX_DOCUMENTS": str(page)}
    transport = RoundTripTransport(connection_verify=False)
    sender = RoundTripTopicSender(world.topic)
    container = await ensure_container(standin.client, database, name)
    try:
        if progress is not None:
            progress(f"writing {stuck:,} stuck outbox documents")
        ids = await _write_backlog(container, world.clock.now(), stuck)
        world.compose(env=env, transport=transport, topic_sender=sender)
        world.clock.advance(timedelta(seconds=policy.min_age_s))
        accepted = world.topic.stats.accepted
        if progress is not None:
            progress(f"one watchdog run over {stuck:,} stuck events, pages of {page}")
        started = time.perf_counter()
        result = await world.watchdog.tick()
        run_s = time.perf_counter() - started
        published = world.topic.stats.accepted - accepted
        pending = {
            document["orderId"]
            async for document in container.query_items(
                "SELECT c.orderId FROM c WHERE c.type = 'outbox' AND c.status = 'pending'"
            )
        }
    finally:
        world.compose(transport=standin.transport)  # as bench.standin composes the app
        await transport.close()
        await standin.client.get_database_client(database).delete_container(name)
    queries = transport.queries
    loaded = sum(query.documents for query in queries)
    aggregates = sum(query.aggregate for query in queries)
    capacity = page * MAX_PAGES_PER_RUN
    expected = min(stuck, capacity)
    limit = LOADED_PER_PUBLISHED * published + page
    oldest_first = pending == set(ids[expected:])
    drain = policy.drain_capacity_per_s()
    tiers = {
        tier: {"orders_per_s": need["orders_per_s"], "covered": drain >= need["orders_per_s"]}
        for tier, need in tier_needs().items()
    }
    problems = []
    if not result.succeeded:
        problems.append(f"the run failed: {result.error}")
    if published != expected or not oldest_first:
        problems.append(
            f"published {published:,} of the {expected:,} oldest (oldest first: {oldest_first})"
        )
    return {
        "stuck": stuck,
        "page_size": page,
        "max_pages_per_run": MAX_PAGES_PER_RUN,
        "published": published,
        "queries": len(queries),
        "aggregates": aggregates,
        "documents_loaded": loaded,
        "loaded_limit": limit,
        "run_s": run_s,
        # The local server has no index: it scans and sorts the container for every page, which
        # Cosmos DB's composite index does not; the rest of the run is the relay's.
        "query_s": sum(query.elapsed_s for query in queries),
        "run_events_per_s": published / run_s if run_s else 0.0,
        "period_s": WATCHDOG_PERIOD_S,
        "drain_capacity_per_s": drain,
        "tiers": tiers,
        "problems": problems,
        "ok": not problems and not aggregates and loaded <= limit and run_s <= WATCHDOG_PERIOD_S,
    }
