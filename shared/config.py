"""App settings, read once and validated; an invalid setting fails with its name in the message.

| setting | default | meaning |
|---|---|---|
| ``ORDERS_QUEUE_NAME`` | (required) | queue the trigger reads; also the span's destination name |
| ``COSMOS_ENDPOINT`` | (required) | ``https://<account>.documents.azure.com:443/``; a bad |
| | | one is shown by scheme and host only, a connection string not at all |
| ``COSMOS_KEY`` | unset | base64 account key (emulators); unset -> Entra ID (below) |
| ``COSMOS_DATABASE`` | ``orders`` | database name |
| ``COSMOS_CONTAINER`` | ``orders`` | container name, partition key ``/orderId`` |
| ``COSMOS_VERIFY_TLS`` | ``true`` | ``false`` only for a loopback endpoint (``localhost``, |
| | | 127.0.0.0/8, ``::1``): a local emulator's self-signed certificate |
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

The public edge's (``EdgeSettings``), read on its first HTTP request; it reuses the Cosmos DB
settings above (the same client) and the relay's Service Bus connection settings (the queue
trigger's):

| setting | default | meaning |
|---|---|---|
| ``ORDERS_QUEUE_NAME`` | (required) | the queue its messages go to: the one the trigger reads |
| ``REQUESTS_CONTAINER`` | ``requests`` | the request records and order heads, partition key |
| | | ``/orderId``, ``defaultTtl`` -1 (``shared.edge.requests``) |

The stock reservation consumer's (``InventorySettings``), read only when ``reserve_stock`` first
runs, so a deployment without them still runs ``consume_order``; it reuses the Cosmos DB
settings above (the same account, database and client) and ``INBOX_MARKER_TTL_SECONDS``:

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | the topic its subscription belongs to |
| ``INVENTORY_SUBSCRIPTION_NAME`` | (required) | the subscription the trigger reads (deployed: |
| | | ``inventory``); with the topic, the span's destination name |
| ``INVENTORY_CONTAINER`` | ``inventory`` | container name, partition key ``/sku`` |

The payment capture consumer's (``PaymentSettings``), read only when ``capture_payment`` first
runs, so a deployment without them still runs the other functions; it too reuses the Cosmos DB
settings and ``INBOX_MARKER_TTL_SECONDS``:

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | the topic its subscription belongs to |
| ``PAYMENTS_SUBSCRIPTION_NAME`` | (required) | the subscription the trigger reads (deployed: |
| | | ``payments``) |
| ``PAYMENTS_CONTAINER`` | ``payments`` | container name, partition key ``/orderId`` |
| ``PAYMENT_PROVIDER_BASE_URL`` | (required) | the provider's origin, without the API version |
| | | (the adapter's paths carry it): ``https://``; plain ``http://`` only |
| | | to a loopback host (the local stand-in) |
| ``PAYMENT_PROVIDER_API_KEY`` | (required) | the provider's credential (in Azure a Key Vault |
| | | reference); never logged, never in an error message |
| ``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS`` | ``honoured`` | ``honoured``, or ``ignored``: a |
| | | provider that honours no Idempotency-Key (looked up before any repeat) |
| ``PAYMENT_PROVIDER_TIMEOUT_SECONDS`` | ``10`` | each provider request's whole timeout; also the |
| | | call deadline: an attempt is sent within it of its record or not at all |
| | | (``shared.kit.external``) |
| ``PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS`` | unset | the provider's stated bound on how |
| | | long a request it received can still take effect (0-300). Unset: not stated, so |
| | | with ``ignored`` keys an attempt that may have been sent is never made again: parked |

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
import ipaddress
import math
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from idempotent_consumer import ConfigurationError

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
# what the Bicep computes from that file (docs/configuration.md, "Inbox markers: retention", says
# why each term).
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
        endpoint = _cosmos_endpoint(env)
        return cls(
            queue_name=_required(env, "ORDERS_QUEUE_NAME"),
            cosmos_endpoint=endpoint,
            cosmos_key=_account_key(env, "COSMOS_KEY"),
            cosmos_database=_name(env, "COSMOS_DATABASE", "orders"),
            cosmos_container=_name(env, "COSMOS_CONTAINER", "orders"),
            cosmos_verify_tls=_cosmos_verify_tls(env, endpoint),
            outbox_enabled=_flag(env, "OUTBOX_ENABLED", default=True),
            cosmos_identity=IdentitySettings.from_env(env, COSMOS_CONNECTION),
            inbox_marker_ttl_s=_inbox_marker_ttl(env),
        )


COSMOS_ENDPOINT_SETTING = "COSMOS_ENDPOINT"
COSMOS_VERIFY_TLS_SETTING = "COSMOS_VERIFY_TLS"
# ``Name=value;...``, or an account key anywhere: what the portal's "Keys" blade copies, whose
# AccountKey the critical log would show with the value.
_CONNECTION_STRING = re.compile(r"(?:^|;)\s*[A-Za-z][A-Za-z0-9_]*\s*=|AccountKey\s*=", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,15}$")
_HOST_NAME = re.compile(r"^[a-z0-9_.-]{1,253}$")


def _cosmos_endpoint(env: Mapping[str, str]) -> str:
    """An https:// URL with a host and no user information. A bad one is shown by its scheme
    and host only: its path, query, user information (a SAS, a password) never reach the
    critical log; a connection string, nothing at all (its AccountKey is the account's key)."""
    endpoint = _required(env, COSMOS_ENDPOINT_SETTING)
    if _CONNECTION_STRING.search(endpoint):
        raise ConfigurationError(
            COSMOS_ENDPOINT_SETTING,
            "looks like a connection string (value not shown), not the account's URL: set "
            "https://<account>.documents.azure.com:443/ here, and the key, if any, in COSMOS_KEY",
        )
    try:
        parsed = urlparse(endpoint)
        host = parsed.hostname
        parsed.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError:  # an unclosed IPv6 bracket, a port out of range
        scheme, host = "", None
    else:
        scheme = parsed.scheme
        no_user = parsed.username is None and parsed.password is None
        if scheme == "https" and host and _is_host(host) and no_user:
            return endpoint
    raise ConfigurationError(
        COSMOS_ENDPOINT_SETTING,
        f"must be an https:// URL with a host and no user information, got "
        f"{_scheme_and_host(scheme, host, len(endpoint))}",
    )


def _scheme_and_host(scheme: str, host: str | None, length: int) -> str:
    """``'scheme://host'`` of a URL, or what it is not; nothing else of the value."""
    if not _SCHEME.match(scheme) or not host:
        return f"a value that is not a URL ({length} characters)"
    if not _is_host(host):
        return f"a {scheme}:// URL whose host is not a host name"
    return repr(f"{scheme}://{host}")


def _is_host(host: str) -> bool:
    """A host name or an IP address (``urlparse`` takes any text between ``//`` and ``/``)."""
    if _HOST_NAME.match(host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _cosmos_verify_tls(env: Mapping[str, str], endpoint: str) -> bool:
    """True unless set false, and false only for a loopback endpoint: an emulator's self-signed
    certificate on this machine (``_is_loopback``, the provider URL's rule). Anywhere else an
    unverified connection would hand the account key, or a managed identity's token, to whoever
    answers for the host."""
    verify = _flag(env, COSMOS_VERIFY_TLS_SETTING, default=True)
    host = urlparse(endpoint).hostname or ""
    if verify or _is_loopback(host):
        return verify
    raise ConfigurationError(
        COSMOS_VERIFY_TLS_SETTING,
        f"may be false only for a loopback endpoint (localhost, 127.0.0.0/8, ::1), and "
        f"{COSMOS_ENDPOINT_SETTING}'s host {host[:80]!r} is not one",
    )


def is_loopback_endpoint(endpoint: str) -> bool:
    """Whether ``COSMOS_VERIFY_TLS`` may be false for this endpoint (the local stand-in's
    assembly asks before it writes the setting)."""
    return _is_loopback(urlparse(endpoint).hostname or "")


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
        return cls(topic, *_service_bus_connection(env))


def _service_bus_connection(
    env: Mapping[str, str],
) -> tuple[str | None, str | None, IdentitySettings]:
    """The namespace (identity-based) or the connection string (emulators), and the identity:
    the queue trigger's connection, which every sender of the app uses."""
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
    if namespace is not None:
        return namespace, None, IdentitySettings.from_env(env, SERVICE_BUS_CONNECTION)
    return None, connection_string, IdentitySettings()


QUEUE_SETTING = "ORDERS_QUEUE_NAME"
REQUESTS_CONTAINER_SETTING = "REQUESTS_CONTAINER"


@dataclass(frozen=True, slots=True)
class EdgeSettings:
    """The public edge's own settings (the HTTP functions), read on its first request, so a
    deployment without them still runs the consumers: where it records requests and where it
    sends their messages. The Cosmos DB account, database and client are ``Settings``'s; the
    queue is the one ``consume_order`` reads, on the queue trigger's connection."""

    queue_name: str
    requests_container: str = "requests"
    fully_qualified_namespace: str | None = None
    connection_string: str | None = None
    identity: IdentitySettings = field(default_factory=IdentitySettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EdgeSettings:
        namespace, connection_string, identity = _service_bus_connection(env)
        return cls(
            queue_name=_required(env, QUEUE_SETTING),
            requests_container=_name(env, REQUESTS_CONTAINER_SETTING, "requests"),
            fully_qualified_namespace=namespace,
            connection_string=connection_string,
            identity=identity,
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
        return cls(
            topic_name=_required(env, TOPIC_SETTING),
            subscription_name=_subscription(env, INVENTORY_SUBSCRIPTION_SETTING),
            container=_name(env, INVENTORY_CONTAINER_SETTING, "inventory"),
        )

    @property
    def destination(self) -> str:
        """The entity the trigger reads, as spans and metrics name it:
        ``<topic>/<subscription>``."""
        return f"{self.topic_name}/{self.subscription_name}"


def _subscription(env: Mapping[str, str], name: str) -> str:
    subscription = _required(env, name)
    if any(char in subscription for char in "/\\?#") or len(subscription) > 50:
        # Service Bus subscription names: at most 50 characters, no path separators
        # (learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules,
        # Microsoft.ServiceBus namespaces/topics/subscriptions).
        raise ConfigurationError(
            name, f"is not a Service Bus subscription name: {subscription[:80]!r}"
        )
    return subscription


PAYMENTS_SUBSCRIPTION_SETTING = "PAYMENTS_SUBSCRIPTION_NAME"
PAYMENTS_CONTAINER_SETTING = "PAYMENTS_CONTAINER"
PAYMENT_PROVIDER_BASE_URL_SETTING = "PAYMENT_PROVIDER_BASE_URL"
PAYMENT_PROVIDER_API_KEY_SETTING = "PAYMENT_PROVIDER_API_KEY"
PAYMENT_PROVIDER_KEYS_SETTING = "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS"
PAYMENT_PROVIDER_TIMEOUT_SETTING = "PAYMENT_PROVIDER_TIMEOUT_SECONDS"
KEYS_HONOURED = "honoured"
KEYS_IGNORED = "ignored"
DEFAULT_PAYMENT_PROVIDER_TIMEOUT_S = 10.0
# A provider request must end well within the delivery's lock (lockDuration PT1M,
# infra/messaging.json), so that the in-delivery retry can still look it up and complete.
MAX_PAYMENT_PROVIDER_TIMEOUT_S = 30.0
PAYMENT_PROVIDER_PROCESSING_BOUND_SETTING = "PAYMENT_PROVIDER_PROCESSING_BOUND_SECONDS"
# A waiting delivery holds its lock about 55 s, and the broker redelivers 10 times: a bound
# longer than the deliveries left after the third can wait out would dead-letter the event
# MaxDeliveryCountExceeded, unmarked and uncounted, instead of making or parking its call.
MAX_PAYMENT_PROVIDER_PROCESSING_BOUND_S = 300.0
# What App Service leaves in a setting whose Key Vault reference it could not resolve: "If a
# reference isn't resolved properly, the reference string is used instead"
# (learn.microsoft.com/azure/app-service/app-service-key-vault-references, Troubleshoot).
_KEY_VAULT_REFERENCE = "@microsoft.keyvault("


@dataclass(frozen=True, slots=True)
class PaymentSettings:
    """The payment capture consumer's own settings (``capture_payment``): its subscription, its
    container, and the provider it calls. The Cosmos DB account, database and credential and the
    markers' window are ``Settings``'s. ``provider_api_key`` is never shown (``repr``) and no
    error of this class carries it."""

    topic_name: str
    subscription_name: str
    provider_base_url: str
    provider_api_key: str = field(repr=False)
    container: str = "payments"
    provider_honours_keys: bool = True
    provider_timeout_s: float = DEFAULT_PAYMENT_PROVIDER_TIMEOUT_S
    provider_processing_bound_s: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PaymentSettings:
        return cls(
            topic_name=_required(env, TOPIC_SETTING),
            subscription_name=_subscription(env, PAYMENTS_SUBSCRIPTION_SETTING),
            provider_base_url=_provider_base_url(env),
            provider_api_key=_provider_api_key(env),
            container=_name(env, PAYMENTS_CONTAINER_SETTING, "payments"),
            provider_honours_keys=_provider_honours_keys(env),
            provider_timeout_s=_provider_timeout(env),
            provider_processing_bound_s=_provider_processing_bound(env),
        )


def _provider_base_url(env: Mapping[str, str]) -> str:
    """https, or plain http to a loopback host: the local stand-in serves no TLS
    (``local.standins.payment_provider``) and a loopback request never leaves the machine, so the
    credential crosses no network; anything else would send it in clear. In Azure the Bicep
    refuses any scheme but https (infra/app/function.bicep)."""
    raw = _required(env, PAYMENT_PROVIDER_BASE_URL_SETTING)
    try:
        parsed = urlparse(raw)
        host = parsed.hostname
        parsed.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError:
        host = None
    # The URL is shown by its scheme and host only: whatever else it holds stays unshown.
    if not host or parsed.username is not None or parsed.password is not None:
        raise ConfigurationError(
            PAYMENT_PROVIDER_BASE_URL_SETTING,
            "must be an https:// URL with a host and no user information",
        )
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
        # The API's paths (/v1/captures ...) are the provider profile's: a base URL with a path
        # of its own would be joined into another one (https://host/v1 + /v1/captures).
        raise ConfigurationError(
            PAYMENT_PROVIDER_BASE_URL_SETTING,
            "must be the provider's origin, scheme://host[:port] with no path: the API's paths "
            "are the provider profile's (shared/adapters/payment_profile.py)",
        )
    if parsed.scheme == "https" or (parsed.scheme == "http" and _is_loopback(host)):
        return raw
    raise ConfigurationError(
        PAYMENT_PROVIDER_BASE_URL_SETTING,
        f"must be an https:// URL (plain http only to a loopback host), got "
        f"{parsed.scheme[:10]!r} to {host[:80]!r}",
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _provider_api_key(env: Mapping[str, str]) -> str:
    # Never echo the value, not even a part of it: it is the provider's credential.
    key = _required(env, PAYMENT_PROVIDER_API_KEY_SETTING)
    if key.lower().startswith(_KEY_VAULT_REFERENCE):
        raise ConfigurationError(
            PAYMENT_PROVIDER_API_KEY_SETTING,
            "is a Key Vault reference App Service did not resolve (the app's identity cannot "
            "read the secret payment-provider-api-key, or the reference is wrong)",
        )
    if any(not 0x21 <= ord(char) <= 0x7E for char in key):
        # An Authorization header carries visible ASCII only (RFC 9110 section 5.5).
        raise ConfigurationError(
            PAYMENT_PROVIDER_API_KEY_SETTING,
            f"holds characters an HTTP header cannot carry ({len(key)} characters)",
        )
    return key


def _provider_honours_keys(env: Mapping[str, str]) -> bool:
    raw = env.get(PAYMENT_PROVIDER_KEYS_SETTING, "").strip().lower() or KEYS_HONOURED
    if raw not in (KEYS_HONOURED, KEYS_IGNORED):
        raise ConfigurationError(
            PAYMENT_PROVIDER_KEYS_SETTING,
            f"must be {KEYS_HONOURED} or {KEYS_IGNORED}, got {raw[:20]!r}",
        )
    return raw == KEYS_HONOURED


def _provider_timeout(env: Mapping[str, str]) -> float:
    value = _seconds(
        env,
        PAYMENT_PROVIDER_TIMEOUT_SETTING,
        lambda value: 0 < value <= MAX_PAYMENT_PROVIDER_TIMEOUT_S,
        f"above 0 and at most {MAX_PAYMENT_PROVIDER_TIMEOUT_S:g}",
    )
    return DEFAULT_PAYMENT_PROVIDER_TIMEOUT_S if value is None else value


def _seconds(
    env: Mapping[str, str], setting: str, allowed: Callable[[float], bool], rule: str
) -> float | None:
    """A number of seconds within ``rule`` (``allowed``), or None when unset."""
    raw = env.get(setting, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or math.isinf(value) or not allowed(value):
        raise ConfigurationError(setting, f"must be a number of seconds {rule}, got {raw[:20]!r}")
    return value


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
# the local stand-in host (``local.standins.host``) and the tests, each through the kit's reader
# (``idempotent_consumer.servicebus.max_concurrent_calls``) given this path.

HOST_JSON = Path(__file__).resolve().parent.parent / "host.json"


def _provider_processing_bound(env: Mapping[str, str]) -> float | None:
    return _seconds(
        env,
        PAYMENT_PROVIDER_PROCESSING_BOUND_SETTING,
        lambda value: 0 <= value <= MAX_PAYMENT_PROVIDER_PROCESSING_BOUND_S,
        f"from 0 to {MAX_PAYMENT_PROVIDER_PROCESSING_BOUND_S:g} (unset: the provider states none)",
    )
