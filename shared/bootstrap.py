"""Composition root: the one place that builds the app's functions (the order consumer, the stock
reservation and payment capture consumers, the outbox relay and the relay's watchdog, which
shares the relay's publisher, store and telemetry, and the orders API: ``OrdersEdge`` on the
``requests`` container and the ``orders`` queue's sender) and their adapters from app settings.

One shape for all: ``Composition`` lists everything a caller may choose (the app settings
mapping, the ``Clock``, extra Cosmos client options, the telemetry adapters, the jitter source,
the relay's topic sender and policy); production uses the defaults, through
``handle_order_message``, ``handle_stock_message``, ``handle_payment_message``,
``handle_outbox_changes`` and ``handle_watchdog_tick``, and tests and stand-ins call
``configure`` once with theirs. There is no other way in: no module globals to patch. One
``configure`` for all the functions because they share the worker process, its event loop, its
clock and its one Cosmos client: two composition roots would build two clients and let a test
compose one function on a manual clock and the other on the system clock.

It builds lazily, so importing ``function_app`` (worker indexing, cold start) opens no
connection and reads no setting; and once per event loop, because the aio clients belong to the
loop they were created on (the Functions worker runs one loop for its whole life, so in
production this is one Cosmos client, and one ``ServiceBusClient`` and topic sender, per
process). The relay is built on its first change batch, so a consumer-only deployment never
needs the relay's settings; each consumer of a topic subscription on its first event, so a
deployment without the inventory's or the payment provider's settings still runs
``consume_order``; the orders API on its first request (``edge``), so a consumer-only
deployment never needs its container. The consumers are the kit's ``Consumer``
(``shared.kit.service``) with one retry policy, clock, jitter and settler, built by one function
(``_kit_consumer``) on their own container of the same Cosmos client: the stock reservation
decides with the kit's ``decide`` over its definition (``shared.stock.consumer``), the payment
capture with ``decide_call`` over ``payment_capture`` (``shared.payments.consumer``) on the
provider's HTTP adapter, whose client timeout is the kit's call deadline.

The request completer (``shared.edge.completer``, ``handle_completer_tick``) is built on its
first run on the edge's parts: its requests store and its one queue sender a loop.

It owns what it builds and closes it: the Cosmos client, the credential the client does not
close, the payment provider's HTTP session, the relay's and the edge's Service Bus clients,
senders and credentials (not a sender passed in: that stays the caller's), and the settlement
pool. It must never decide anything about a message, an event or a request: that is
``shared.consumer``, ``shared.stock`` and ``shared.payments`` (on ``shared.kit``),
``shared.relay`` and ``shared.edge``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import azure.functions as func
from azure.cosmos.aio import CosmosClient
from idempotent_consumer import (
    SYSTEM_CLOCK,
    Clock,
    ConfigurationError,
    Consumer,
    ConsumerObserver,
    Decision,
    DocumentStore,
    IncomingMessage,
    RetryPolicy,
    decide,
    decide_call,
)
from idempotent_consumer.cosmos import OPERATION_TIMEOUT_S, CosmosDocumentStore
from idempotent_consumer.servicebus import (
    HungSettlements,
    MessageActions,
    Settler,
    handle_delivery,
    max_concurrent_calls,
)

from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.adapters.identity import credential as identity_credential
from shared.config import (
    HOST_JSON,
    INVENTORY_SUBSCRIPTION_SETTING,
    PAYMENTS_SUBSCRIPTION_SETTING,
    QUEUE_SETTING,
    SERVICE_BUS_CONNECTION_STRING_SETTING,
    TOPIC_SETTING,
    EdgeSettings,
    IdentitySettings,
    InventorySettings,
    PaymentSettings,
    RelaySettings,
    Settings,
    WatchdogSettings,
)
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.exporters import CONNECTION_STRING_SETTING, configure_exporters

# The orders API's modules (shared.edge, its HTTP adapter and telemetry, the request completer),
# the relay, its watchdog, their adapters and telemetry, and the Service Bus senders are imported
# where they are first built, as the stock reservation's and the payment capture's are: a cold
# start for an order never loads them (docs/benchmarks.md, target 4).
if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

    from shared.adapters.cosmos_outbox import CosmosOutboxStore
    from shared.adapters.payment_provider import HttpPaymentProvider
    from shared.adapters.servicebus_out import MessageBatchSender, ServiceBusOrderSender
    from shared.edge import EdgeResponse, OrdersEdge
    from shared.edge.completer import CompleterReport, RequestCompleter
    from shared.edge.observer import EdgeObserver, Route
    from shared.relay.core import OutboxRelay, RelayPolicy, RelayReport
    from shared.relay.watchdog import OutboxWatchdog, WatchdogReport
    from shared.telemetry.completer import CompleterTelemetry
    from shared.telemetry.relay import RelayTelemetry

logger = logging.getLogger("orders.consumer")
relay_logger = logging.getLogger("orders.relay")
edge_logger = logging.getLogger("orders.edge")

Closer = Callable[[], Awaitable[None]]

# The span and metric destination when ORDERS_QUEUE_NAME itself is the missing setting.
_UNKNOWN_QUEUE = "(unset)"
_UNKNOWN_TOPIC = "(unset)"
_UNKNOWN_SUBSCRIPTION = "(unset)"
# Seconds a client is asked to wait while the orders API's settings are wrong (an operator's fix).
_MISCONFIGURED_RETRY_AFTER_S = 60
# Named in every PartitionFull a kit consumer's store raises (a SKU's partition at 20 GB).
PARTITION_FULL_RUNBOOK = 'docs/operations.md, "A logical partition is filling (PartitionFull)"'


class _DecideOne(Protocol):
    """The kit's ``decide`` or ``decide_call`` bound to an instance's definition."""

    def __call__(
        self,
        incoming: IncomingMessage,
        store: DocumentStore,
        *,
        marker_ttl_s: int,
        now: datetime,
    ) -> Awaitable[Decision]: ...


@dataclass
class _Wiring:
    """What lives on one event loop: the Cosmos client (and its credential), the order consumer,
    and once built, the stock reservation and payment capture consumers (with the provider's
    client), and the relay with what closes its Service Bus side (in order)."""

    loop: asyncio.AbstractEventLoop
    client: CosmosClient
    credential: AsyncTokenCredential | None
    settings: Settings
    consumer: OrderConsumer
    stock: Consumer | None = None
    payments: Consumer | None = None
    payment_provider: HttpPaymentProvider | None = None
    relay: OutboxRelay | None = None
    relay_closers: tuple[Closer, ...] = ()
    outbox_store: CosmosOutboxStore | None = None
    watchdog: OutboxWatchdog | None = None
    edge: OrdersEdge | None = None
    edge_requests: DocumentStore | None = None
    edge_orders: DocumentStore | None = None
    edge_closers: tuple[Closer, ...] = ()
    # The edge's queue sender (one per loop, its lock shared by the HTTP functions and the
    # request completer) and the completer, once built.
    edge_sender: ServiceBusOrderSender | None = None
    completer: RequestCompleter | None = None

    async def close(self) -> None:
        if self.loop is not asyncio.get_running_loop() and self.loop.is_closed():
            # Its loop is gone, and its sockets with the loop's selector; nothing to await on.
            logger.debug("clients of a closed event loop dropped")
            return
        try:
            if self.payment_provider is not None:
                await _closed_quietly(self.payment_provider.close, "the payment provider's client")
            for close_one in self.relay_closers:
                await _closed_quietly(close_one, "the relay's Service Bus sender")
            for close_one in self.edge_closers:
                await _closed_quietly(close_one, "the edge's Service Bus sender")
            await self.client.close()
        finally:
            if self.credential is not None:
                await self.credential.close()


@dataclass(frozen=True)
class Composition:
    """Everything a caller may choose when composing the app: production uses the defaults;
    tests and the stand-in (``local.assembly.world.World.compose``) pass theirs. The one list of
    the composition root's parameters.

    - ``env``: the app settings; ``None`` reads ``os.environ`` (production).
    - ``clock``: now and sleep, for the consumer's backoff, the configuration-error hold, and the
      relay's ``dispatchedAt``, ``parkedAt`` and lag.
    - ``cosmos_options``: extra ``CosmosClient`` options (a fault-injecting ``transport``,
      ``retry_backoff_factor``); ``credential`` replaces the one ``shared.adapters.identity``
      builds from the settings when no ``COSMOS_KEY`` is set (the runtime then closes it). One
      client serves every function.
    - ``telemetry``, ``stock_telemetry``, ``payment_telemetry``, ``relay_telemetry``: the
      telemetry adapters of the order consumer, the stock reservation and payment capture
      consumers and the relay; default, on the global providers.
    - ``jitter``: the backoff jitter source, values in [0, 1].
    - ``topic_sender``: the relay's topic sender (``azure.servicebus.aio.ServiceBusSender``'s
      surface); default, one built from the relay's settings, identity-based
      (``shared.adapters.identity``).
    - ``relay_policy``: when the relay parks an event instead of retrying it.
    - ``queue_sender``: the public edge's sender to the ``orders`` queue (the same surface);
      default, one built from the edge's settings like the topic's.
    - ``completer_telemetry``: the request completer's telemetry; default, on the global
    - ``edge_telemetry``: the orders API's observer; default, ``EdgeTelemetry`` on the global
      providers.
    - ``store_deadline_s``: each Cosmos DB store operation's deadline; default, the kit's
      ``OPERATION_TIMEOUT_S`` (production's); ``make chaos`` shortens it so that the answers it
      holds past the deadline cost seconds, not the deployed 20 (``local.scenarios.chaos``).
    """

    env: Mapping[str, str] | None = None
    clock: Clock = SYSTEM_CLOCK
    cosmos_options: Mapping[str, Any] = field(default_factory=dict)
    telemetry: ConsumerTelemetry | None = None
    stock_telemetry: ConsumerTelemetry | None = None
    payment_telemetry: ConsumerTelemetry | None = None
    jitter: Callable[[], float] = random.random
    topic_sender: MessageBatchSender | None = None
    relay_telemetry: RelayTelemetry | None = None
    relay_policy: RelayPolicy | None = None
    queue_sender: MessageBatchSender | None = None
    completer_telemetry: CompleterTelemetry | None = None
    edge_telemetry: EdgeObserver | None = None
    store_deadline_s: float | None = None  # None: OPERATION_TIMEOUT_S


class Runtime:
    """The consumers and the relay, composed as ``Composition`` says, built on the first message
    (or change batch) of each event loop."""

    def __init__(self, composition: Composition | None = None) -> None:
        chosen = composition or Composition()
        self._env: Mapping[str, str] = os.environ if chosen.env is None else chosen.env
        self._clock = chosen.clock
        self._cosmos_options = dict(chosen.cosmos_options)
        self._telemetry = chosen.telemetry
        self._stock_telemetry = chosen.stock_telemetry
        self._payment_telemetry = chosen.payment_telemetry
        self._jitter = chosen.jitter
        self._topic_sender = chosen.topic_sender
        self._relay_telemetry = chosen.relay_telemetry
        self._relay_policy = chosen.relay_policy
        self._queue_sender = chosen.queue_sender
        self._completer_telemetry = chosen.completer_telemetry
        self._edge_telemetry = chosen.edge_telemetry
        self._store_deadline_s = chosen.store_deadline_s or OPERATION_TIMEOUT_S
        self._retry_policy = RetryPolicy()
        self._settler = Settler(max_concurrent_calls(HOST_JSON), watcher=self._settlements_hung)
        self._exporters_configured = False
        self._wiring: _Wiring | None = None

    # The three bodies and ``_delivered`` hand back ``handle_delivery``'s coroutine rather than
    # awaiting it in one of their own: a forwarding coroutine per level would be created, and
    # resumed at every await of the delivery, for every message.

    def handle(self, message: Any, actions: MessageActions) -> Coroutine[Any, Any, Decision]:
        """``consume_order``'s body: one delivery, decided and settled; never raises for it."""
        return self._delivered(message, actions, self.consumer, self.telemetry)

    def handle_stock(self, message: Any, actions: MessageActions) -> Coroutine[Any, Any, Decision]:
        """``reserve_stock``'s body: one delivery, decided and settled; never raises for it."""
        return self._delivered(message, actions, self.stock_consumer, self.stock_telemetry)

    def handle_payment(
        self, message: Any, actions: MessageActions
    ) -> Coroutine[Any, Any, Decision]:
        """``capture_payment``'s body: one delivery, decided and settled; never raises for it."""
        return self._delivered(message, actions, self.payment_consumer, self.payment_telemetry)

    def _delivered(
        self,
        message: Any,
        actions: MessageActions,
        consumer_of_loop: Callable[[], Awaitable[Consumer]],
        observer: Callable[[], ConsumerObserver],
    ) -> Coroutine[Any, Any, Decision]:
        return handle_delivery(
            message,
            actions,
            settler=self._settler,
            consumer=consumer_of_loop,
            observer=observer,
            clock=self._clock,
            retry_policy=self._retry_policy,
        )

    async def consumer(self) -> OrderConsumer:
        """This event loop's order consumer, built on first use; raises ``ConfigurationError``."""
        return (await self._wired()).consumer

    async def stock_consumer(self) -> Consumer:
        """This event loop's stock reservation consumer, on the inventory container of the one
        Cosmos client, built on first use; raises ``ConfigurationError``."""
        # Imported on first use: a cold start that meets no order event never pays for the
        # stock reservation's modules (docs/benchmarks.md, target 4).
        from shared.stock.consumer import stock_reservation

        wiring = await self._wired()
        if wiring.stock is None:
            inventory = InventorySettings.from_env(self._env)
            wiring.stock = self._kit_consumer(
                wiring,
                inventory.container,
                partial(decide, stock_reservation),
                self.stock_telemetry(),
            )
        return wiring.stock

    async def payment_consumer(self) -> Consumer:
        """This event loop's payment capture consumer, on the payments container of the one
        Cosmos client and this loop's provider client (its timeout the kit's call deadline),
        built on first use; raises ``ConfigurationError``."""
        # Imported on first use, as the stock reservation's (``stock_consumer``).
        from shared.adapters.payment_provider import HttpPaymentProvider
        from shared.payments.consumer import payment_capture

        wiring = await self._wired()
        if wiring.payments is None:
            payments = PaymentSettings.from_env(self._env)
            # Opens nothing yet: its session is made on its first request, on this loop.
            provider = HttpPaymentProvider(
                payments.provider_base_url,
                payments.provider_api_key,
                honours_idempotency_keys=payments.provider_honours_keys,
                timeout_s=payments.provider_timeout_s,
            )
            definition = payment_capture(
                provider,
                call_deadline_s=payments.provider_timeout_s,
                processing_bound_s=payments.provider_processing_bound_s,
            )
            wiring.payment_provider = provider
            clock = self._clock

            def decide_payment(
                incoming: IncomingMessage,
                store: DocumentStore,
                *,
                marker_ttl_s: int,
                now: datetime,
            ) -> Awaitable[Decision]:
                # The kit reads the clock where each moment matters, not once per attempt.
                return decide_call(
                    definition, incoming, store, marker_ttl_s=marker_ttl_s, clock=clock
                )

            wiring.payments = self._kit_consumer(
                wiring, payments.container, decide_payment, self.payment_telemetry()
            )
        return wiring.payments

    def _kit_consumer(
        self,
        wiring: _Wiring,
        container_name: str,
        decide_one: _DecideOne,
        telemetry: ConsumerTelemetry,
    ) -> Consumer:
        """The kit's ``Consumer`` deciding with ``decide_one`` on ``container_name`` of the one
        Cosmos client, with the runtime's retry policy, clock and jitter: every consumer that is
        a definition alone (the order consumer has a core of its own: ``OrderConsumer``)."""
        container = wiring.client.get_database_client(
            wiring.settings.cosmos_database
        ).get_container_client(container_name)
        store = CosmosDocumentStore(
            container,
            on_request_charge=telemetry.record_request_charge,
            operation_timeout_s=self._store_deadline_s,
            partition_full_runbook=PARTITION_FULL_RUNBOOK,
        )
        marker_ttl_s = wiring.settings.inbox_marker_ttl_s
        clock = self._clock

        async def decide_with_kit(incoming: IncomingMessage, traceparent: str | None) -> Decision:
            # The traceparent is stored only on outbox events; a kit consumer writes none.
            return await decide_one(incoming, store, marker_ttl_s=marker_ttl_s, now=clock.now())

        return Consumer(
            decide_with_kit,
            telemetry,
            retry_policy=self._retry_policy,
            clock=clock,
            jitter=self._jitter,
        )

    async def relay_changes(self, documents: Sequence[Mapping[str, Any]]) -> RelayReport:
        """The relay function's body: publish the batch's pending outbox events. Raises when an
        event must be retried (``RelayIncomplete``) or the relay cannot be built (bad
        configuration, logged at critical level: the lease then waits, under the unbounded retry
        policy, until an operator fixes the settings; nothing is skipped)."""
        try:
            relay = await self.relay()
        except ConfigurationError as error:
            self._relay_misconfigured(error, documents)
            raise
        return await relay.relay([dict(d) for d in documents])

    def _relay_misconfigured(
        self, error: ConfigurationError, documents: Sequence[Mapping[str, Any]]
    ) -> None:
        """Recorded as the consumer records it: a critical log naming the setting (the relay's
        configuration alert reads it), and every pending event of the batch as a failed send
        (span, ``orders.relay.failed`` with ``error.type`` ConfigurationError, error log), so
        the failed-sends alert and Q12 see a relay that cannot even start."""
        from shared.relay.outbox import is_pending_outbox
        from shared.telemetry.relay import RelayTelemetry

        relay_logger.critical(
            "invalid configuration (%s), the outbox relay cannot publish: %s",
            error.setting,
            error,
            extra={"setting": error.setting},
        )
        telemetry = self._relay_telemetry or RelayTelemetry(
            self._env.get(TOPIC_SETTING, "").strip() or _UNKNOWN_TOPIC
        )
        self._relay_telemetry = telemetry
        for document in documents:
            if is_pending_outbox(document):
                telemetry.failed_before_send(
                    str(document.get("eventId") or document.get("id")),
                    str(document.get("orderId")),
                    error,
                )

    async def relay(self) -> OutboxRelay:
        """This event loop's relay, built on first use; raises ``ConfigurationError``."""
        from shared.adapters.cosmos_outbox import CosmosOutboxStore
        from shared.adapters.servicebus_out import ServiceBusEventPublisher
        from shared.relay.core import OutboxRelay
        from shared.telemetry.relay import RelayTelemetry

        wiring = await self._wired()
        if wiring.relay is not None:
            return wiring.relay
        relay_settings = RelaySettings.from_env(self._env)
        sender = self._topic_sender
        closers: tuple[Closer, ...] = ()  # a sender passed in stays the caller's to close
        if sender is None:
            sender, closers = _topic_sender(relay_settings)
        settings = wiring.settings
        container = wiring.client.get_database_client(
            settings.cosmos_database
        ).get_container_client(settings.cosmos_container)
        if self._relay_telemetry is None:
            self._relay_telemetry = RelayTelemetry(relay_settings.topic_name)
        wiring.outbox_store = CosmosOutboxStore(container)
        wiring.relay = OutboxRelay(
            ServiceBusEventPublisher(sender),
            wiring.outbox_store,
            self._relay_telemetry,
            clock=self._clock,
            policy=self._relay_policy,
        )
        wiring.relay_closers = closers
        return wiring.relay

    async def watch_outbox(self) -> WatchdogReport:
        """The watchdog function's body: report and republish the stuck outbox documents.
        Raises ``RelayIncomplete`` when one could not be published (the next run retries), or
        ``ConfigurationError`` (logged at critical level, naming the setting)."""
        try:
            watchdog = await self.watchdog()
        except ConfigurationError as error:
            relay_logger.critical(
                "invalid configuration (%s), the outbox watchdog cannot run: %s",
                error.setting,
                error,
                extra={"setting": error.setting},
            )
            raise
        return await watchdog.run()

    async def watchdog(self) -> OutboxWatchdog:
        """This event loop's watchdog, on the relay (the same publisher, store and telemetry),
        built on first use; raises ``ConfigurationError``."""
        from shared.relay.watchdog import OutboxWatchdog, WatchdogPolicy

        wiring = await self._wired()
        if wiring.watchdog is not None:
            return wiring.watchdog
        settings = WatchdogSettings.from_env(self._env)
        relay = await self.relay()
        assert wiring.outbox_store is not None and self._relay_telemetry is not None
        wiring.watchdog = OutboxWatchdog(
            wiring.outbox_store,
            relay,
            self._relay_telemetry,
            clock=self._clock,
            policy=WatchdogPolicy(settings.min_age_s, settings.max_documents),
        )
        return wiring.watchdog

    async def edge(self) -> OrdersEdge:
        """This event loop's public edge, on the requests container of the one Cosmos client
        and the ``orders`` queue's sender, built on first use; raises ``ConfigurationError``."""
        from shared.adapters.servicebus_out import ServiceBusOrderSender
        from shared.edge import OrdersEdge

        wiring = await self._wired()
        if wiring.edge is not None:
            return wiring.edge
        edge_settings = EdgeSettings.from_env(self._env)
        sender = self._queue_sender
        closers: tuple[Closer, ...] = ()  # a sender passed in stays the caller's to close
        if sender is None:
            sender, closers = _service_bus_sender(
                edge_settings.fully_qualified_namespace,
                edge_settings.connection_string,
                edge_settings.identity,
                queue=edge_settings.queue_name,
            )
        database = wiring.client.get_database_client(wiring.settings.cosmos_database)
        wiring.edge_requests = CosmosDocumentStore(
            database.get_container_client(edge_settings.requests_container),
            operation_timeout_s=self._store_deadline_s,
        )
        wiring.edge_orders = CosmosDocumentStore(
            database.get_container_client(wiring.settings.cosmos_container),
            operation_timeout_s=self._store_deadline_s,
        )
        wiring.edge_sender = ServiceBusOrderSender(sender)
        wiring.edge = OrdersEdge(wiring.edge_requests, wiring.edge_sender, self._clock)
        wiring.edge_closers = closers
        return wiring.edge

    async def complete_requests(self) -> CompleterReport:
        """The request completer's body: send the messages of requests committed but never
        sent. Raises ``CompletionIncomplete`` when one was left unsent (the next run retries),
        or ``ConfigurationError`` (logged at critical level, naming the setting)."""
        try:
            completer = await self.completer()
        except ConfigurationError as error:
            edge_logger.critical(
                "invalid configuration (%s), the request completer cannot run: %s",
                error.setting,
                error,
                extra={"setting": error.setting},
            )
            raise
        return await completer.run()

    async def completer(self) -> RequestCompleter:
        """This event loop's request completer, on the edge's requests container, store and
        queue sender (one sender a loop: the completer's sends and the API's share its lock),
        built on first use; raises ``ConfigurationError``."""
        from shared.adapters.cosmos_requests import CosmosUnsentRequests
        from shared.edge.completer import RequestCompleter
        from shared.telemetry.completer import CompleterTelemetry

        wiring = await self._wired()
        if wiring.completer is not None:
            return wiring.completer
        await self.edge()
        assert wiring.edge_requests is not None and wiring.edge_sender is not None
        requests = wiring.client.get_database_client(
            wiring.settings.cosmos_database
        ).get_container_client(EdgeSettings.from_env(self._env).requests_container)
        if self._completer_telemetry is None:
            self._completer_telemetry = CompleterTelemetry()
        wiring.completer = RequestCompleter(
            CosmosUnsentRequests(requests),
            wiring.edge_requests,
            wiring.edge_sender,
            self._completer_telemetry,
            clock=self._clock,
        )
        return wiring.completer

    async def orders_request(self, action: str, request: func.HttpRequest) -> func.HttpResponse:
        """An HTTP function's body: ``action`` is ``place``, ``amend``, ``cancel`` or ``get``.
        Every request is reported to the edge's telemetry (``http_in.answered``), the ones the
        HTTP layer refuses before the core included."""
        from shared.adapters.http_in import answered
        from shared.edge.observer import Route

        route = Route(action)
        # Exporters before the first report: a refusal may come before the edge is built. A
        # setting that fails them fails the edge too, which answers 503 and logs it (below).
        with contextlib.suppress(ConfigurationError):
            self._configure_exporters()
        return await answered(
            self.edge_telemetry(), route, request, partial(self._orders_answer, route, request)
        )

    async def _orders_answer(self, route: Route, request: func.HttpRequest) -> EdgeResponse:
        """A request the HTTP layer refuses (403, 415, 413, 400) never reaches the core; an
        edge that cannot be built answers 503, logged at critical level naming the setting."""
        from shared.adapters.http_in import ORDER_ID_ROUTE_PARAM, read_order_request
        from shared.adapters.http_in import client_id as http_client_id
        from shared.edge import EdgeResponse
        from shared.edge import responses as edge_responses
        from shared.edge.observer import Route
        from shared.edge.view import order_view

        parsed = http_client_id(request) if route is Route.GET else read_order_request(request)
        if isinstance(parsed, EdgeResponse):
            return parsed
        try:
            edge = await self.edge()
        except ConfigurationError as error:
            edge_logger.critical(
                "invalid configuration (%s), the orders API cannot answer: %s",
                error.setting,
                error,
                extra={"setting": error.setting},
            )
            return edge_responses.unavailable(_MISCONFIGURED_RETRY_AFTER_S)
        if isinstance(parsed, str):  # a GET: the order as the consumer recorded it
            wiring = await self._wired()
            assert wiring.edge_requests is not None and wiring.edge_orders is not None
            order_id = request.route_params.get(ORDER_ID_ROUTE_PARAM, "")
            return await order_view(wiring.edge_requests, wiring.edge_orders, parsed, order_id)
        if route is Route.PLACE:
            return await edge.place(parsed.client_id, parsed.idempotency_key, parsed.body)
        change = edge.amend if route is Route.AMEND else edge.cancel
        return await change(
            parsed.client_id,
            parsed.idempotency_key,
            parsed.order_id,
            parsed.body,
            parsed.if_match,
        )

    def edge_telemetry(self) -> EdgeObserver:
        """The injected observer of the orders API, or ``EdgeTelemetry`` on the global
        providers."""
        from shared.telemetry.edge import EdgeTelemetry

        if self._edge_telemetry is None:
            self._edge_telemetry = EdgeTelemetry()
        return self._edge_telemetry

    async def _wired(self) -> _Wiring:
        loop = asyncio.get_running_loop()
        if self._wiring is not None and self._wiring.loop is loop:
            return self._wiring
        # Exporters first, from the raw settings: they need only the connection string, and an
        # invalid setting below must still reach Application Insights.
        self._configure_exporters()
        settings = Settings.from_env(self._env)
        options = dict(self._cosmos_options)
        credential = options.pop("credential", None)
        if credential is None and not settings.cosmos_key:
            credential = identity_credential(settings.cosmos_identity)
        client = create_client(settings, credential=credential, **options)
        container = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        telemetry = self.telemetry()
        consumer = OrderConsumer(
            CosmosOrderStore(
                container,
                on_request_charge=telemetry.record_request_charge,
                operation_timeout_s=self._store_deadline_s,
            ),
            telemetry,
            outbox_enabled=settings.outbox_enabled,
            retry_policy=self._retry_policy,
            clock=self._clock,
            jitter=self._jitter,
            marker_ttl_s=settings.inbox_marker_ttl_s,
        )
        # No await between the check above and this assignment: concurrent first messages
        # cannot build two clients.
        wiring = _Wiring(loop, client, credential, settings, consumer)
        previous, self._wiring = self._wiring, wiring
        if previous is not None:
            await _closed_quietly(previous.close, "the previous event loop's clients")
        return wiring

    def stock_telemetry(self) -> ConsumerTelemetry:
        """The injected telemetry of the stock reservation consumer, or one on the global
        providers (``_subscription_telemetry``)."""
        from shared.stock.consumer import CONSUMER_NAME as STOCK_CONSUMER_NAME

        if self._stock_telemetry is None:
            self._stock_telemetry = self._subscription_telemetry(
                INVENTORY_SUBSCRIPTION_SETTING, STOCK_CONSUMER_NAME
            )
        return self._stock_telemetry

    def payment_telemetry(self) -> ConsumerTelemetry:
        """The injected telemetry of the payment capture consumer, or one on the global
        providers (``_subscription_telemetry``)."""
        from shared.payments.consumer import CONSUMER_NAME as PAYMENT_CONSUMER_NAME

        if self._payment_telemetry is None:
            self._payment_telemetry = self._subscription_telemetry(
                PAYMENTS_SUBSCRIPTION_SETTING, PAYMENT_CONSUMER_NAME
            )
        return self._payment_telemetry

    def _subscription_telemetry(
        self, subscription_setting: str, consumer: str
    ) -> ConsumerTelemetry:
        """A subscription consumer's telemetry on the global providers, named after its topic
        and subscription (from the raw settings, as ``telemetry``: the configuration-error path
        has no validated settings) and its consumer name (names.md)."""
        topic = self._env.get(TOPIC_SETTING, "").strip() or _UNKNOWN_TOPIC
        subscription = self._env.get(subscription_setting, "").strip() or _UNKNOWN_SUBSCRIPTION
        return ConsumerTelemetry(topic, subscription=subscription, consumer=consumer)

    def _settlements_hung(self, report: HungSettlements) -> None:
        self.telemetry().settlements_hung(report)

    def telemetry(self) -> ConsumerTelemetry:
        """The injected telemetry, or one on the global providers named after the queue (from
        the raw setting: the configuration-error path has no validated settings)."""
        if self._telemetry is None:
            queue = self._env.get(QUEUE_SETTING, "").strip() or _UNKNOWN_QUEUE
            self._telemetry = ConsumerTelemetry(queue)
        return self._telemetry

    async def close(self) -> None:
        """Close the clients, the credential and the settlement pool (shutdown, replacement)."""
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


_runtime: Runtime | None = None
_retired: list[Runtime] = []


def configure(composition: Composition | None = None) -> Runtime:
    """Make a ``Runtime`` of this composition the process's, from the next message or change
    batch on. Production never calls it: the first invocation configures one with the defaults.
    The replaced runtime is closed on the next ``close()`` or invocation."""
    global _runtime
    if _runtime is not None:
        _retired.append(_runtime)
    _runtime = Runtime(composition)
    return _runtime


def current() -> Runtime:
    """The process's runtime; configured with the defaults on first use."""
    return _runtime if _runtime is not None else configure()


async def handle_order_message(message: Any, actions: MessageActions) -> Decision:
    """The Service Bus trigger's body (``function_app.py``)."""
    if _retired:
        await _close_retired()
    return await current().handle(message, actions)


async def handle_stock_message(message: Any, actions: MessageActions) -> Decision:
    """The inventory subscription's trigger body (``function_app.py``, ``reserve_stock``)."""
    if _retired:
        await _close_retired()
    return await current().handle_stock(message, actions)


async def handle_payment_message(message: Any, actions: MessageActions) -> Decision:
    """The payments subscription's trigger body (``function_app.py``, ``capture_payment``)."""
    if _retired:
        await _close_retired()
    return await current().handle_payment(message, actions)


async def handle_outbox_changes(documents: Sequence[Mapping[str, Any]], context: Any) -> None:
    """The Cosmos DB trigger's body (``function_app.py``). ``context.retry_context`` (the host's
    count of retries of this batch) is not read: it counts the batch's failures, not an
    event's, so it never decides a park (``shared.relay.core``)."""
    if _retired:
        await _close_retired()
    await current().relay_changes(documents)


async def handle_watchdog_tick(timer: Any) -> None:
    """The timer trigger's body (``function_app.py``): one watchdog run. ``timer`` is the
    ``func.TimerRequest`` (``past_due`` when the host missed a schedule, e.g. after a restart:
    the run is the same)."""
    if _retired:
        await _close_retired()
    await current().watch_outbox()


async def handle_orders_request(action: str, request: func.HttpRequest) -> func.HttpResponse:
    """The orders API's HTTP functions' body (``function_app.py``): ``action`` is ``place``,
    ``amend``, ``cancel`` or ``get``."""
    if _retired:
        await _close_retired()
    return await current().orders_request(action, request)


def handle_openapi_request() -> func.HttpResponse:
    """The ``openapi`` function's body (``function_app.py``): the API's OpenAPI document, read
    through the HTTP adapter, imported on the first request (a cold start for an order never
    loads the orders API's modules)."""
    from shared.adapters.http_in import openapi_response

    return openapi_response()


async def handle_completer_tick(timer: Any) -> None:
    """The request completer's timer body (``function_app.py``, ``complete_requests``): one
    run. ``timer`` is the ``func.TimerRequest`` (a past-due run is the same)."""
    if _retired:
        await _close_retired()
    await current().complete_requests()


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


def _topic_sender(settings: RelaySettings) -> tuple[MessageBatchSender, tuple[Closer, ...]]:
    """The topic sender and what closes it, in order (sender, client, credential)."""
    return _service_bus_sender(
        settings.fully_qualified_namespace,
        settings.connection_string,
        settings.identity,
        topic=settings.topic_name,
    )


def _service_bus_sender(
    namespace: str | None,
    connection_string: str | None,
    identity: IdentitySettings,
    *,
    topic: str | None = None,
    queue: str | None = None,
) -> tuple[MessageBatchSender, tuple[Closer, ...]]:
    """A sender to ``topic`` or ``queue`` and what closes it, in order (sender, client,
    credential), identity-based on ``namespace`` or on an emulator's connection string. Opens
    no connection: the client connects on its first send."""
    from azure.servicebus.aio import ServiceBusClient  # only where it is used

    closers: tuple[Closer, ...]
    if namespace is not None:
        credential = identity_credential(identity)
        client = ServiceBusClient(namespace, credential)
        closers = (client.close, credential.close)
    else:
        assert connection_string is not None  # the settings guarantee one of them
        try:
            client = ServiceBusClient.from_connection_string(connection_string)
        except ValueError as error:
            # The SDK's parser refuses it (azure/servicebus/_base_handler.py:61,
            # _parse_conn_str): a configuration error naming the setting, never the SDK's bare
            # ValueError. Its messages are fixed texts; the string itself holds a key and is
            # never shown.
            raise ConfigurationError(
                SERVICE_BUS_CONNECTION_STRING_SETTING,
                f"is not a Service Bus connection string ({len(connection_string)} "
                f"characters): {error}",
            ) from error
        closers = (client.close,)
    if topic is not None:
        sender = client.get_topic_sender(topic)
    else:
        assert queue is not None  # one of the two, by the callers
        sender = client.get_queue_sender(queue)
    return sender, (sender.close, *closers)
