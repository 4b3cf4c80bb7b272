"""``make chaos``'s faults below the real Cosmos SDK: single requests answered 429/503/408, slow
or reset, and transactional batches answered 207 with one operation throttled, each on its
share of the requests from one seeded RNG. The transport is the app's one Cosmos client's, so
every consumer of the app (the orders, the stock reservation) and the relay ride them out.

And, on a smaller share of the consumers' own containers' requests (the orders, the inventory,
the payments: ``late_answers``), answers held past the store's operation deadline: the request
reaches the server and takes effect, its answer comes after the kit's deadline
(``CosmosDocumentStore``'s ``operation_timeout_s``, shortened here to ``STORE_DEADLINE_S``
through ``bootstrap.Composition.store_deadline_s`` so a held answer costs seconds). How that
surfaces to the client: the kit's ``_within_deadline`` cancels the operation's await
(``asyncio.timeout``) and raises ``TimeoutError``, classified transient
(``kit/src/idempotent_consumer/cosmos/_store.py``); the SDK's own ``timeout=`` would not end
it, being checked only before each attempt (``azure/cosmos/aio/_retry_utility_async.py``
:132-136, ``CosmosClientTimeoutError``), and the attempt's read timeout is the client's 15 s
(``azure/core/pipeline/transport/_aiohttp.py``:350-351, aiohttp's ``sock_read``), longer than
the hold, so no transport error comes first. A query held so (the watchdog's) is only slow: its
bound is the SDK's.

Builds the transport only; the runner composes the world with it (``local.scenarios.demo``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from local.scenarios.options import DemoOptions
from local.standins.faults import (
    BATCHES,
    POINT_READS,
    WRITES,
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
)


def client_options(transport: FaultInjectingTransport | None) -> dict[str, Any]:
    """The client's own settings: the slow-response faults carry the read timeout they outlive
    (``FaultRule.read_timeout_s``), so no other request runs on a short one."""
    return {}


# The stores' operation deadline under chaos, and how long a late answer is held past it: real
# seconds (the deployed deadline, OPERATION_TIMEOUT_S, is 20). Every other local operation
# answers within milliseconds; one slower than the deadline is one more transient error.
STORE_DEADLINE_S = 2.0
LATE_ANSWER_S = 2.5
# Of a consumer container's document requests, the share whose answer comes late: per unit of
# ``transport_fault_rate`` (0.05 under make chaos: 1 in 1,600 requests, about 10 answers per
# 500 orders). Each costs its delivery the deadline in real time.
LATE_ANSWER_SHARE = 1 / 80


def late_answers(
    options: DemoOptions, containers: Sequence[str], rng: random.Random
) -> list[FaultRule]:
    """For each container, its requests answered ``LATE_ANSWER_S`` after the server took them
    (``FaultKind.SLOW_RESPONSE`` below the client's read timeout): past ``STORE_DEADLINE_S``, so
    the client sees a timeout although the write landed."""
    rules = []
    for name in containers:
        rule = FaultRule(
            FaultKind.SLOW_RESPONSE, path_contains=f"/colls/{name}/docs", delay_s=LATE_ANSWER_S
        )
        rule.times, rule.rng = None, rng
        rule.probability = options.transport_fault_rate * LATE_ANSWER_SHARE
        rules.append(rule)
    return rules


def chaos_transport(
    options: DemoOptions, late_answer_containers: Sequence[str] = ()
) -> FaultInjectingTransport:
    """Faults below the real SDK, each on its share of the requests, from one seeded RNG:
    single requests answered 429/503/408, slow or reset, and transactional batches answered
    207 with one operation throttled (429 with its retry-after, 449, 503: the SDK's throttling
    retries never see these); the requests of ``late_answer_containers`` answered past the
    stores' deadline (``late_answers``), first, from an RNG of their own."""
    transport = FaultInjectingTransport(connection_verify=False)
    for rule in late_answers(
        options, late_answer_containers, random.Random(f"{options.seed}-late-answers")
    ):
        transport.add(rule)
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


def late_answer_figures(
    transport: FaultInjectingTransport, containers: Mapping[str, str]
) -> dict[str, int]:
    """How many answers ``late_answers`` held past the deadline, per container (``containers``:
    its role, e.g. "inventory", to its name)."""
    fired = {
        rule.path_contains: rule.fired
        for rule in transport.rules
        if rule.kind is FaultKind.SLOW_RESPONSE and rule.read_timeout_s is None
    }
    return {
        f"answers held past the {STORE_DEADLINE_S:g} s store deadline (injected), {role}": (
            fired.get(f"/colls/{name}/docs", 0)
        )
        for role, name in containers.items()
    }
