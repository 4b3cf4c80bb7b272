"""The relay's app settings, validated; an invalid setting fails with its name (as
``shared.config``, whose Cosmos DB settings the relay reuses for its own client).

| setting | default | meaning |
|---|---|---|
| ``ORDER_EVENTS_TOPIC_NAME`` | (required) | topic the OrderAccepted events are sent to |
| ``ServiceBusConnection__fullyQualifiedNamespace`` | (this or the next) | the namespace, |
| | | identity-based: the queue trigger's own setting |
| ``ServiceBusConnection`` | | a connection string: emulators only |

The trigger's own connection is ``CosmosDBConnection`` (``CosmosDBConnection__accountEndpoint``
in Azure); the host reads it, not this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.errors import ConfigurationError

TOPIC_SETTING = "ORDER_EVENTS_TOPIC_NAME"
NAMESPACE_SETTING = "ServiceBusConnection__fullyQualifiedNamespace"
CONNECTION_STRING_SETTING = "ServiceBusConnection"


@dataclass(frozen=True, slots=True)
class RelaySettings:
    topic_name: str
    fully_qualified_namespace: str | None = None
    connection_string: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RelaySettings:
        topic = env.get(TOPIC_SETTING, "").strip()
        if not topic:
            raise ConfigurationError(TOPIC_SETTING, "is required but not set")
        namespace = env.get(NAMESPACE_SETTING, "").strip() or None
        connection_string = env.get(CONNECTION_STRING_SETTING, "").strip() or None
        if namespace is None and connection_string is None:
            raise ConfigurationError(
                NAMESPACE_SETTING, f"is required (or {CONNECTION_STRING_SETTING} for emulators)"
            )
        if namespace is not None and ("/" in namespace or "." not in namespace):
            raise ConfigurationError(
                NAMESPACE_SETTING, f"must be <name>.servicebus.windows.net, got {namespace[:80]!r}"
            )
        return cls(topic, namespace, None if namespace else connection_string)
