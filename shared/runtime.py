"""Composition root: builds the consumer once per worker process, lazily, from app settings.

Lazily, so importing ``function_app`` (worker indexing, cold start) opens no connection and
reads no setting. Once per event loop: the aio Cosmos client belongs to the loop it was created
on; the Functions worker runs one loop for its whole life, so in production this is one client
per process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from azure.cosmos.aio import CosmosClient

from shared.config import Settings
from shared.consumer import OrderConsumer
from shared.core import Decision, IncomingMessage, Outcome, RetryPolicy, utc_now
from shared.cosmos_store import CosmosOrderStore, create_client
from shared.errors import ConfigurationError
from shared.event_publisher import MessageBatchSender, ServiceBusEventPublisher
from shared.outbox_store import CosmosOutboxStore
from shared.relay import Clock as RelayClock
from shared.relay import OutboxRelay, RelayPolicy
from shared.relay_config import RelaySettings
from shared.settlement import MessageActions, settle, to_incoming
from shared.telemetry import ConsumerTelemetry, RelayTelemetry, configure_exporters

logger = logging.getLogger("orders.consumer")


@dataclass
class _Runtime:
    loop: asyncio.AbstractEventLoop
    client: CosmosClient
    consumer: OrderConsumer


_runtime: _Runtime | None = None


def build_consumer(
    settings: Settings,
    client: CosmosClient,
    *,
    telemetry: ConsumerTelemetry | None = None,
    **options: Any,
) -> OrderConsumer:
    """``options`` go to ``OrderConsumer`` (retry policy, clock, sleep: tests and stand-ins)."""
    telemetry = telemetry or ConsumerTelemetry(settings.queue_name)
    container = client.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_container
    )
    store = CosmosOrderStore(container, on_request_charge=telemetry.record_request_charge)
    return OrderConsumer(store, telemetry, outbox_enabled=settings.outbox_enabled, **options)


async def get_consumer(env: Mapping[str, str] | None = None) -> OrderConsumer:
    global _runtime
    loop = asyncio.get_running_loop()
    if _runtime is not None and _runtime.loop is loop:
        return _runtime.consumer
    # No await between the check and the assignment: concurrent first messages cannot race.
    environment = os.environ if env is None else env
    settings = Settings.from_env(environment)
    configure_exporters(environment)
    client = create_client(settings)
    _runtime = _Runtime(loop, client, build_consumer(settings, client))
    return _runtime.consumer


def install(
    settings: Settings,
    client: CosmosClient,
    *,
    telemetry: ConsumerTelemetry | None = None,
    **options: Any,
) -> OrderConsumer:
    """Use this client (and consumer options) for the current event loop: the local host and
    tests inject a fault-injecting transport or a manual clock. Production never calls this."""
    global _runtime
    consumer = build_consumer(settings, client, telemetry=telemetry, **options)
    _runtime = _Runtime(asyncio.get_running_loop(), client, consumer)
    return _runtime.consumer


async def handle_order_message(message: Any, actions: MessageActions) -> Decision:
    """The function body. Bad configuration is a systemic failure: the order is healthy, the app
    is not, so the message must survive until an operator fixes the settings. Abandoning at once
    would cycle every message through maxDeliveryCount deliveries in seconds and into the
    dead-letter queue; like any systemic failure, the delivery holds its lock until shortly
    before it expires (an app-settings change restarts the worker anyway), then abandons."""
    try:
        consumer = await get_consumer()
    except ConfigurationError as error:
        decision = Decision(Outcome.SYSTEMIC, description=str(error), error=error)
        incoming = to_incoming(message)
        logger.critical(
            "invalid configuration, holding then abandoning message %s: %s",
            incoming.message_id,
            error,
            extra={
                "outcome": decision.outcome.value,
                "settlement": decision.settlement.value,
                "message_id": incoming.message_id,
                "setting": error.setting,
            },
        )
        await _sleep(_hold_seconds(incoming, RetryPolicy()))
        try:
            await settle(actions, message, decision)
        except Exception:  # noqa: BLE001 - the lock will lapse instead
            logger.warning("abandon failed for %s", incoming.message_id)
        return decision
    return await consumer.handle(message, actions)


# The configuration-error path has no consumer to carry a clock: these are its injection points
# (tests substitute a manual clock).
_now: Callable[[], datetime] = utc_now
_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


def _hold_seconds(incoming: IncomingMessage, policy: RetryPolicy) -> float:
    if incoming.locked_until is None:
        return policy.budget_without_lock_s
    remaining = (incoming.locked_until - _now()).total_seconds()
    return max(0.0, remaining - policy.lock_margin_s)


async def close() -> None:
    """Close the Cosmos client (tests, local host shutdown)."""
    global _runtime
    if _runtime is not None:
        await _runtime.client.close()
        _runtime = None


# ---------------------------------------------------------------------------------------------
# The outbox relay (owner: relay). Composed apart from the consumer: its own Cosmos client (the
# trigger's client belongs to the host), one ServiceBusClient and topic sender per worker
# process. ``start_relay`` is the one way to build it: production calls it with defaults on the
# first change batch; the local stand-in and tests call it first with their clock, Cosmos client
# options, sender (the local topic) and telemetry.
# ---------------------------------------------------------------------------------------------

relay_logger = logging.getLogger("orders.relay")


@dataclass
class _RelayRuntime:
    loop: asyncio.AbstractEventLoop
    relay: OutboxRelay
    closers: list[Callable[[], Awaitable[None]]]


_relay_runtime: _RelayRuntime | None = None


async def start_relay(
    env: Mapping[str, str] | None = None,
    *,
    clock: RelayClock | None = None,
    cosmos_options: Mapping[str, Any] | None = None,
    sender: MessageBatchSender | None = None,
    telemetry: RelayTelemetry | None = None,
    policy: RelayPolicy | None = None,
) -> OutboxRelay:
    """Build the relay for the running event loop (replacing a previous one) from app settings.
    Opens no connection: the clients connect on first use. A caller-supplied ``sender`` stays
    the caller's to close."""
    global _relay_runtime
    await close_relay()
    environment = os.environ if env is None else env
    settings = Settings.from_env(environment)
    relay_settings = RelaySettings.from_env(environment)
    configure_exporters(environment)
    closers: list[Callable[[], Awaitable[None]]] = []  # closed in this order
    if sender is None:
        sender, closers = _topic_sender(relay_settings)
    cosmos = create_client(settings, **dict(cosmos_options or {}))
    closers.append(cosmos.close)
    container = cosmos.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_container
    )
    relay = OutboxRelay(
        ServiceBusEventPublisher(sender),
        CosmosOutboxStore(container),
        telemetry or RelayTelemetry(relay_settings.topic_name),
        clock=clock,
        policy=policy,
    )
    _relay_runtime = _RelayRuntime(asyncio.get_running_loop(), relay, closers)
    return relay


