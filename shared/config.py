"""App settings, read once and validated; an invalid setting fails with its name in the message.

| setting | default | meaning |
|---|---|---|
| ``ORDERS_QUEUE_NAME`` | (required) | queue the trigger reads; also the span's destination name |
| ``COSMOS_ENDPOINT`` | (required) | ``https://<account>.documents.azure.com:443/`` |
| ``COSMOS_KEY`` | unset | base64 account key (emulators); unset -> Entra ID (below) |
| ``COSMOS_DATABASE`` | ``orders`` | database name |
| ``COSMOS_CONTAINER`` | ``orders`` | container name, partition key ``/orderId`` |
| ``COSMOS_VERIFY_TLS`` | ``true`` | ``false`` only for local emulators with self-signed certs |
| ``OUTBOX_ENABLED`` | ``true`` | write each change's outbox event in the same batch |
| ``INBOX_MARKER_TTL_SECONDS`` | the sum of the | the inbox markers' ``ttl`` (at most 2^31-1): how |
| | next two | long a handled message's MessageId is remembered |
| ``INBOX_REDELIVERY_HORIZON_SECONDS`` | ``1210200`` | what the queue can redeliver: lockDuration |
| | | x maxDeliveryCount + defaultMessageTimeToLive |
| ``DEAD_LETTER_REPLAY_HORIZON_SECONDS`` | ``1209600`` | how long after dead-lettering a |
| | | resubmitted copy is still recognised (14 days) |
| ``CosmosDBConnection__credential`` | unset | ``managedidentity``: the app's Cosmos DB client |
| | | uses ``ManagedIdentityCredential``; unset: ``DefaultAzureCredential`` (dev) |
| ``CosmosDBConnection__clientId`` | unset | the user-assigned identity's client id (a GUID) |

A marker window shorter than the two horizons together is a configuration error naming
``INBOX_MARKER_TTL_SECONDS``. infra/app/function.bicep sets all three, from infra/messaging.json
and main.bicep's ``deadLetterReplayHorizon``; the defaults here are what those compute by default
(this module never reads infra/: tests/infra/test_inbox_retention.py holds them equal).

The credential settings are the host's own for the relay trigger's connection to the same
account, read as the host reads them (``shared.adapters.identity`` says why).

The outbox relay's own settings (``RelaySettings``), read only when the relay runs; it reuses
the Cosmos DB settings above for its marks:

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | topic the order events are sent to |
| ``ServiceBusConnection__fullyQualifiedNamespace`` | (this or the next) | the namespace, |
| | | identity-based: the queue trigger's own setting |
| ``ServiceBusConnection`` | | a connection string: emulators only |
| ``ServiceBusConnection__credential`` | unset | ``managedidentity``: a managed identity |
| ``ServiceBusConnection__clientId`` | unset | its user-assigned client id (the queue trigger's) |

The relay trigger's own connection is ``CosmosDBConnection``
(``CosmosDBConnection__accountEndpoint`` in Azure); the host reads it, not this module.

The stock reservation consumer's (``InventorySettings``), read only when ``reserve_stock`` first
runs, so a deployment without them still runs ``consume_order``; it reuses the Cosmos DB
settings above (the same account, database and client) and ``INBOX_MARKER_TTL_SECONDS``:

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | the topic its subscription belongs to |
| ``INVENTORY_SUBSCRIPTION_NAME`` | (required) | the subscription the trigger reads (deployed: |
| | | ``inventory``); with the topic, the span's destination name |
| ``INVENTORY_CONTAINER`` | ``inventory`` | container name, partition key ``/sku`` |

The outbox watchdog's (``WatchdogSettings``), read only when it runs; it publishes through the
relay, with the relay's settings:

| setting | default | meaning |
|---|---|---|
| ``OUTBOX_WATCHDOG_MIN_AGE_SECONDS`` | ``300`` | an outbox document still pending this long |
| | | after its ``createdAt`` is stuck: republished (at least 60) |
| ``OUTBOX_WATCHDOG_MAX_DOCUMENTS`` | ``500`` | stuck documents republished per page |
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from shared.kit.errors import ConfigurationError

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}

COSMOS_CONNECTION = "CosmosDBConnection"  # the relay trigger's connection (function_app.py)
SERVICE_BUS_CONNECTION = "ServiceBusConnection"  # the queue trigger's
MANAGED_IDENTITY = "managedidentity"  # the one value the host documents for __credential


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """How a client authenticates, from an identity-based connection's settings as the
    Functions host reads them: ``<connection>__credential`` = ``managedidentity`` (any case) means
    a managed identity, the user-assigned one of ``<connection>__clientId`` if set; unset means
    the developer's identity (``DefaultAzureCredential``). As for the host, a client id without
    ``__credential`` is ignored."""

    managed: bool = False
    client_id: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], connection: str) -> IdentitySettings:
        credential_setting = f"{connection}__credential"
        client_id_setting = f"{connection}__clientId"
        credential = env.get(credential_setting, "").strip()
        if not credential:
            return cls()
        if credential.lower() != MANAGED_IDENTITY:
            raise ConfigurationError(
                credential_setting, f"must be {MANAGED_IDENTITY} or unset, got {credential[:40]!r}"
            )
        client_id = env.get(client_id_setting, "").strip() or None
        if client_id is not None:
            try:
                uuid.UUID(client_id)
            except ValueError:
                raise ConfigurationError(
                    client_id_setting,
                    f"must be the managed identity's client id (a GUID), got {client_id[:40]!r}",
                ) from None
        return cls(True, client_id)


# ---- inbox markers' retention ----------------------------------------------------------------
# The queue's semantics as infra/messaging.json deploys them, and main.bicep's default replay
# horizon: shared/ never reads infra/, so tests/infra/test_inbox_retention.py holds these equal to
# what the Bicep computes from that file (README "Inbox markers: retention" says why each term).
QUEUE_LOCK_DURATION_S = 60  # lockDuration PT1M
QUEUE_MAX_DELIVERY_COUNT = 10  # maxDeliveryCount
QUEUE_MESSAGE_TTL_S = 14 * 86_400  # defaultMessageTimeToLive P14D
DEFAULT_REDELIVERY_HORIZON_S = (
    QUEUE_LOCK_DURATION_S * QUEUE_MAX_DELIVERY_COUNT + QUEUE_MESSAGE_TTL_S
)
DEFAULT_DEAD_LETTER_REPLAY_HORIZON_S = 14 * 86_400  # deadLetterReplayHorizon P14D
DEFAULT_INBOX_MARKER_TTL_S = DEFAULT_REDELIVERY_HORIZON_S + DEFAULT_DEAD_LETTER_REPLAY_HORIZON_S
# Cosmos DB's largest per-item ttl (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live).
COSMOS_MAX_TTL_S = 2**31 - 1

INBOX_MARKER_TTL_SETTING = "INBOX_MARKER_TTL_SECONDS"
REDELIVERY_HORIZON_SETTING = "INBOX_REDELIVERY_HORIZON_SECONDS"
DEAD_LETTER_REPLAY_HORIZON_SETTING = "DEAD_LETTER_REPLAY_HORIZON_SECONDS"


def _inbox_marker_ttl(env: Mapping[str, str]) -> int:
    """The markers' window, at least the redelivery and replay horizons together: a marker that
    expires sooner forgets a MessageId the queue or an operator may still bring back."""
    redelivery = _integer(
        env,
        REDELIVERY_HORIZON_SETTING,
        DEFAULT_REDELIVERY_HORIZON_S,
        minimum=1,
        maximum=COSMOS_MAX_TTL_S,
    )
    replay = _integer(
        env,
        DEAD_LETTER_REPLAY_HORIZON_SETTING,
        DEFAULT_DEAD_LETTER_REPLAY_HORIZON_S,
        minimum=0,
        maximum=COSMOS_MAX_TTL_S,
    )
    floor = redelivery + replay
    ttl = _integer(env, INBOX_MARKER_TTL_SETTING, floor, minimum=1, maximum=COSMOS_MAX_TTL_S)
    if ttl < floor:
        raise ConfigurationError(
            INBOX_MARKER_TTL_SETTING,
            f"must be at least {REDELIVERY_HORIZON_SETTING} + {DEAD_LETTER_REPLAY_HORIZON_SETTING}"
            f" = {redelivery} + {replay} = {floor}, got {ttl}",
        )
    return ttl


@dataclass(frozen=True, slots=True)
class Settings:
    queue_name: str
    cosmos_endpoint: str
    cosmos_key: str | None = None
    cosmos_database: str = "orders"
    cosmos_container: str = "orders"
    cosmos_verify_tls: bool = True
    outbox_enabled: bool = True
    cosmos_identity: IdentitySettings = field(default_factory=IdentitySettings)
    inbox_marker_ttl_s: int = DEFAULT_INBOX_MARKER_TTL_S

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        endpoint = _required(env, "COSMOS_ENDPOINT")
        parsed = urlparse(endpoint)
        if parsed.scheme != "https" or not parsed.hostname:
            raise ConfigurationError(
                "COSMOS_ENDPOINT", f"must be an https:// URL, got {endpoint[:80]!r}"
            )
        return cls(
            queue_name=_required(env, "ORDERS_QUEUE_NAME"),
            cosmos_endpoint=endpoint,
            cosmos_key=_account_key(env, "COSMOS_KEY"),
            cosmos_database=_name(env, "COSMOS_DATABASE", "orders"),
            cosmos_container=_name(env, "COSMOS_CONTAINER", "orders"),
            cosmos_verify_tls=_flag(env, "COSMOS_VERIFY_TLS", default=True),
            outbox_enabled=_flag(env, "OUTBOX_ENABLED", default=True),
            cosmos_identity=IdentitySettings.from_env(env, COSMOS_CONNECTION),
            inbox_marker_ttl_s=_inbox_marker_ttl(env),
        )


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(name, "is required but not set")
    return value


def _account_key(env: Mapping[str, str], name: str) -> str | None:
    # The SDK decodes the key only when it signs the first request, and a binascii.Error there
    # would look like a failure of the order; checked here, it is the configuration error it is.
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if not decoded:
        # Never echo a key, even a broken one.
        raise ConfigurationError(name, f"is not a base64 account key ({len(value)} characters)")
    return value


def _name(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip() or default
    if any(char in value for char in "/\\?#") or len(value) > 255:
        raise ConfigurationError(name, f"is not a valid Cosmos DB resource name: {value[:80]!r}")
    return value


def _flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigurationError(name, f"must be true or false, got {raw[:20]!r}")


TOPIC_SETTING = "ORDER_EVENTS_TOPIC_NAME"
NAMESPACE_SETTING = "ServiceBusConnection__fullyQualifiedNamespace"
SERVICE_BUS_CONNECTION_STRING_SETTING = SERVICE_BUS_CONNECTION  # the setting itself: a string


@dataclass(frozen=True, slots=True)
class RelaySettings:
    topic_name: str
    fully_qualified_namespace: str | None = None
    connection_string: str | None = None
    identity: IdentitySettings = field(default_factory=IdentitySettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RelaySettings:
        topic = _required(env, TOPIC_SETTING)
        namespace = env.get(NAMESPACE_SETTING, "").strip() or None
        connection_string = env.get(SERVICE_BUS_CONNECTION_STRING_SETTING, "").strip() or None
        if namespace is None and connection_string is None:
            raise ConfigurationError(
                NAMESPACE_SETTING,
                f"is required (or {SERVICE_BUS_CONNECTION_STRING_SETTING} for emulators)",
            )
        if namespace is not None and ("/" in namespace or "." not in namespace):
            raise ConfigurationError(
                NAMESPACE_SETTING, f"must be <name>.servicebus.windows.net, got {namespace[:80]!r}"
            )
        return cls(
            topic,
            namespace,
            None if namespace else connection_string,
            IdentitySettings.from_env(env, SERVICE_BUS_CONNECTION)
            if namespace
            else IdentitySettings(),
        )


INVENTORY_SUBSCRIPTION_SETTING = "INVENTORY_SUBSCRIPTION_NAME"
INVENTORY_CONTAINER_SETTING = "INVENTORY_CONTAINER"


@dataclass(frozen=True, slots=True)
class InventorySettings:
    """The stock reservation consumer's own settings (``reserve_stock``): where its events come
    from and where it writes. The Cosmos DB account, database and credential, and the markers'
    window (``INBOX_MARKER_TTL_SECONDS``) are ``Settings``'s: one client serves every function."""

    topic_name: str
    subscription_name: str
    container: str = "inventory"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> InventorySettings:
        subscription = _required(env, INVENTORY_SUBSCRIPTION_SETTING)
        if any(char in subscription for char in "/\\?#") or len(subscription) > 50:
            # Service Bus subscription names: at most 50 characters, no path separators
            # (learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules,
            # Microsoft.ServiceBus namespaces/topics/subscriptions).
            raise ConfigurationError(
                INVENTORY_SUBSCRIPTION_SETTING,
                f"is not a Service Bus subscription name: {subscription[:80]!r}",
            )
        return cls(
            topic_name=_required(env, TOPIC_SETTING),
            subscription_name=subscription,
            container=_name(env, INVENTORY_CONTAINER_SETTING, "inventory"),
        )

    @property
    def destination(self) -> str:
        """The entity the trigger reads, as spans and metrics name it:
        ``<topic>/<subscription>``."""
        return f"{self.topic_name}/{self.subscription_name}"


