"""Composition root: the one place that builds the consumer and its adapters from app settings.

``Runtime`` takes everything a caller may choose as parameters (the app settings mapping, the
``Clock``, extra Cosmos client options, the telemetry adapter, the jitter source); production
uses the defaults, through ``handle_order_message``, and tests and stand-ins call ``configure``
once with theirs. There is no other way in: no module globals to patch.

It builds lazily, so importing ``function_app`` (worker indexing, cold start) opens no
connection and reads no setting; and once per event loop, because the aio Cosmos client belongs
to the loop it was created on (the Functions worker runs one loop for its whole life, so in
production this is one client per process). It owns what it builds and closes it: the Cosmos
client, the credential the client does not close, and the settlement pool. It must never decide
anything about a message: that is ``shared.core`` and ``shared.consumer``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azure.cosmos.aio import CosmosClient

from shared.config import Settings
from shared.consumer import OrderConsumer
from shared.core import SYSTEM_CLOCK, Clock, Decision, IncomingMessage, Outcome, RetryPolicy
from shared.cosmos_store import CosmosOrderStore, create_client, default_credential
from shared.errors import ConfigurationError
from shared.event_publisher import MessageBatchSender, ServiceBusEventPublisher
from shared.outbox_store import CosmosOutboxStore
from shared.relay import Clock as RelayClock
from shared.relay import OutboxRelay, RelayPolicy
from shared.relay_config import RelaySettings
from shared.settlement import MessageActions, Settler, to_incoming
from shared.telemetry import (
    CONNECTION_STRING_SETTING,
    ConsumerTelemetry,
    RelayTelemetry,
    configure_exporters,
)

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

logger = logging.getLogger("orders.consumer")

# The span and metric destination when ORDERS_QUEUE_NAME itself is the missing setting.
_UNKNOWN_QUEUE = "(unset)"


@dataclass
class _Wiring:
    """What lives on one event loop: the client (and its credential) and the consumer."""

    loop: asyncio.AbstractEventLoop
    client: CosmosClient
    credential: AsyncTokenCredential | None
    consumer: OrderConsumer

    async def close(self) -> None:
        if self.loop is not asyncio.get_running_loop() and self.loop.is_closed():
            # Its loop is gone, and its sockets with the loop's selector; nothing to await on.
            logger.debug("Cosmos client of a closed event loop dropped")
            return
        try:
            await self.client.close()
        finally:
            if self.credential is not None:
                await self.credential.close()


class Runtime:
    """The consumer, built from ``env`` on the first message of each event loop.

    - ``env``: the app settings; ``None`` reads ``os.environ`` (production).
    - ``clock``: now and sleep, for the consumer's backoff and the configuration-error hold.
    - ``cosmos_options``: extra ``CosmosClient`` options (a fault-injecting ``transport``,
      ``retry_backoff_factor``); ``credential`` replaces ``DefaultAzureCredential`` when no
      ``COSMOS_KEY`` is set (the runtime then closes it).
    - ``telemetry``: the telemetry adapter; default, one on the global providers.
    - ``jitter``: the backoff jitter source, values in [0, 1].
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        cosmos_options: Mapping[str, Any] | None = None,
        telemetry: ConsumerTelemetry | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._clock = clock
        self._cosmos_options = dict(cosmos_options or {})
        self._telemetry = telemetry
        self._jitter = jitter
        self._retry_policy = RetryPolicy()
        self._settler = Settler()
        self._exporters_configured = False
        self._wiring: _Wiring | None = None

    async def handle(self, message: Any, actions: MessageActions) -> Decision:
        """The function body: one delivery, decided and settled; never raises for it."""
        try:
            consumer = await self.consumer()
        except ConfigurationError as error:
            return await self._hold_then_abandon(message, actions, error)
        return await consumer.handle(message, actions)

    async def consumer(self) -> OrderConsumer:
        """This event loop's consumer, built on first use; raises ``ConfigurationError``."""
        loop = asyncio.get_running_loop()
        if self._wiring is not None and self._wiring.loop is loop:
            return self._wiring.consumer
        # Exporters first, from the raw settings: they need only the connection string, and an
        # invalid setting below must still reach Application Insights.
        self._configure_exporters()
        settings = Settings.from_env(self._env)
        options = dict(self._cosmos_options)
        credential = options.pop("credential", None)
        if credential is None and not settings.cosmos_key:
            credential = default_credential()
        client = create_client(settings, credential=credential, **options)
        container = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        telemetry = self.telemetry()
        consumer = OrderConsumer(
            CosmosOrderStore(container, on_request_charge=telemetry.record_request_charge),
            telemetry,
            outbox_enabled=settings.outbox_enabled,
            retry_policy=self._retry_policy,
            clock=self._clock,
            jitter=self._jitter,
            settler=self._settler,
        )
        # No await between the check above and this assignment: concurrent first messages
        # cannot build two clients.
        previous, self._wiring = self._wiring, _Wiring(loop, client, credential, consumer)
        if previous is not None:
            await _closed_quietly(previous.close, "the previous event loop's Cosmos client")
        return consumer

    def telemetry(self) -> ConsumerTelemetry:
        """The injected telemetry, or one on the global providers named after the queue (from
        the raw setting: the configuration-error path has no validated settings)."""
        if self._telemetry is None:
            queue = self._env.get("ORDERS_QUEUE_NAME", "").strip() or _UNKNOWN_QUEUE
            self._telemetry = ConsumerTelemetry(queue)
        return self._telemetry

    async def close(self) -> None:
        """Close the client, its credential and the settlement pool (shutdown, replacement)."""
        wiring, self._wiring = self._wiring, None
        try:
            if wiring is not None:
                await wiring.close()
        finally:
            self._settler.close()

    def _configure_exporters(self) -> None:
        if self._exporters_configured:
            return
        try:
            configure_exporters(self._env)
        except Exception as error:
            raise ConfigurationError(CONNECTION_STRING_SETTING, str(error)) from error
        self._exporters_configured = True

    async def _hold_then_abandon(
        self, message: Any, actions: MessageActions, error: ConfigurationError
    ) -> Decision:
        """Bad configuration is a systemic failure: the order is healthy, the app is not, so
        the message must survive until an operator fixes the settings. Abandoning at once would
        cycle every message through maxDeliveryCount deliveries in seconds and into the
        dead-letter queue; like any systemic failure, the delivery holds its lock until shortly
        before it expires (an app-settings change restarts the worker anyway), then abandons.
        It is recorded as any systemic outcome is (span, ``orders.messages``, error log), plus
        a critical log naming the setting."""
        started = time.perf_counter()
        incoming = to_incoming(message)
        decision = Decision(
            Outcome.SYSTEMIC, order_id=incoming.message_id, description=str(error), error=error
        )
        telemetry = self.telemetry()
        with telemetry.processing(incoming) as span:
            logger.critical(
                "invalid configuration (%s), holding then abandoning message %s: %s",
                error.setting,
                incoming.message_id,
                error,
                extra={"message_id": incoming.message_id, "setting": error.setting},
            )
            await self._clock.sleep(self._hold_seconds(incoming))
            try:
                await self._settler.settle(actions, message, decision)
                settled = True
            except Exception as settle_error:  # noqa: BLE001 - the lock will lapse instead
                settled = False
                telemetry.settlement_failed(incoming, decision, settle_error)
            telemetry.record_outcome(
                span,
                incoming,
                decision,
                settled=settled,
                duration_s=time.perf_counter() - started,
            )
        return decision

    def _hold_seconds(self, incoming: IncomingMessage) -> float:
        policy = self._retry_policy
        if incoming.locked_until is None:
            return policy.budget_without_lock_s
        remaining = (incoming.locked_until - self._clock.now()).total_seconds()
        return max(0.0, remaining - policy.lock_margin_s)