def _topic_sender(
    settings: RelaySettings,
) -> tuple[MessageBatchSender, list[Callable[[], Awaitable[None]]]]:
    """The topic sender and what closes it, in order (sender, client, credential)."""
    from azure.servicebus.aio import ServiceBusClient  # only where it is used

    if settings.fully_qualified_namespace is not None:
        from azure.identity.aio import DefaultAzureCredential

        credential = DefaultAzureCredential()
        client = ServiceBusClient(settings.fully_qualified_namespace, credential)
        sender = client.get_topic_sender(settings.topic_name)
        return sender, [sender.close, client.close, credential.close]
    assert settings.connection_string is not None  # RelaySettings guarantees one of them
    client = ServiceBusClient.from_connection_string(settings.connection_string)
    sender = client.get_topic_sender(settings.topic_name)
    return sender, [sender.close, client.close]


async def handle_outbox_changes(documents: Sequence[Mapping[str, Any]], context: Any) -> None:
    """The relay function's body. Raises when an event must be retried (``RelayIncomplete``) or
    the relay cannot be built (bad configuration: the lease then waits, under the unbounded retry
    policy, until an operator fixes the settings; nothing is skipped)."""
    global _relay_runtime
    loop = asyncio.get_running_loop()
    if _relay_runtime is None or _relay_runtime.loop is not loop:
        try:
            await start_relay()
        except ConfigurationError as error:
            relay_logger.critical(
                "invalid configuration, the outbox relay cannot publish: %s",
                error,
                extra={"setting": error.setting},
            )
            raise
    assert _relay_runtime is not None
    retry_context = getattr(context, "retry_context", None)
    attempt = int(getattr(retry_context, "retry_count", 0) or 0) + 1
    await _relay_runtime.relay.relay([dict(document) for document in documents], attempt=attempt)


async def close_relay() -> None:
    """Close the relay's clients (tests, local host shutdown)."""
    global _relay_runtime
    if _relay_runtime is None:
        return
    runtime, _relay_runtime = _relay_runtime, None
    for close_one in runtime.closers:
        await close_one()
