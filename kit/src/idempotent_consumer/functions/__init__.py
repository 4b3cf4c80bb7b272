"""Azure Functions (Python v2 model): a ``ConsumerDefinition`` bound to a Service Bus trigger in
one call (``bind_consumer``), its Cosmos DB store built from app settings by documented names
(``ConsumerSettings``).

Imports azure-functions, the Service Bus binding extension, azure-cosmos and OpenTelemetry's API:
import it from ``function_app.py``, never from the kit's core.
"""

from __future__ import annotations

from idempotent_consumer.functions._binder import BoundConsumer, bind_consumer
from idempotent_consumer.functions._settings import (
    COSMOS_CLIENT_ID_SETTING,
    COSMOS_CONTAINER_SETTING,
    COSMOS_DATABASE_SETTING,
    COSMOS_ENDPOINT_SETTING,
    COSMOS_KEY_SETTING,
    COSMOS_VERIFY_TLS_SETTING,
    DEFAULT_INBOX_MARKER_TTL_S,
    INBOX_MARKER_TTL_SETTING,
    ConsumerSettings,
)

__all__ = [
    "COSMOS_CLIENT_ID_SETTING",
    "COSMOS_CONTAINER_SETTING",
    "COSMOS_DATABASE_SETTING",
    "COSMOS_ENDPOINT_SETTING",
    "COSMOS_KEY_SETTING",
    "COSMOS_VERIFY_TLS_SETTING",
    "DEFAULT_INBOX_MARKER_TTL_S",
    "INBOX_MARKER_TTL_SETTING",
    "BoundConsumer",
    "ConsumerSettings",
    "bind_consumer",
]
