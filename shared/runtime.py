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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from azure.cosmos.aio import CosmosClient

from shared.config import Settings
from shared.consumer import OrderConsumer
from shared.core import Decision, IncomingMessage, Outcome, RetryPolicy, utc_now
from shared.cosmos_store import CosmosOrderStore, create_client
from shared.errors import ConfigurationError
from shared.settlement import MessageActions, settle, to_incoming
from shared.telemetry import ConsumerTelemetry, configure_exporters

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
