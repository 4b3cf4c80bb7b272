"""The app settings a bound consumer reads, by documented names with defaults, validated once
when the consumer is first built; a bad one is a ``ConfigurationError`` naming the setting, never
echoing a value that could be a secret.

- ``COSMOS_ENDPOINT`` (required): the account's URL, ``https://<account>.documents.azure.com:443/``;
- ``COSMOS_DATABASE`` (required): the database of the consumer's container;
- ``COSMOS_CONTAINER``, or the binder's ``container_setting`` (required): the consumer's
  container, partitioned on the definition's ``partition_field``;
- ``COSMOS_KEY`` (unset): the account key; unset, an Entra ID credential:
- ``COSMOS_CLIENT_ID`` (unset): with no key, the user-assigned managed identity's client id
  (``ManagedIdentityCredential``); unset too, ``DefaultAzureCredential``;
- ``COSMOS_VERIFY_TLS`` (``true``): ``false`` is honoured only for a loopback endpoint (a local
  emulator's self-signed certificate);
- ``INBOX_MARKER_TTL_SECONDS`` (``2419800``, 28 days and 10 minutes): how long a handled
  message's marker is kept: longer than every redelivery of the queue and a dead-letter replay.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from idempotent_consumer import ConfigurationError

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential

COSMOS_ENDPOINT_SETTING = "COSMOS_ENDPOINT"
COSMOS_DATABASE_SETTING = "COSMOS_DATABASE"
COSMOS_CONTAINER_SETTING = "COSMOS_CONTAINER"
COSMOS_KEY_SETTING = "COSMOS_KEY"
COSMOS_CLIENT_ID_SETTING = "COSMOS_CLIENT_ID"
COSMOS_VERIFY_TLS_SETTING = "COSMOS_VERIFY_TLS"
INBOX_MARKER_TTL_SETTING = "INBOX_MARKER_TTL_SECONDS"
# A marker must outlive every delivery of its message: a Service Bus queue's default lock (60 s)
# times its default max delivery count (10), the message's time to live (14 days, Standard's
# default), and a dead letter replayed within 14 days.
DEFAULT_INBOX_MARKER_TTL_S = 60 * 10 + 14 * 86_400 + 14 * 86_400
# Cosmos DB's largest per-item ttl (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live).
MAX_TTL_S = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """What one bound consumer needs from the app settings (the module's table)."""

    endpoint: str
    database: str
    container: str
    key: str | None = None
    client_id: str | None = None
    verify_tls: bool = True
    marker_ttl_s: int = DEFAULT_INBOX_MARKER_TTL_S

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, container_setting: str = COSMOS_CONTAINER_SETTING
    ) -> ConsumerSettings:
        endpoint = _required(env, COSMOS_ENDPOINT_SETTING)
        parsed = urlparse(endpoint)
        loopback = _is_loopback(parsed.hostname or "")
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise ConfigurationError(COSMOS_ENDPOINT_SETTING, "must be the account's https:// URL")
        if parsed.scheme == "http" and not loopback:
            raise ConfigurationError(
                COSMOS_ENDPOINT_SETTING, "must be https:// (http only on loopback)"
            )
        verify = env.get(COSMOS_VERIFY_TLS_SETTING, "true").strip().lower()
        if verify not in ("true", "false"):
            raise ConfigurationError(COSMOS_VERIFY_TLS_SETTING, "must be true or false")
        if verify == "false" and not loopback:
            raise ConfigurationError(
                COSMOS_VERIFY_TLS_SETTING, "false is allowed only for a loopback endpoint"
            )
        ttl_text = env.get(INBOX_MARKER_TTL_SETTING, "").strip()
        try:
            ttl = int(ttl_text) if ttl_text else DEFAULT_INBOX_MARKER_TTL_S
        except ValueError:
            raise ConfigurationError(INBOX_MARKER_TTL_SETTING, "must be whole seconds") from None
        if not 1 <= ttl <= MAX_TTL_S:
            raise ConfigurationError(INBOX_MARKER_TTL_SETTING, f"must be 1 to {MAX_TTL_S}")
        return cls(
            endpoint=endpoint,
            database=_required(env, COSMOS_DATABASE_SETTING),
            container=_required(env, container_setting),
            key=env.get(COSMOS_KEY_SETTING, "").strip() or None,
            client_id=env.get(COSMOS_CLIENT_ID_SETTING, "").strip() or None,
            verify_tls=verify == "true",
            marker_ttl_s=ttl,
        )

    def credential(self) -> str | AsyncTokenCredential:
        """The key, or the Entra ID credential the settings name (the caller closes it)."""
        if self.key:
            return self.key
        if self.client_id:
            from azure.identity.aio import ManagedIdentityCredential  # only where it is used

            return ManagedIdentityCredential(client_id=self.client_id)
        from azure.identity.aio import DefaultAzureCredential

        return DefaultAzureCredential()


def resolved(name: str, env: Mapping[str, str]) -> str:
    """A binding expression's value as the host resolves it: ``%SETTING%`` is the setting's
    value (learn.microsoft.com/azure/azure-functions/functions-bindings-expressions-patterns,
    "Binding expressions - app settings"); anything else is the name itself."""
    if len(name) > 2 and name.startswith("%") and name.endswith("%"):
        return env.get(name[1:-1], "").strip() or "(unset)"
    return name


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(name, "is required and unset")
    return value


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
