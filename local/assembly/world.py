"""The local stand-in, assembled in one place for tests, ``make demo``, ``make chaos`` and bench.

``local_world`` builds what this machine lacks around the real app: a Cosmos DB API server (or
uses the account it is given), the peek-lock queue model on a clock, the host's gRPC settlement
service, Microsoft's worker (``azure_functions_runtime``) started on the app directory with its
``ServiceBusMessageActions`` pointed at that service, and the host's two triggers: Service Bus
(``local.standins.host``) on the queue, and Cosmos DB (``local.standins.change_feed``) on the app's
container with its own Cosmos client, as the host's trigger has. The relay's side: the
``order-events`` topic model with its subscriptions and duplicate detection from
``infra/messaging.json``. The stock reservation's side: the ``inventory`` subscription of that
topic, the host's Service Bus trigger on it for ``reserve_stock`` (settled through the same
settlement service, which finds a lock token's entity as the extension does), and the
``inventory`` container (partition key ``/sku``), created here; ``seed_stock`` writes its stock
items. The payment capture's side: the ``payments`` subscription and the host's trigger on it for
``capture_payment`` (the same way), the ``payments`` container (partition key ``/orderId``), and
the payment provider stand-in (``local.standins.payment_provider``), started with the world on
its clock, its URL and key in the app settings the world composes (``World.env``). The
watchdog's side: the host's timer trigger (``local.standins.timer``)
for the app's timer-triggered function, ticked by the caller on the world's clock. The HTTP side,
when the app has HTTP-triggered functions: the host's HTTP trigger (``local.standins.http_host``)
started on a free port with keys of its own (``World.http_url``, ``World.function_key``), the
``requests`` container (partition key ``/orderId``, ``defaultTtl`` -1, as the edge needs:
``shared.edge.requests``) created here, and the orders API's sender to the queue: a real aio
``ServiceBusSender`` over ``local.standins.servicebus_link`` into the queue model (its duplicate
detection included), which ``World.compose`` hands the app; none otherwise. ``World.compose``
is the only place in ``local/`` that calls the app's composition root.

It must never reach into the app past the composition root's parameters: the app runs as in
Azure, only its clock, Cosmos client options, telemetry, the relay's topic sender (the topic
model, at the SDK sender's surface) and the edge's queue sender (the SDK's own) are injected.
The relay and the edge reach the models only once the world is composed: uncomposed, the app
would build a real ``ServiceBusClient``, as in Azure.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.core.pipeline.transport import AsyncHttpTransport
from azure.cosmos.aio import ContainerProxy
from azure.servicebus.aio import ServiceBusSender

from local.standins.broker import ManualClock, PeekLockQueue, QueueSettings
from local.standins.change_feed import ChangeFeedEmulator, Lease
from local.standins.cosmos_server import EMULATOR_KEY, LocalCosmosServer, ensure_container
from local.standins.host import LocalFunctionsHost, resolve_setting
from local.standins.http_host import HTTP_TRIGGER, HostKeys, LocalHttpHost
from local.standins.payment_provider import PaymentProviderStandIn
from local.standins.servicebus_link import LocalNamespace, async_servicebus_client
from local.standins.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from local.standins.timer import TimerTriggerEmulator
from local.standins.topic import OrderEventsTopic, topic_name
from local.standins.worker import REPO_ROOT, FunctionsWorker
from ops.init_cosmos import REQUESTS_INDEXING_POLICY
from shared import bootstrap
from shared.adapters.cosmos_orders import create_client
from shared.adapters.identity import credential as identity_credential
from shared.config import (
    PAYMENT_PROVIDER_API_KEY_SETTING,
    PAYMENT_PROVIDER_BASE_URL_SETTING,
    EdgeSettings,
    InventorySettings,
    PaymentSettings,
    Settings,
    is_loopback_endpoint,
)
from shared.edge import PARTITION_KEY_PATH as REQUESTS_PARTITION_KEY_PATH
from shared.payments.consumer import PARTITION_FIELD as PAYMENT_PARTITION_FIELD
from shared.stock.inventory import PARTITION_FIELD as STOCK_PARTITION_FIELD
from shared.stock.inventory import stock_item

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the manual clock's default start
STOCK_FUNCTION = "reserve_stock"
PAYMENT_FUNCTION = "capture_payment"
COMPLETER_FUNCTION = "complete_requests"  # the orders API's request completer (function_app.py)
# The container each consumer of a topic subscription writes, created by the world as the Bicep
# deploys it: its name from the app settings, and its partition key.
CONSUMER_CONTAINERS: dict[str, tuple[Callable[[Mapping[str, str]], str], str]] = {
    STOCK_FUNCTION: (
        lambda env: InventorySettings.from_env(env).container,
        f"/{STOCK_PARTITION_FIELD}",
    ),
    PAYMENT_FUNCTION: (
        lambda env: PaymentSettings.from_env(env).container,
        f"/{PAYMENT_PARTITION_FIELD}",
    ),
}

# Seconds the local change feed's reads may take, and its connections (see local_world).
TRIGGER_READ_TIMEOUT_S = 120
TRIGGER_CONNECTION_TIMEOUT_S = 30


@dataclass(frozen=True)
class CosmosAccount:
    endpoint: str
    key: str | None  # None: Entra ID (a real account: shared.adapters.identity)
    server_pid: int | None = None  # the local cosmosdb-server's process, when it is ours

    @property
    def is_local_server(self) -> bool:
        return self.server_pid is not None


@contextlib.contextmanager
def cosmos_account(
    endpoint: str | None = None, key: str | None = None, *, keep_alive: bool = True
) -> Iterator[CosmosAccount]:
    """The given account (the real emulator or an account), else a local cosmosdb-server for the
    duration."""
    if endpoint:
        yield CosmosAccount(endpoint, key)
        return
    with LocalCosmosServer(keep_alive=keep_alive) as server:
        yield CosmosAccount(server.endpoint, EMULATOR_KEY, server.pid)


def app_settings(
    account: CosmosAccount,
    *,
    container: str,
    queue_name: str = "orders",
    outbox: bool = True,
    verify_tls: bool = False,
    inventory_container: str = "inventory",
    payments_container: str = "payments",
    requests_container: str = "requests",
    payment_provider: PaymentProviderStandIn | None = None,
) -> dict[str, str]:
    """The app settings of the stand-in: what ``local.settings.json`` holds for ``func start``;
    the provider's URL and key once its stand-in has started (``payment_provider``)."""
    return {
        "ORDERS_QUEUE_NAME": queue_name,
        "COSMOS_ENDPOINT": account.endpoint,
        "COSMOS_DATABASE": "orders",
        "COSMOS_CONTAINER": container,
        # cosmosdb-server's certificate is self-signed, and so is the emulator's; the app takes
        # false only for a loopback endpoint (an account elsewhere is always verified)
        "COSMOS_VERIFY_TLS": "false"
        if (account.is_local_server or not verify_tls) and is_loopback_endpoint(account.endpoint)
        else "true",
        "OUTBOX_ENABLED": "true" if outbox else "false",
        **({"COSMOS_KEY": account.key} if account.key else {}),
        # The relay's: the topic of infra/messaging.json; a namespace for the settings' sake
        # (the composed relay sends to the topic model, never to it).
        "ORDER_EVENTS_TOPIC_NAME": topic_name(),
        "ServiceBusConnection__fullyQualifiedNamespace": "local.servicebus.windows.net",
        # The stock reservation's (names: the subscription and container the Bicep deploys).
        "INVENTORY_SUBSCRIPTION_NAME": "inventory",
        "INVENTORY_CONTAINER": inventory_container,
        # The payment capture's; PAYMENT_PROVIDER_TIMEOUT_SECONDS is left to its default.
        "PAYMENTS_SUBSCRIPTION_NAME": "payments",
        "PAYMENTS_CONTAINER": payments_container,
        "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "honoured",
        # The orders API's (it sends to ORDERS_QUEUE_NAME, through the world's queue sender).
        "REQUESTS_CONTAINER": requests_container,
        **(
            {
                PAYMENT_PROVIDER_BASE_URL_SETTING: payment_provider.url,
                PAYMENT_PROVIDER_API_KEY_SETTING: payment_provider.api_key,
            }
            if payment_provider is not None
            else {}
        ),
    }


