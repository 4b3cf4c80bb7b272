"""The driving half of ``test_envelopes.py``: run ONLY in a fresh interpreter by that test
(``pytest tests/telemetry/envelope_scenario.py``; the file name keeps it out of normal
collection), because the Azure Monitor distro configures the global providers once per process.

It configures the project's own exporters (``configure_exporters``) with the connection string
the outer test passes, whose ``IngestionEndpoint`` is the outer test's local HTTP server, then
drives one delivery of each outcome through the real function on the local Functions host (the
lifecycle's too: an amendment after a newer one, stale; one after the cancellation,
InvalidTransition), and flushes. The outer test reads what the real exporter posted.

Then the outbox relay, as in the demo: the world's change feed invokes ``relay_outbox`` through
Microsoft's worker, publishing to the local ``order-events`` topic model. One outbox document is
made an invalid event (parked at once), the topic refuses the first send (the batch's events
fail, the invocation is retried on the function's backoff) and the retry publishes the rest. The
summary reports what Cosmos DB then holds (dispatched and parked outbox documents, and the lag
``dispatchedAt - createdAt``), the truth the relay's metrics are held to.

Then the two subscription consumers of the ``order-events`` topic (``stock-reservation``,
``payment-capture``: the kit's ``Consumer`` on scripted decisions, ``scripted_consumers``), whose
decisions carry business counts (``Decision.measures``): a shortfall of stock, a declined
payment, a payment parked for reconciliation, an amendment naming another payer, and a
measure no counter exists for.

Then the relay's edges: an order whose event the change feed skips (its lease recreated and
started "from now"), published by the outbox watchdog's timer through the worker, then a quiet
watchdog run; a relay that cannot start (an invalid namespace setting: a critical log naming
it, and the batch's event recorded as a failed send), then fixed; and one settlement call that
hangs past the settler's timeout (still hung when the telemetry is flushed).

Last, the orders API, through the world's HTTP host and Microsoft's worker with a real HTTP
client (aiohttp): each route, a place, an amendment and a cancellation each replayed once (their
records' ages known), a reused key, a stale If-Match, a refusal of the HTTP layer (415) and an
edge that cannot be built (503, its setting named). Its messages stay on the queue: nothing
after them runs the consumer.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.exceptions import OperationTimeoutError
from idempotent_consumer import Decision, Outcome
from idempotent_consumer.servicebus import Settler
from opentelemetry import _logs as logs
from opentelemetry import metrics, trace

from local.assembly.world import World
from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.doubles import COMPLETE, RecordingActions
from local.standins.faults import WRITES, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from local.standins.http_host import FUNCTIONS_KEY_HEADER
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id
from shared import bootstrap
from shared.config import WatchdogSettings
from shared.telemetry.exporters import CONNECTION_STRING_SETTING, configure_exporters
from shared.telemetry.names import BUSINESS_MEASURES
from tests.conftest import InstallFaulty
from tests.edge.conftest import amend_body, cancel_body, place_body
from tests.orders import message, order_body
from tests.state import documents
from tests.telemetry.scripted_consumers import (
    PAYMENT_CAPTURE,
    STOCK_RESERVATION,
    scripted_consumer,
)

CAPTURE_CONNECTION_SETTING = "ORDERS_CAPTURE_CONNECTION_STRING"
CAPTURE_SUMMARY_SETTING = "ORDERS_CAPTURE_SUMMARY"


@pytest.mark.skipif(
    CAPTURE_CONNECTION_SETTING not in os.environ, reason="run by tests/telemetry/test_envelopes.py"
)
async def test_drive_one_delivery_of_each_outcome(
    world: World,
    container: ContainerProxy,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    install_faulty: InstallFaulty,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONNECTION_STRING_SETTING, os.environ[CAPTURE_CONNECTION_SETTING])
    assert configure_exporters(os.environ) is True
    faults = install_faulty()  # the consumer's telemetry uses the (now configured) globals
    window = queue.settings.duplicate_detection_window

    # processed, after one in-delivery retry of a transient failure
    faults.add(FaultRule(FaultKind.STATUS, status=500, times=1, **WRITES))
    queue.send(message(order_body("ord-1"), message_id="ord-1"))
    await host.run_until_idle()
    # duplicate, then mismatch (HashMismatch), each once the broker's window has passed
    clock.advance(window)
    queue.send(message(order_body("ord-1"), message_id="ord-1"))
    await host.run_until_idle()
    clock.advance(window)
    changed = order_body("ord-1")
    changed["lines"][0]["quantity"] = 3
    queue.send(message(changed, message_id="ord-1"))
    await host.run_until_idle()
    # invalid (MessageIdMismatch)
    queue.send(message(order_body("ord-2"), message_id="ord-9"))
    await host.run_until_idle()
    # the lifecycle: ord-8 placed, amended to v3, then v2 arrives (stale: completed, both
    # versions on its span and log); cancelled at v4, then amended to v5 (InvalidTransition)
    for outgoing in (
        message(order_body("ord-8"), message_id="ord-8"),
        lifecycle("OrderAmended", 3),
        lifecycle("OrderAmended", 2),
        lifecycle("OrderCancelled", 4),
        lifecycle("OrderAmended", 5),
    ):
        queue.send(outgoing)
        await host.run_until_idle()
    # transient, then systemic: one delivery each, abandoned after riding out the lock
    for status, order_id in ((500, "ord-3"), (403, "ord-4")):
        faults.add(FaultRule(FaultKind.STATUS, status=status, times=None, **WRITES))
        queue.send(message(order_body(order_id), message_id=order_id))
        await host.invoke(queue.receive(1)[0])
        faults.clear()
    await host.run_until_idle()  # their redeliveries: processed
    # a settlement that fails (the lock was lost): settlement "none"; the redelivery: duplicate
    queue.send(message(order_body("ord-5"), message_id="ord-5"))
    [delivery] = queue.receive(1)
    queue.expire_lock(delivery.lock_token)
    await host.invoke(delivery)
    await host.run_until_idle()

    # The relay: one invalid outbox document (parked), one refused send (failed), then published.
    outbox = {d["orderId"]: d for d in await documents(container) if d["type"] == "outbox"}
    assert set(outbox) == {"ord-1", "ord-3", "ord-4", "ord-5", "ord-8"}
    invalid = outbox["ord-5"]
    await container.replace_item(
        invalid["id"], {**invalid, "payload": {**invalid["payload"], "currency": "euro"}}
    )
    world.topic.fail_next_sends(lambda: OperationTimeoutError(message="injected: send timed out"))
    feed = await world.change_feed.drain()
    assert feed.failed_invocations == 1 and not feed.stalled
    first_drain_dispatched = len(
        [d for d in await documents(container) if d.get("status") == "dispatched"]
    )

    # The watchdog: ord-6's event is skipped by a change feed restarted "from now" ...
    queue.send(message(order_body("ord-6"), message_id="ord-6"))
    await host.run_until_idle()
    skipping = world.recreate_leases(start_from_beginning=False)
    await skipping.drain()
    assert skipping.stats.skipped_at_start > 0
    clock.advance(timedelta(seconds=WatchdogSettings().min_age_s + 30))
    # ... and published by the watchdog's timer, through the worker; then a quiet run.
    assert (await world.watchdog.tick()).succeeded
    assert (await world.watchdog.tick()).succeeded
    watchdog_oldest_age_s = WatchdogSettings().min_age_s + 30.0

    # A relay that cannot start: an invalid setting, named; its batch's event a failed send.
    queue.send(message(order_body("ord-7"), message_id="ord-7"))
    await host.run_until_idle()
    broken = {**world.env, "ServiceBusConnection__fullyQualifiedNamespace": "not-a-namespace"}
    install_faulty(env=broken)
    misconfigured = await world.change_feed.drain(max_attempts_per_batch=1)
    assert misconfigured.stalled
    install_faulty()  # fixed: the batch is published on the trigger's next run
    assert not (await world.restart_change_feed().drain()).stalled

    business = await drive_the_subscription_consumers(clock)

    # One settlement call that hangs past the timeout, still hung at the flush below.
    release = threading.Event()
    settler = Settler(
        max_workers=1, timeout_s=0.05, watcher=bootstrap.current().telemetry().settlements_hung
    )
    hanging = RecordingActions(expected={COMPLETE}, hold=None, release=release)
    with pytest.raises(TimeoutError):
        await settler.settle(hanging, object(), Decision(Outcome.PROCESSED))

    relayed = [d for d in await documents(container) if d["type"] == "outbox"]
    orders_api = await drive_the_orders_api(world, clock, install_faulty)

    providers: list[Any] = [
        trace.get_tracer_provider(),
        metrics.get_meter_provider(),
        logs.get_logger_provider(),
    ]
    for provider in providers:  # the SDK's providers, set by the distro
        assert provider.force_flush(30_000) is not False
    release.set()
    settler.close()
    dispatched = [d for d in relayed if d["status"] == "dispatched"]
    summary = {
        "deliveries": queue.stats.deliveries,
        "dead_letters": len(queue.dead_letters),
        "relay_dispatched": len(dispatched),
        "relay_parked": len([d for d in relayed if d["status"] == "parked"]),
        "relay_lag_s": sum(
            (_instant(d["dispatchedAt"]) - _instant(d["createdAt"])).total_seconds()
            for d in dispatched
        ),
        "topic_accepted": world.topic.stats.accepted,
        "topic_refused_sends": world.topic.stats.failed_sends,
        "first_drain_dispatched": first_drain_dispatched,
        "watchdog_runs": world.watchdog.stats.invocations,
        "watchdog_stuck": 1,  # ord-6's event, in the first run
        "watchdog_oldest_age_s": watchdog_oldest_age_s,
        "relay_configuration_failures": misconfigured.failed_invocations,
        "settlements_hung": settler.hung,
        **business,
        "orders_api": orders_api,
        "completer_runs": world.completer.stats.invocations,
    }
    write_summary(Path(os.environ[CAPTURE_SUMMARY_SETTING]), summary)


UNKNOWN_MEASURE = "stock.oversold"
# What the subscription consumers decide, delivery by delivery (one decision per attempt).
_PROCESSED = Outcome.PROCESSED
SUBSCRIPTION_SCRIPTS: dict[str, list[list[Decision]]] = {
    STOCK_RESERVATION: [
        # 3 units short, after one transient failure ridden out within the delivery
        [
            Decision(Outcome.TRANSIENT, order_id="ord-1", description="injected: 503"),
            Decision(_PROCESSED, order_id="ord-1", measures={"stock.shortfall": 3}),
        ],
        [Decision(_PROCESSED, order_id="ord-8", measures={"stock.shortfall": 2})],
        [Decision(_PROCESSED, order_id="ord-3", measures={"stock.shortfall": 0})],
        [Decision(Outcome.DUPLICATE, order_id="ord-8")],
        # a measure no counter exists for: not exported, warned once
        [Decision(_PROCESSED, order_id="ord-4", measures={UNKNOWN_MEASURE: 1})],
    ],
    PAYMENT_CAPTURE: [
        [Decision(_PROCESSED, order_id="ord-1")],
        [Decision(_PROCESSED, order_id="ord-3", measures={"payments.declined": 1})],
        [Decision(_PROCESSED, order_id="ord-5", measures={"payments.refused": 1})],
        [
            Decision(
                Outcome.INVALID,
                order_id="ord-8",
                deadletter_reason="NeedsReconciliation",
                measures={"payments.reconciliation_needed": 1},
            )
        ],
        [
            Decision(
                Outcome.INVALID,
                order_id="ord-9",
                deadletter_reason="PayerChanged",
                measures={"payments.payer_changed": 1},
            )
        ],
    ],
}


async def drive_the_subscription_consumers(clock: ManualClock) -> dict[str, Any]:
    """Each script's deliveries through its consumer, on the global (distro) providers; the
    summary's truths: deliveries, and each business counter's total per consumer."""
    measures: dict[str, dict[str, int]] = {metric: {} for metric in BUSINESS_MEASURES.values()}
    deliveries = 0
    for name, script in SUBSCRIPTION_SCRIPTS.items():
        consumer = scripted_consumer(name, clock)
        for number, decisions in enumerate(script, start=1):
            decision = await consumer.deliver(decisions, message_id=f"{name}-evt-{number}")
            deliveries += 1
            for measure, count in decision.measures.items():
                metric = BUSINESS_MEASURES.get(measure)
                if metric is not None and count > 0:
                    measures[metric][name] = measures[metric].get(name, 0) + count
    return {"subscription_deliveries": deliveries, "business_measures": measures}


async def drive_the_orders_api(
    world: World, clock: ManualClock, install_faulty: InstallFaulty
) -> dict[str, Any]:
    """Requests of each route and the outcomes the queries read; the summary's truths: each
    (route, outcome, status) answered, and each replay's record age (route, seconds)."""
    answered: list[tuple[str, str, int]] = []
    replay_ages: list[tuple[str, float]] = []
    run = uuid.uuid4().hex[:8]  # the requests container is the world's: keys of this run
    async with aiohttp.ClientSession() as http:

        async def call(
            route: str,
            outcome: str,
            path: str,
            body: Any,
            key: str,
            *,
            if_match: str | None = None,
            content_type: str = "application/json",
        ) -> dict[str, Any]:
            headers = {
                FUNCTIONS_KEY_HEADER: world.function_key,
                "Content-Type": content_type,
                "Idempotency-Key": f'"{run}-{key}"',
            }
            if if_match is not None:
                headers["If-Match"] = if_match
            url = world.http.function_url(path)
            async with http.post(url, data=json.dumps(body), headers=headers) as response:
                answered.append((route, outcome, response.status))
                parsed: dict[str, Any] = await response.json(content_type=None)
                return parsed

        placed = await call("place", "created", "orders", place_body(), "place")
        order = placed["orderId"]
        amendments, cancellations = f"orders/{order}/amendments", f"orders/{order}/cancellations"
        clock.advance(timedelta(seconds=90))
        await call("place", "replayed", "orders", place_body(), "place")
        replay_ages.append(("place", 90.0))
        await call("place", "key_reused", "orders", place_body(currency="USD"), "place")
        await call("amend", "version_mismatch", amendments, amend_body(5), "a", if_match='"9"')
        await call("amend", "created", amendments, amend_body(5), "a", if_match='"1"')
        clock.advance(timedelta(seconds=30))
        await call("amend", "replayed", amendments, amend_body(5), "a", if_match='"1"')
        replay_ages.append(("amend", 30.0))
        await call("cancel", "created", cancellations, cancel_body(), "c")
        clock.advance(timedelta(hours=3))
        await call("cancel", "replayed", cancellations, cancel_body(), "c")
        replay_ages.append(("cancel", 3 * 3600.0))
        await call("place", "invalid", "orders", place_body(), "p2", content_type="text/xml")
        async with http.get(
            world.http.function_url("orders/ord-nobody"),
            headers={FUNCTIONS_KEY_HEADER: world.function_key},
        ) as response:
            answered.append(("get", "not_found", response.status))
        install_faulty(env={**world.env, "REQUESTS_CONTAINER": "not/a/name"})
        await call("place", "unavailable", "orders", place_body(), "p3")
        install_faulty()
    # The request completer's quiet run (every request above was sent): its metrics, which its
    # alerts read (infra/app/completer-alerts.bicep), through the worker's timer.
    assert (await world.completer.tick()).succeeded
    return {"answered": answered, "replay_ages": replay_ages}


def lifecycle(subject: str, version: int) -> OutgoingMessage:
    """A change of ord-8 at ``version``, under its own MessageId."""
    body = (amended_body if subject == "OrderAmended" else cancelled_body)("ord-8", version)
    return OutgoingMessage(
        lifecycle_message_id("ord-8", version),
        json.dumps(body).encode(),
        f"corr-8-{version}",
        subject=subject,
    )


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary), encoding="utf-8")
