"""OpenTelemetry for the kit's consumers: ``ConsumerTelemetry``, the ``ConsumerObserver`` that
records one consumer span, a few bounded metrics and one structured log record per delivery,
under one namespace of names (``TelemetryNames``); and the span helpers an app's other
instrumentation shares (W3C producer links, a span's traceparent, ``error.type``).

The OpenTelemetry API only: the app configures an SDK (the Azure Monitor distro) or none, and
then every call is a no-op. Import it where a consumer is built, never from the kit's core.
"""

from __future__ import annotations

from idempotent_consumer.telemetry._consumer import ConsumerTelemetry
from idempotent_consumer.telemetry._names import (
    ATTR_CONVERSATION_ID,
    ATTR_DELIVERY_COUNT,
    ATTR_DESTINATION,
    ATTR_DISPOSITION,
    ATTR_MESSAGE_ID,
    ATTR_OPERATION_NAME,
    ATTR_OPERATION_TYPE,
    ATTR_SUBSCRIPTION,
    ATTR_SYSTEM,
    DEFAULT_NAMESPACE,
    MESSAGING_SYSTEM,
    NOT_SETTLED,
    OPERATION_TYPE,
    OTHER_MESSAGE_TYPE,
    BusinessCounter,
    TelemetryNames,
)
from idempotent_consumer.telemetry._spans import (
    ATTR_ERROR_TYPE,
    producer_links,
    qualified_name,
    set_error_type,
    traceparent_of,
)

__all__ = [
    "ATTR_CONVERSATION_ID",
    "ATTR_DELIVERY_COUNT",
    "ATTR_DESTINATION",
    "ATTR_DISPOSITION",
    "ATTR_ERROR_TYPE",
    "ATTR_MESSAGE_ID",
    "ATTR_OPERATION_NAME",
    "ATTR_OPERATION_TYPE",
    "ATTR_SUBSCRIPTION",
    "ATTR_SYSTEM",
    "DEFAULT_NAMESPACE",
    "MESSAGING_SYSTEM",
    "NOT_SETTLED",
    "OPERATION_TYPE",
    "OTHER_MESSAGE_TYPE",
    "BusinessCounter",
    "ConsumerTelemetry",
    "TelemetryNames",
    "producer_links",
    "qualified_name",
    "set_error_type",
    "traceparent_of",
]
