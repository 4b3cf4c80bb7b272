"""A ``ConsumerDefinition`` bound to a Service Bus trigger of an Azure Functions app (Python v2
model) in one call: ``bind_consumer(app, definition, topic=..., subscription=...)``.

What it registers is what this kit's own app does for each of its consumers: the trigger with
``auto_complete_messages=False`` (the function settles every message itself, exactly once); per
delivery, the message read (``to_incoming``), decided by the kit's ``decide`` over the Cosmos DB
store, retried within its lock (``Consumer``), settled once on the settlement pool (``Settler``)
and reported (``ConsumerTelemetry`` unless another observer is given). An invalid setting holds
the delivery and abandons it (``hold_then_abandon``), never dead-letters it.

Built lazily, once per event loop (the aio clients belong to the loop that made them; the
Functions worker runs one loop for its life): importing the app opens no connection and reads
no setting, so worker indexing (cold start) costs nothing of Cosmos DB.

It owns what it builds and closes it (``BoundConsumer.close``): the Cosmos client, the
credential the client does not close, and the settlement pool.
"""

import asyncio
import logging
import os
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from azure.cosmos.aio import CosmosClient

from idempotent_consumer import (
    SYSTEM_CLOCK,
    Clock,
    Consumer,
    ConsumerDefinition,
    ConsumerObserver,
    Decision,
    IncomingMessage,
    RetryPolicy,
    decide,
)
from idempotent_consumer.cosmos import CosmosDocumentStore, create_client
from idempotent_consumer.functions._settings import (
    COSMOS_CONTAINER_SETTING,
    ConsumerSettings,
    resolved,
)
from idempotent_consumer.servicebus import (
    HungSettlements,
    MessageActions,
    Settler,
    handle_delivery,
    max_concurrent_calls,
)
from idempotent_consumer.telemetry import ConsumerTelemetry

logger = logging.getLogger("idempotent_consumer.functions")

# A function's name: letters, digits, '_' and '-', starting with a letter, at most 127 more
# (learn.microsoft.com/azure/azure-functions/functions-reference: "Function names" ... the host
# refuses any other at indexing).
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")


@dataclass
class _OnLoop:
    loop: asyncio.AbstractEventLoop
    client: CosmosClient
    credential: Any
    consumer: Consumer


class BoundConsumer:
    """One definition's consumer, built on the first delivery of each event loop."""

    def __init__(
        self,
        definition: ConsumerDefinition[Any],
        *,
        destination: str,
        subscription: str | None,
        container_setting: str,
        env: Mapping[str, str] | None,
        observer: ConsumerObserver | None,
        clock: Clock,
        retry_policy: RetryPolicy,
        jitter: Callable[[], float],
        cosmos_options: Mapping[str, Any],
        partition_full_runbook: str | None = None,
    ) -> None:
        self.definition = definition
        self._partition_full_runbook = partition_full_runbook
        self._destination = destination
        self._subscription = subscription
        self._container_setting = container_setting
        self._env = env
        self._observer = observer
        self._clock = clock
        self._retry_policy = retry_policy
        self._jitter = jitter
        self._cosmos_options = dict(cosmos_options)
        self._settler: Settler | None = None
        self._on_loop: _OnLoop | None = None

    @property
    def env(self) -> Mapping[str, str]:
        """The app settings: the worker's environment, read when used."""
        return os.environ if self._env is None else self._env

    def observer(self) -> ConsumerObserver:
        """The observer given, or the kit's telemetry named after the trigger's destination."""
        if self._observer is None:
            self._observer = ConsumerTelemetry(
                resolved(self._destination, self.env),
                subscription=None
                if self._subscription is None
                else resolved(self._subscription, self.env),
                consumer=self.definition.name,
            )
        return self._observer

    def settler(self) -> Settler:
        if self._settler is None:
            observer = self.observer()
            watcher: Callable[[HungSettlements], None] | None = getattr(
                observer, "settlements_hung", None
            )
            self._settler = Settler(max_concurrent_calls(), watcher=watcher)
        return self._settler

    async def handle(self, message: Any, actions: MessageActions) -> Decision:
        """One delivery: decided, retried within its lock, settled once, reported; never raises
        for anything the message can cause."""
        return await handle_delivery(
            message,
            actions,
            settler=self.settler(),
            consumer=self.consumer,
            observer=self.observer,
            clock=self._clock,
            retry_policy=self._retry_policy,
        )

    async def consumer(self) -> Consumer:
        """This event loop's consumer; raises ``ConfigurationError`` for a bad setting."""
        loop = asyncio.get_running_loop()
        if self._on_loop is not None and self._on_loop.loop is loop:
            return self._on_loop.consumer
        settings = ConsumerSettings.from_env(self.env, container_setting=self._container_setting)
        credential = settings.credential()
        client = create_client(
            settings.endpoint,
            credential,
            connection_verify=settings.verify_tls,
            **self._cosmos_options,
        )
        container = client.get_database_client(settings.database).get_container_client(
            settings.container
        )
        observer = self.observer()
        store = CosmosDocumentStore(
            container,
            on_request_charge=getattr(observer, "record_request_charge", None),
            partition_full_runbook=self._partition_full_runbook,
        )
        definition, clock, ttl = self.definition, self._clock, settings.marker_ttl_s

        async def decide_one(incoming: IncomingMessage, traceparent: str | None) -> Decision:
            # A kit consumer stores no traceparent: it writes no events.
            return await decide(definition, incoming, store, marker_ttl_s=ttl, now=clock.now())

        consumer = Consumer(
            decide_one,
            observer,
            retry_policy=self._retry_policy,
            clock=clock,
            jitter=self._jitter,
        )
        # No await between the check above and this assignment: concurrent first messages
        # cannot build two clients.
        previous, self._on_loop = self._on_loop, _OnLoop(loop, client, credential, consumer)
        if previous is not None:
            await _close_quietly(previous)
        return consumer

    async def close(self) -> None:
        """Close the client, its credential and the settlement pool (shutdown, tests)."""
        on_loop, self._on_loop = self._on_loop, None
        if on_loop is not None:
            await _close_quietly(on_loop)
        if self._settler is not None:
            self._settler.close()