@dataclass
class World:
    env: dict[str, str]
    clock: ManualClock
    queue: PeekLockQueue
    settlement: SettlementServer
    worker: FunctionsWorker
    host: LocalFunctionsHost
    topic: OrderEventsTopic
    # None for an app without a Cosmos DB-triggered function (a test's throwaway app).
    cosmos_trigger: ChangeFeedEmulator | None
    # None for an app without a timer-triggered function.
    timer_trigger: TimerTriggerEmulator | None = None
    # The host's Service Bus trigger of each function on a subscription of the topic, by name.
    subscription_hosts: dict[str, LocalFunctionsHost] = dataclasses.field(default_factory=dict)
    # The container of each of those functions (through the trigger's client), by name.
    consumer_containers: dict[str, ContainerProxy] = dataclasses.field(default_factory=dict)
    # The payment provider stand-in, when the app captures payments: the tests' referee.
    provider: PaymentProviderStandIn | None = None
    # The host's HTTP trigger, started when the app has HTTP-triggered functions.
    http_host: LocalHttpHost | None = None
    # With it: the requests container and the orders API's sender to the queue.
    requests_container: ContainerProxy | None = None
    queue_sender: ServiceBusSender | None = None
    # The host's timer trigger of the request completer, when the app has one.
    completer_trigger: TimerTriggerEmulator | None = None

    @property
    def http(self) -> LocalHttpHost:
        """The host's HTTP trigger: ``world.http.function_url("orders")``."""
        if self.http_host is None:
            raise LookupError("the app has no HTTP-triggered function")
        return self.http_host

    @property
    def http_url(self) -> str:
        """The HTTP host's origin, ``http://127.0.0.1:<port>`` (routes under its prefix)."""
        return self.http.url

    @property
    def function_key(self) -> str:
        """The host key ``default``: what a caller of a function-level function presents in
        ``x-functions-key`` (or ``code``)."""
        return self.http.keys.default

    @property
    def requests(self) -> ContainerProxy:
        """The orders API's ``requests`` container (through the trigger's client)."""
        if self.requests_container is None:
            raise LookupError("the app has no HTTP-triggered function")
        return self.requests_container

    def subscription_host(self, function: str) -> LocalFunctionsHost:
        """The host's trigger of ``function`` on its subscription of the topic."""
        if function not in self.subscription_hosts:
            raise LookupError(f"the app has no {function} function")
        return self.subscription_hosts[function]

    def consumer_container(self, function: str) -> ContainerProxy:
        """The container ``function`` writes, read through the trigger's client (the app has
        its own)."""
        if function not in self.consumer_containers:
            raise LookupError(f"the app has no {function} function")
        return self.consumer_containers[function]

    @property
    def stock_host(self) -> LocalFunctionsHost:
        """The host's trigger of ``reserve_stock`` on the inventory subscription:
        ``await world.stock_host.run_until_idle()``."""
        return self.subscription_host(STOCK_FUNCTION)

    @property
    def inventory(self) -> PeekLockQueue:
        """The inventory subscription (``reserve_stock``'s entity)."""
        return self.stock_host.queue

    @property
    def inventory_documents(self) -> ContainerProxy:
        """The inventory container."""
        return self.consumer_container(STOCK_FUNCTION)

    @property
    def payment_host(self) -> LocalFunctionsHost:
        """The host's trigger of ``capture_payment`` on the payments subscription."""
        return self.subscription_host(PAYMENT_FUNCTION)

    @property
    def payments(self) -> PeekLockQueue:
        """The payments subscription (``capture_payment``'s entity)."""
        return self.payment_host.queue

    @property
    def payments_documents(self) -> ContainerProxy:
        """The payments container."""
        return self.consumer_container(PAYMENT_FUNCTION)

    @property
    def payment_provider(self) -> PaymentProviderStandIn:
        """The payment provider stand-in the app calls: its ledger is the money that moved."""
        if self.provider is None:
            raise LookupError(f"the app has no {PAYMENT_FUNCTION} function")
        return self.provider

    async def seed_stock(self, on_hand: Mapping[str, int]) -> None:
        """Create (or replace) the stock item of each SKU with ``onHand`` and nothing reserved,
        as ``python -m ops stock`` does for a deployment."""
        for sku, count in on_hand.items():
            await self.inventory_documents.upsert_item(stock_item(sku, count))

    @property
    def settings(self) -> Settings:
        return Settings.from_env(self.env)

    @property
    def change_feed(self) -> ChangeFeedEmulator:
        """The host's Cosmos DB trigger on the app's container."""
        if self.cosmos_trigger is None:
            raise LookupError("the app has no Cosmos DB-triggered function")
        return self.cosmos_trigger

    @property
    def completer(self) -> TimerTriggerEmulator:
        """The host's timer trigger of the orders API's request completer:
        ``await world.completer.tick()``."""
        if self.completer_trigger is None:
            raise LookupError("the app has no request completer")
        return self.completer_trigger

    @property
    def watchdog(self) -> TimerTriggerEmulator:
        """The host's timer trigger of the outbox watchdog: ``await world.watchdog.tick()``."""
        if self.timer_trigger is None:
            raise LookupError("the app has no timer-triggered function")
        return self.timer_trigger

    def restart_change_feed(self) -> ChangeFeedEmulator:
        """A new trigger on the same lease: what the host does after the worker crashed (the
        batch in flight comes back from the last checkpoint, its retry count lost)."""
        feed = self.change_feed
        self.cosmos_trigger = ChangeFeedEmulator(
            feed.container,
            self.worker,
            function_name=feed.function.name,
            lease=feed.lease,
            clock=feed.clock,
            max_items_per_invocation=feed.max_items,
            start_from_beginning=feed.start_from_beginning,
            read_round_trip_s=feed.read_round_trip_s,
        )
        return self.cosmos_trigger

    def recreate_leases(self, *, start_from_beginning: bool | None = None) -> ChangeFeedEmulator:
        """The ``leases`` container deleted and created again (or a first deployment): a
        trigger with no lease state, which starts where its binding says, or where
        ``start_from_beginning`` says (another deployment's setting, on purpose)."""
        feed = self.change_feed
        self.cosmos_trigger = ChangeFeedEmulator(
            feed.container,
            self.worker,
            function_name=feed.function.name,
            lease=Lease(),
            clock=feed.clock,
            max_items_per_invocation=feed.max_items,
            start_from_beginning=start_from_beginning,
            read_round_trip_s=feed.read_round_trip_s,
        )
        return self.cosmos_trigger

    def compose(
        self,
        *,
        transport: AsyncHttpTransport[Any, Any] | None = None,
        topic_model: bool = True,
        **choices: Any,
    ) -> bootstrap.Runtime:
        """Compose the app (the consumers and the relay) on the world's clock with the world's
        topic as the relay's sender: the stand-in's one call of the composition root. Until this is
        called the app composes itself from the app settings on its first message, as in Azure.

        ``choices`` are ``bootstrap.Composition``'s fields (``env``, ``telemetry``, ``jitter``,
        ``relay_telemetry``, ``relay_policy``, ``topic_sender``, ``queue_sender`` ...); the
        orders API's queue sender is the world's (``World.queue_sender``) unless one is given; any
        other keyword is a
        Cosmos client option, as is ``transport`` (a fault-injecting one under the Cosmos SDK).
        ``topic_sender`` replaces the topic model (a real ``ServiceBusSender`` whose link a test
        controls); ``topic_model=False`` passes none, so the app builds its own from the
        settings, as in Azure."""
        fields = {f.name for f in dataclasses.fields(bootstrap.Composition)}
        chosen = {name: value for name, value in choices.items() if name in fields}
        client_options = {name: value for name, value in choices.items() if name not in fields}
        if transport is not None:
            client_options["transport"] = transport
        if chosen.get("topic_sender") is None:
            chosen["topic_sender"] = self.topic if topic_model else None
        if chosen.get("queue_sender") is None:
            chosen["queue_sender"] = self.queue_sender
        if chosen.get("env") is None:
            chosen["env"] = self.env
        chosen.setdefault("clock", self.clock)
        return bootstrap.configure(
            bootstrap.Composition(
                **{
                    **chosen,
                    "cosmos_options": {**chosen.get("cosmos_options", {}), **client_options},
                }
            )
        )


