"""Sample OrderPlaced messages for tests; the bodies are ``ops.sample_orders``'s (the one
factory, for the demo, the tests and the benchmarks)."""

from __future__ import annotations

import json
from typing import Any

from local.standins.broker import OutgoingMessage
from ops.sample_orders import order_body as order_body  # re-exported: the tests' import


def message(
    body: dict[str, Any] | bytes,
    message_id: str | None = "ord-1001",
    correlation_id: str | None = "corr-1",
    **properties: str,
) -> OutgoingMessage:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return OutgoingMessage(
        message_id=message_id,
        body=raw,
        correlation_id=correlation_id,
        application_properties=dict(properties),
    )
