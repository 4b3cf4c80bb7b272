"""``make chaos``'s late answers (``local.scenarios.chaos.late_answers``) through the composed
app: the order's create reaches the local server and lands, its answer is held past the stores'
deadline that chaos composes (``bootstrap.Composition.store_deadline_s``), so the consumer sees
a timeout at that deadline, retries within the delivery, finds its own write and completes; one
order. Fails when the composition ignores ``store_deadline_s`` (the deployed 20 s deadline then
outlasts the hold: the answer is heard, nothing is retried, the delivery lasts the whole hold)."""

from __future__ import annotations

import dataclasses
import random
import time

from azure.cosmos.aio import ContainerProxy

from local.scenarios.chaos import LATE_ANSWER_S, LATE_ANSWER_SHARE, STORE_DEADLINE_S, late_answers
from local.scenarios.options import CHAOS
from local.standins.broker import PeekLockQueue
from local.standins.faults import FaultInjectingTransport
from local.standins.host import LocalFunctionsHost
from tests.conftest import ComposeApp
from tests.integration.consumer_logs import consumer_records, retried_attempts
from tests.orders import message, order_body
from tests.state import documents, settlements


async def test_an_answer_held_past_the_deadline_is_a_timeout_and_the_write_landed(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    compose_app: ComposeApp,
) -> None:
    always = dataclasses.replace(CHAOS, transport_fault_rate=1 / LATE_ANSWER_SHARE)
    [rule] = late_answers(always, [container.id], random.Random(0))
    rule.times = 1  # the first request into the container: the order's create
    transport = FaultInjectingTransport(connection_verify=False)
    transport.add(rule)
    compose_app(transport=transport, store_deadline_s=STORE_DEADLINE_S)
    queue.send(message(order_body()))

    started = time.monotonic()
    with consumer_records() as records:
        await host.run_until_idle()
    elapsed = time.monotonic() - started

    assert rule.fired == 1
    assert retried_attempts(records), "no timeout seen: the held answer was heard"
    assert STORE_DEADLINE_S <= elapsed < LATE_ANSWER_S
    assert settlements(queue) == [("complete", True)]
    assert sorted(doc["type"] for doc in await documents(container)) == ["order", "outbox"]
