"""The app as the Functions worker indexes it: a Service Bus queue trigger and two topic
subscription triggers, each with explicit settlement, the relay's Cosmos DB trigger and the
watchdog's timer; no network or settings touched at import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from local.standins.worker import FunctionsWorker

REPO = Path(__file__).resolve().parent.parent


async def test_binding_json_is_a_peek_lock_queue_trigger_with_explicit_settlement() -> None:
    # The raw bindings of the worker's metadata response: what the Functions host reads.
    worker = await FunctionsWorker.start()
    try:
        [binding] = worker.functions["consume_order"].bindings
    finally:
        worker.close()

    assert binding == {
        "direction": "IN",
        "type": "serviceBusTrigger",
        "name": "msg",
        "connection": "ServiceBusConnection",
        "queueName": "%ORDERS_QUEUE_NAME%",
        "autoCompleteMessages": False,
        "properties": {"SupportsDeferredBinding": True},  # the SDK-type binding
    }


@pytest.mark.parametrize(
    ("function", "subscription_setting"),
    [
        ("reserve_stock", "%INVENTORY_SUBSCRIPTION_NAME%"),
        ("capture_payment", "%PAYMENTS_SUBSCRIPTION_NAME%"),
    ],
)
async def test_each_topic_consumer_reads_its_subscription_and_settles_itself(
    function: str, subscription_setting: str
) -> None:
    # The host resolves the %...% settings; the deployed subscriptions are names.md's `inventory`
    # and `payments`.
    worker = await FunctionsWorker.start()
    try:
        [binding] = worker.functions[function].bindings
    finally:
        worker.close()

    assert binding == {
        "direction": "IN",
        "type": "serviceBusTrigger",
        "name": "msg",
        "connection": "ServiceBusConnection",
        "topicName": "%ORDER_EVENTS_TOPIC_NAME%",
        "subscriptionName": subscription_setting,
        "autoCompleteMessages": False,
        "properties": {"SupportsDeferredBinding": True},  # the SDK-type binding
    }


async def test_the_app_has_its_functions_and_the_watchdog_is_a_monitored_timer() -> None:
    """The order consumer, the stock reservation, the payment capture, the relay, the outbox
    watchdog (223dafd had no watchdog: an outbox document the change feed never delivered
    stayed pending for ever, unseen), the orders API's four HTTP functions, its OpenAPI
    document and its request completer (tests/edge/test_completer.py)."""
    worker = await FunctionsWorker.start()
    try:
        functions = {name: f.trigger for name, f in worker.functions.items()}
    finally:
        worker.close()

    assert {name: trigger["type"] for name, trigger in functions.items()} == {
        "consume_order": "serviceBusTrigger",
        "reserve_stock": "serviceBusTrigger",
        "capture_payment": "serviceBusTrigger",
        "relay_outbox": "cosmosDBTrigger",
        "outbox_watchdog": "timerTrigger",
        "place_order": "httpTrigger",
        "amend_order": "httpTrigger",
        "cancel_order": "httpTrigger",
        "get_order": "httpTrigger",
        "openapi": "httpTrigger",
        "complete_requests": "timerTrigger",  # shared/edge/completer.py
    }
    timer = functions["outbox_watchdog"]
    assert timer["schedule"] == "0 */5 * * * *"  # NCronTab, six fields: every five minutes
    assert timer["useMonitor"] is True  # its schedule survives restarts (host storage)
    assert timer["runOnStartup"] is False  # never on every scale-out


def timespan_s(value: str) -> int:
    """host.json's ``hh:mm:ss`` timespans, in seconds."""
    match = re.fullmatch(r"(\d\d):(\d\d):(\d\d)", value)
    assert match, value
    hours, minutes, seconds = (int(part) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_host_json_disables_auto_complete_and_bounds_concurrency() -> None:
    host = json.loads((REPO / "host.json").read_text())
    service_bus = host["extensions"]["serviceBus"]

    assert host["version"] == "2.0"
    assert host["extensionBundle"]["version"] == "[4.*, 5.0.0)"
    assert service_bus["autoCompleteMessages"] is False
    assert service_bus["maxConcurrentCalls"] == 16  # also the settlement pool's size


def test_host_logs_failed_invocations_but_not_every_successful_one() -> None:
    """The host's ``Function.<name>`` category carries its started and completed log of every
    run at Information and failures at Error (learn.microsoft.com/azure/azure-functions/
    configure-monitoring, "Configure categories"): two rows per message at Information. At
    Warning, failures stay (docs/capacity.md, "Log Analytics ingestion"); the watchdog's five-
    minute runs keep theirs."""
    levels = json.loads((REPO / "host.json").read_text())["logging"]["logLevel"]
    assert levels["Function"] == "Warning"
    assert levels["Function.outbox_watchdog"] == "Information"
    assert levels["default"] == levels["Host.Results"] == "Warning"


def test_lock_renewal_covers_the_whole_function_timeout() -> None:
    # The consumer's retries and holds rely on the host renewing the lock while the function
    # runs: a renewal window shorter than functionTimeout would let a still-running delivery
    # lose its lock, and its settlement fail.
    host = json.loads((REPO / "host.json").read_text())
    renewal = timespan_s(host["extensions"]["serviceBus"]["maxAutoLockRenewalDuration"])

    assert renewal >= timespan_s(host["functionTimeout"]) > 0


def test_importing_the_app_reads_no_setting_and_opens_no_connection() -> None:
    # A fresh interpreter with no app settings at all, where any socket use fails loudly.
    probe = textwrap.dedent(
        """
        import socket, sys
        def refuse(*args, **kwargs):
            raise AssertionError("network access during import")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import function_app
        import opentelemetry.trace as trace, opentelemetry.metrics as metrics
        assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
        assert type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
        print("ok")
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


async def test_the_orders_api_is_four_function_key_routes_and_an_anonymous_document() -> None:
    """The orders API's routes and methods, each behind a function key (``authLevel``
    ``FUNCTION``: a caller presents a function or host key, learn.microsoft.com/azure/
    azure-functions/functions-bindings-http-webhook-trigger, "Authorization level"); its
    OpenAPI document, read-only, without one."""
    worker = await FunctionsWorker.start()
    try:
        triggers = {name: f.trigger for name, f in worker.functions.items()}
    finally:
        worker.close()

    routes = {
        name: (trigger["route"], trigger["methods"], trigger["authLevel"])
        for name, trigger in triggers.items()
        if trigger["type"] == "httpTrigger"
    }
    assert routes == {
        "place_order": ("orders", ["POST"], "FUNCTION"),
        "amend_order": ("orders/{orderId}/amendments", ["POST"], "FUNCTION"),
        "cancel_order": ("orders/{orderId}/cancellations", ["POST"], "FUNCTION"),
        "get_order": ("orders/{orderId}", ["GET"], "FUNCTION"),
        "openapi": ("openapi.json", ["GET"], "ANONYMOUS"),
    }