WATCHDOG_MIN_AGE_SETTING = "OUTBOX_WATCHDOG_MIN_AGE_SECONDS"
WATCHDOG_MAX_DOCUMENTS_SETTING = "OUTBOX_WATCHDOG_MAX_DOCUMENTS"
# Younger than this, a pending document is most likely on its way through the change feed (its
# poll delay is 5 s, a retried batch waits up to 5 min between attempts): republishing it would
# only double the sends.
MIN_WATCHDOG_AGE_S = 60


@dataclass(frozen=True, slots=True)
class WatchdogSettings:
    min_age_s: int = 300
    max_documents: int = 500

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WatchdogSettings:
        return cls(
            min_age_s=_integer(env, WATCHDOG_MIN_AGE_SETTING, 300, minimum=MIN_WATCHDOG_AGE_S),
            max_documents=_integer(env, WATCHDOG_MAX_DOCUMENTS_SETTING, 500, minimum=1),
        )


def _integer(
    env: Mapping[str, str], name: str, default: int, *, minimum: int, maximum: int | None = None
) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        value = default
    else:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigurationError(name, f"must be an integer, got {raw[:20]!r}") from None
    if value < minimum:
        raise ConfigurationError(name, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(name, f"must be at most {maximum}, got {value}")
    return value


# ---- host.json ---------------------------------------------------------------------------------
# The host's own configuration file, deployed next to function_app.py: the app reads the Service
# Bus extension's section of it (the settlement pool is sized from maxConcurrentCalls), and so do
# the local stand-in host (``local.standins.host``) and the tests. The one reader of that file.

HOST_JSON = Path(__file__).resolve().parent.parent / "host.json"
DEFAULT_MAX_CONCURRENT_CALLS = 16  # the Service Bus extension's default


def max_concurrent_calls(host_json: Path = HOST_JSON) -> int:
    """host.json ``extensions.serviceBus.maxConcurrentCalls``, or the extension's default."""
    try:
        value = json.loads(host_json.read_text())["extensions"]["serviceBus"]["maxConcurrentCalls"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_MAX_CONCURRENT_CALLS
    return value if isinstance(value, int) and value >= 1 else DEFAULT_MAX_CONCURRENT_CALLS
