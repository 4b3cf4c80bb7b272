"""Target 6: the outbox relay on one lease, through Microsoft's worker, with marks in flight.

The Cosmos DB trigger runs one invocation at a time per lease and one instance per lease
(learn.microsoft.com/azure/cosmos-db/nosql/change-feed-processor: the processing life cycle,
and "A lease is owned by one instance at any time"), so a lease's events per second is what one
chain of invocations sustains. Each round: the consumer accepts ``orders`` new orders through
the host and the worker (its CPU per order is the denominator), then a change feed on one lease
(``local.standins.change_feed``, the host's trigger) delivers the container's changes to
``relay_outbox`` (the orders, their outbox documents, then the marks coming back as changes) in
batches of the binding's ``maxItemsPerInvocation`` until nothing is left: events per second is
``orders`` over that drain's wall time, the relay's CPU per event that drain's process CPU over
``orders``.

Round trips are modelled (``bench.latency``): every document request of the app's Cosmos client
(the consumer's batches, the relay's patches), every topic send and every page of the change
feed waits a round trip of real time, so concurrency shows as it would in Azure. Two relays
alternate, their order reversed every other round: the product's (``RelayPolicy()``, its bound
of updates in flight) and one marking one event at a time (bound 1, the relay before issue 19),
so the gain is a ratio of one run too.

Each round has a container of its own (the app composed on it, a change feed with a new lease
on it), deleted afterwards, so that no round reads another's documents (the local server's change
feed seeks into its log from the lease's continuation: a read costs what it returns).

Verdicts: the product relay's median events/s on one lease ≥ the highest per-lease rate a tier
of infra/tiers/ needs (orders/s of the tier ÷ its leases, leases = the minimum physical
partitions of its container: 1 serverless, else autoscale max RU/s ÷ 10,000 per partition,
learn.microsoft.com/azure/cosmos-db/scaling-provisioned-throughput-best-practices); and the
relay's CPU per event ≤ the consumer's CPU per order (a relayed event costs no more than its
order). Both CPU figures are this process's: they include the stand-ins' share (the local host,
the topic model, the queue model), as target 3's do. Every order of a round must be published
once and its outbox document marked; otherwise the run reports a problem and fails the target.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from azure.cosmos.aio import ContainerProxy

from bench.latency import (
    COSMOS_ROUND_TRIP_S,
    FEED_READ_ROUND_TRIP_S,
    SEND_ROUND_TRIP_S,
    RoundTripTopicSender,
    RoundTripTransport,
)
from bench.orders import outgoing
from bench.standin import StandIn
from bench.stats import rounds
from local.standins.change_feed import ChangeFeedEmulator, Lease
from local.standins.cosmos_server import ensure_container
from local.standins.topic import OrderEventsTopic
from shared.relay.core import RelayPolicy

TARGET_CPU_RATIO = 1.0  # relay CPU per event / consumer CPU per order
PHYSICAL_PARTITION_RU_S = 10_000  # the most one physical partition serves (page above)
TIERS = Path(__file__).resolve().parent.parent / "infra" / "tiers"
RELAYS: dict[str, RelayPolicy] = {
    "concurrent": RelayPolicy(),
    "serial": RelayPolicy(max_concurrent_updates=1),
}


def tier_needs(directory: Path = TIERS) -> dict[str, dict[str, float]]:
    """Per tier file: orders/s (from its name), leases and the per-lease relay rate."""
    needs: dict[str, dict[str, float]] = {}
    for path in sorted(directory.glob("orders-*-per-second.parameters.json")):
        found = re.match(r"orders-(\d+)-per-second", path.name)
        assert found is not None
        rate = int(found.group(1))
        values = {k: v["value"] for k, v in json.loads(path.read_text())["parameters"].items()}
        serverless = values.get("cosmosServerless", True)
        maximum = int(values.get("cosmosAutoscaleMaxThroughput", 0))
        leases = 1 if serverless else max(1, math.ceil(maximum / PHYSICAL_PARTITION_RU_S))
        needs[path.name] = {"orders_per_s": rate, "leases": leases, "per_lease": rate / leases}
    return needs


async def _consume(standin: StandIn, orders: int) -> float:
    """Accept ``orders`` new orders through the consumer; its CPU ms per order."""
    for message in outgoing(f"relay-{uuid.uuid4().hex[:8]}", orders):
        standin.queue.send(message)
    cpu = time.process_time()
    await standin.run_until_idle("consumer")
    return (time.process_time() - cpu) * 1000 / orders


async def _relay(
    feed: ChangeFeedEmulator, topic: OrderEventsTopic, sender: RoundTripTopicSender, orders: int
) -> dict[str, float]:
    sends, accepted = sender.sends, topic.stats.accepted
    cpu, start = time.process_time(), time.perf_counter()
    await feed.drain()
    elapsed = time.perf_counter() - start
    return {
        "events_per_s": orders / elapsed,
        "cpu_ms_per_event": (time.process_time() - cpu) * 1000 / orders,
        "invocations": feed.stats.invocations,
        "failed_invocations": feed.stats.failed_invocations,
        "sends": sender.sends - sends,
        "published_share": (topic.stats.accepted - accepted) / orders,
    }


async def _pending(container: ContainerProxy) -> int:
    query = "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'outbox' AND c.status = 'pending'"
    counts = [n async for n in container.query_items(query)]
    return sum(int(str(n)) for n in counts)


@contextlib.asynccontextmanager
async def _round_container(
    standin: StandIn, policy: RelayPolicy, transport: RoundTripTransport, sender: Any
) -> AsyncIterator[tuple[ContainerProxy, ChangeFeedEmulator]]:
    """A fresh container, the app composed on it with ``policy``, and a lease's change feed on
    it (the binding's batch size, modelled page reads); deleted afterwards."""
    world, database = standin.world, standin.settings.cosmos_database
    name = f"relay-{uuid.uuid4().hex[:10]}"
    env = {**world.env, "COSMOS_CONTAINER": name}
    container = await ensure_container(standin.client, database, name)
    try:
        world.compose(env=env, transport=transport, topic_sender=sender, relay_policy=policy)
        feed = ChangeFeedEmulator(
            container,
            world.worker,
            app_settings=env,
            lease=Lease(),
            clock=world.clock,
            read_round_trip_s=FEED_READ_ROUND_TRIP_S,
        )
        yield container, feed
    finally:
        await standin.client.get_database_client(database).delete_container(name)


async def measure(
    standin: StandIn,
    *,
    orders: int = 1_000,
    rounds_count: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    world = standin.world
    sender = RoundTripTopicSender(world.topic)
    transport = RoundTripTransport(connection_verify=False)  # shared by every composition
    found: dict[str, list[dict[str, float]]] = {name: [] for name in RELAYS}
    problems: list[str] = []
    max_items = 0
    try:
        for policy in RELAYS.values():  # warm-up, untimed: a small round of each
            async with _round_container(standin, policy, transport, sender) as (_, feed):
                await _consume(standin, 50)
                await feed.drain()
        for index in range(rounds_count):
            for name in RELAYS if index % 2 == 0 else list(RELAYS)[::-1]:
                if progress is not None:
                    progress(f"round {index + 1}/{rounds_count}: {name} relay")
                async with _round_container(standin, RELAYS[name], transport, sender) as (
                    container,
                    feed,
                ):
                    max_items = feed.max_items
                    consumer_cpu = await _consume(standin, orders)
                    result = await _relay(feed, world.topic, sender, orders)
                    left = await _pending(container)
                result["consumer_cpu_ms_per_order"] = consumer_cpu
                found[name].append(result)
                if result["failed_invocations"] or result["published_share"] != 1 or left:
                    problems.append(
                        f"{name} round {index + 1}: {result['failed_invocations']:g} failed "
                        f"invocations, {result['published_share']:g} of the orders published, "
                        f"{left} outbox documents pending"
                    )
    finally:
        world.compose(transport=standin.transport)  # as bench.standin composes the app
        await transport.close()
    summary: dict[str, Any] = {
        "orders_per_round": orders,
        "rounds": rounds_count,
        "max_items_per_invocation": max_items,
        "max_concurrent_updates": RELAYS["concurrent"].max_concurrent_updates,
        "round_trips_s": {
            "cosmos": COSMOS_ROUND_TRIP_S,
            "send": SEND_ROUND_TRIP_S,
            "feed_read": FEED_READ_ROUND_TRIP_S,
        },
        "relays": {
            name: {key: rounds([r[key] for r in results]) for key in results[0]}
            for name, results in found.items()
        },
        "tiers": tier_needs(),
        "problems": problems,
    }
    concurrent = summary["relays"]["concurrent"]
    rate = concurrent["events_per_s"]["median"]
    relay_cpu = concurrent["cpu_ms_per_event"]["median"]
    consumer_cpu = statistics.median(
        r["consumer_cpu_ms_per_order"] for results in found.values() for r in results
    )
    needed = max(tier["per_lease"] for tier in summary["tiers"].values())
    summary |= {
        "events_per_s": rate,
        "needed_per_lease": needed,
        "speedup": rate / summary["relays"]["serial"]["events_per_s"]["median"],
        "relay_cpu_ms_per_event": relay_cpu,
        "consumer_cpu_ms_per_order": consumer_cpu,
        "cpu_ratio": relay_cpu / consumer_cpu,
        "target_cpu_ratio": TARGET_CPU_RATIO,
    }
    summary["ok"] = rate >= needed and summary["cpu_ratio"] <= TARGET_CPU_RATIO and not problems
    return summary