_runtime: Runtime | None = None
_retired: list[Runtime] = []


def configure(
    env: Mapping[str, str] | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    cosmos_options: Mapping[str, Any] | None = None,
    telemetry: ConsumerTelemetry | None = None,
    jitter: Callable[[], float] = random.random,
) -> Runtime:
    """Make a ``Runtime`` with these parameters the process's, from the next message on.
    Production never calls it: the first message configures one with the defaults. The
    replaced runtime is closed on the next ``close()`` or message."""
    global _runtime
    if _runtime is not None:
        _retired.append(_runtime)
    _runtime = Runtime(
        env, clock=clock, cosmos_options=cosmos_options, telemetry=telemetry, jitter=jitter
    )
    return _runtime


def current() -> Runtime:
    """The process's runtime; configured with the defaults on first use."""
    return _runtime if _runtime is not None else configure()


async def handle_order_message(message: Any, actions: MessageActions) -> Decision:
    """The Service Bus trigger's body (``function_app.py``)."""
    if _retired:
        await _close_retired()
    return await current().handle(message, actions)


async def get_consumer() -> OrderConsumer:
    """This event loop's consumer of the process's runtime."""
    return await current().consumer()


async def close() -> None:
    """Close the process's runtime and any it replaced (worker or stand-in shutdown)."""
    global _runtime
    runtime, _runtime = _runtime, None
    await _close_retired()
    if runtime is not None:
        await runtime.close()


async def _close_retired() -> None:
    while _retired:
        await _closed_quietly(_retired.pop().close, "a replaced runtime")


async def _closed_quietly(close: Callable[[], Awaitable[None]], what: str) -> None:
    # Closing what was replaced must never fail the delivery that happens to trigger it.
    try:
        await close()
    except Exception:  # logged; the connections die with the process anyway
        logger.warning("closing %s failed", what, exc_info=True)


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