@contextlib.asynccontextmanager
async def local_world(
    *,
    account: CosmosAccount | None = None,
    container: str = "orders",
    outbox: bool = True,
    verify_tls: bool = False,
    clock: ManualClock | None = None,
    queue_settings: QueueSettings | None = None,
    max_concurrent_calls: int | None = None,
    settlement_threads: int = 8,
    app_directory: Path = REPO_ROOT,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[World]:
    """Start the stand-in; on exit stop it and close the app's composed clients.

    ``account`` None starts a local Cosmos server for the world's lifetime. ``env`` overrides
    the stand-in's app settings (``app_settings``). The container (and ``leases``) is the
    caller's to create; the change feed reads it once it exists. The subscription consumers'
    containers are created here (and left: a test deletes its own)."""
    with contextlib.ExitStack() as stack:
        if account is None:
            account = stack.enter_context(cosmos_account())
        clock = clock or ManualClock(START)
        queue = PeekLockQueue(queue_settings or QueueSettings.from_messaging_file(), clock=clock)
        # The host launches the worker with --host/--port of its gRPC services: the worker's
        # ServiceBusMessageActions settles against our settlement server.
        stack.enter_context(worker_arguments_restored())
        settlement = stack.enter_context(SettlementServer(queue, max_workers=settlement_threads))
        bind_message_actions(settlement.port)
        worker = await FunctionsWorker.start(app_directory)
        stack.callback(worker.close)
        provider = None
        if PAYMENT_FUNCTION in worker.functions:
            provider = stack.enter_context(PaymentProviderStandIn(clock=clock))
        settings_env = {
            **app_settings(
                account,
                container=container,
                outbox=outbox,
                verify_tls=verify_tls,
                payment_provider=provider,
            ),
            **(env or {}),
        }
        host = LocalFunctionsHost(
            queue, worker, app_settings=settings_env, max_concurrent_calls=max_concurrent_calls
        )
        topic = OrderEventsTopic.from_messaging_file(clock)
        # The trigger's own client (the host's CosmosDBConnection), apart from the app's, and
        # not bound by the consumer's 15 s read budget (CLIENT_OPTIONS): its feed reads are
        # pages of the local server's change log, but the demo's final read of a whole chaos
        # container goes through it too (a scan of the local server, which has no index).
        settings = Settings.from_env(settings_env)
        credential = None if settings.cosmos_key else identity_credential(settings.cosmos_identity)
        trigger_client = create_client(
            settings,
            credential=credential,
            read_timeout=TRIGGER_READ_TIMEOUT_S,
            connection_timeout=TRIGGER_CONNECTION_TIMEOUT_S,
        )
        has_cosmos_trigger = any(
            f.trigger["type"] == "cosmosDBTrigger" for f in worker.functions.values()
        )
        change_feed = (
            ChangeFeedEmulator(
                trigger_client.get_database_client(settings.cosmos_database).get_container_client(
                    settings.cosmos_container
                ),
                worker,
                app_settings=settings_env,
                lease=Lease(),
                clock=clock,
            )
            if has_cosmos_trigger
            else None
        )
        has_timer = any(f.trigger["type"] == "timerTrigger" for f in worker.functions.values())
        timer = TimerTriggerEmulator(worker, clock=clock) if has_timer else None
        completer = (
            TimerTriggerEmulator(worker, function_name=COMPLETER_FUNCTION, clock=clock)
            if COMPLETER_FUNCTION in worker.functions
            else None
        )
        subscription_hosts = _subscription_hosts(worker, topic, settlement, settings_env)
        consumer_containers: dict[str, ContainerProxy] = {}
        for function in subscription_hosts.keys() & CONSUMER_CONTAINERS.keys():
            container_name, partition_key = CONSUMER_CONTAINERS[function]
            consumer_containers[function] = await ensure_container(
                trigger_client,
                settings.cosmos_database,
                container_name(settings_env),
                partition_key,
            )
        has_http = any(f.trigger["type"] == HTTP_TRIGGER for f in worker.functions.values())
        http_host = LocalHttpHost(worker, keys=HostKeys.generate()) if has_http else None
        requests_container = None
        queue_sender = None
        if has_http:
            edge = EdgeSettings.from_env(settings_env)
            requests_container = await ensure_container(
                trigger_client,
                settings.cosmos_database,
                edge.requests_container,
                REQUESTS_PARTITION_KEY_PATH,
                default_ttl=-1,
                indexing_policy=REQUESTS_INDEXING_POLICY,
            )
            namespace = LocalNamespace(entities={edge.queue_name: queue})
            queue_client = async_servicebus_client(namespace)
            queue_sender = queue_client.get_queue_sender(edge.queue_name)
        try:
            if http_host is not None:
                await http_host.start()
            yield World(
                settings_env,
                clock,
                queue,
                settlement,
                worker,
                host,
                topic,
                change_feed,
                timer,
                subscription_hosts,
                consumer_containers,
                provider,
                http_host,
                requests_container,
                queue_sender,
                completer,
            )
        finally:
            try:
                if http_host is not None:
                    await http_host.stop()
            finally:
                try:
                    await bootstrap.close()
                    if queue_sender is not None:
                        await queue_sender.close()
                        await queue_client.close()
                finally:
                    await trigger_client.close()
                    if credential is not None:
                        await credential.close()


def _subscription_hosts(
    worker: FunctionsWorker,
    topic: OrderEventsTopic,
    settlement: SettlementServer,
    app_settings: Mapping[str, str],
) -> dict[str, LocalFunctionsHost]:
    """For each function triggered by a subscription of the topic: the subscription (created,
    as the Bicep deploys it), served by the one settlement service, and the host's trigger on
    it. A function on another topic has no model here and is left alone."""
    hosts: dict[str, LocalFunctionsHost] = {}
    for function in worker.functions.values():
        trigger = function.trigger
        if trigger["type"] != "serviceBusTrigger" or "topicName" not in trigger:
            continue
        if resolve_setting(str(trigger["topicName"]), app_settings) != topic.name:
            continue
        name = resolve_setting(str(trigger["subscriptionName"]), app_settings)
        subscription = topic.add_subscription(name)
        settlement.serve(subscription)
        hosts[function.name] = LocalFunctionsHost(
            subscription, worker, app_settings=app_settings, function_name=function.name
        )
    return hosts
