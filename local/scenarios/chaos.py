"""``make chaos``'s faults below the real Cosmos SDK: single requests answered 429/503/408, slow
or reset, and transactional batches answered 207 with one operation throttled, each on its
share of the requests from one seeded RNG. The transport is the app's one Cosmos client's, so
every consumer of the app (the orders, the stock reservation) and the relay ride them out.

Builds the transport only; the runner composes the world with it (``local.scenarios.demo``).
"""

from __future__ import annotations

import random
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


def chaos_transport(options: DemoOptions) -> FaultInjectingTransport:
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
