"""A received message with the attributes ``to_incoming`` reads (the port doubles are
``local.standins.doubles``)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any


def received(body: dict[str, Any]) -> SimpleNamespace:
    """The attributes of ``ServiceBusReceivedMessage`` that ``to_incoming`` reads."""
    return SimpleNamespace(
        message_id="ord-1001",
        body=json.dumps(body).encode(),
        correlation_id=None,
        delivery_count=1,
        application_properties={},
        locked_until_utc=None,
        subject=None,
    )