def bind_consumer(
    app: func.FunctionApp,
    definition: ConsumerDefinition[Any],
    *,
    topic: str | None = None,
    subscription: str | None = None,
    queue: str | None = None,
    connection: str = "ServiceBusConnection",
    function_name: str | None = None,
    container_setting: str = COSMOS_CONTAINER_SETTING,
    observer: ConsumerObserver | None = None,
    clock: Clock = SYSTEM_CLOCK,
    retry_policy: RetryPolicy | None = None,
    jitter: Callable[[], float] = random.random,
    env: Mapping[str, str] | None = None,
    cosmos_options: Mapping[str, Any] | None = None,
    partition_full_runbook: str | None = None,
) -> BoundConsumer:
    """Register ``definition`` as a function of ``app`` triggered by a topic ``subscription``
    (or a ``queue``), and return the bound consumer.

    ``topic``, ``subscription`` and ``queue`` are what the trigger takes: a name, or an app
    setting's as ``%SETTING%``; ``connection`` the Service Bus connection's setting prefix
    (``<connection>__fullyQualifiedNamespace`` for a managed identity). ``function_name``
    defaults to the definition's name with every other character than letters, digits and
    ``_`` made ``_``. The Cosmos DB settings are read by their documented names on the first
    delivery (``ConsumerSettings``: ``COSMOS_ENDPOINT``, ``COSMOS_DATABASE``, the container's
    ``container_setting``, ``COSMOS_KEY`` or an Entra ID credential, ...). ``observer``
    defaults to the kit's ``ConsumerTelemetry`` on the global OpenTelemetry providers.
    ``partition_full_runbook``: your runbook for a full logical partition, named in a
    ``PartitionFull`` failure's description (none by default).
    ``env``, ``clock``, ``jitter`` and ``cosmos_options`` are for tests (app settings, a manual
    clock, a transport)."""
    if (queue is None) == (topic is None):
        raise ValueError("bind a consumer to a queue, or to a topic and a subscription")
    if topic is not None and subscription is None:
        raise ValueError("a topic trigger needs its subscription")
    name = function_name or _NOT_IN_NAME.sub("_", definition.name)
    bound = BoundConsumer(
        definition,
        destination=queue if queue is not None else str(topic),
        subscription=subscription,
        container_setting=container_setting,
        env=env,
        observer=observer,
        clock=clock,
        retry_policy=retry_policy or RetryPolicy(),
        jitter=jitter,
        cosmos_options=cosmos_options or {},
        partition_full_runbook=partition_full_runbook,
    )

    async def consume(
        msg: servicebus.ServiceBusReceivedMessage,
        message_actions: servicebus.ServiceBusMessageActions,
    ) -> None:
        await bound.handle(msg, message_actions)

    consume.__name__ = consume.__qualname__ = name
    if queue is not None:
        trigger = app.service_bus_queue_trigger(
            arg_name="msg",
            queue_name=queue,
            connection=connection,
            auto_complete_messages=False,  # settled by the function, exactly once
        )
    else:
        trigger = app.service_bus_topic_trigger(
            arg_name="msg",
            topic_name=str(topic),
            subscription_name=str(subscription),
            connection=connection,
            auto_complete_messages=False,  # settled by the function, exactly once
        )
    app.function_name(name)(trigger(consume))
    return bound


async def _close_quietly(on_loop: _OnLoop) -> None:
    if on_loop.loop is not asyncio.get_running_loop() and on_loop.loop.is_closed():
        return  # its loop is gone, and its sockets with it
    try:
        await on_loop.client.close()
        if on_loop.credential is not None and not isinstance(on_loop.credential, str):
            await on_loop.credential.close()
    except Exception:
        logger.warning("closing the previous event loop's Cosmos client failed", exc_info=True)
