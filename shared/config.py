"""App settings, read once and validated; an invalid setting fails with its name in the message.

| setting | default | meaning |
|---|---|---|
| ``ORDERS_QUEUE_NAME`` | (required) | queue the trigger reads; also the span's destination name |
| ``COSMOS_ENDPOINT`` | (required) | ``https://<account>.documents.azure.com:443/`` |
| ``COSMOS_KEY`` | unset | base64 account key (emulators); unset -> Entra ID (below) |
| ``COSMOS_DATABASE`` | ``orders`` | database name |
| ``COSMOS_CONTAINER`` | ``orders`` | container name, partition key ``/orderId`` |
| ``COSMOS_VERIFY_TLS`` | ``true`` | ``false`` only for local emulators with self-signed certs |
| ``OUTBOX_ENABLED`` | ``true`` | write an OrderAccepted outbox event in the same batch |
| ``CosmosDBConnection__credential`` | unset | ``managedidentity``: the app's Cosmos DB client |
| | | uses ``ManagedIdentityCredential``; unset: ``DefaultAzureCredential`` (dev) |
| ``CosmosDBConnection__clientId`` | unset | the user-assigned identity's client id (a GUID) |

The credential settings are the host's own for the relay trigger's connection to the same
account, read as the host reads them (``shared.adapters.identity`` says why).

The outbox relay's own settings (``RelaySettings``), read only when the relay runs; it reuses
the Cosmos DB settings above for its marks:

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | topic the OrderAccepted events are sent to |
| ``ServiceBusConnection__fullyQualifiedNamespace`` | (this or the next) | the namespace, |
| | | identity-based: the queue trigger's own setting |
| ``ServiceBusConnection`` | | a connection string: emulators only |
| ``ServiceBusConnection__credential`` | unset | ``managedidentity``: a managed identity |
| ``ServiceBusConnection__clientId`` | unset | its user-assigned client id (the queue trigger's) |

The relay trigger's own connection is ``CosmosDBConnection``
(``CosmosDBConnection__accountEndpoint`` in Azure); the host reads it, not this module.

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

from shared.consumer.errors import ConfigurationError

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


def _integer(env: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(name, f"must be an integer, got {raw[:20]!r}") from None
    if value < minimum:
        raise ConfigurationError(name, f"must be at least {minimum}, got {value}")
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
