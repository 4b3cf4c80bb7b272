"""Doubles at the consumer's own ports (not the SDKs'): a received message with the attributes
``to_incoming`` reads, and settlement actions that settle nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any


class CompletingActions:
    """The settlement port, settling nothing (the consumer's own ``MessageActions``)."""

    def complete(self, message: Any) -> None:
        pass

    def abandon(self, message: Any) -> None:
        pass

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        pass


def received(body: dict[str, Any]) -> SimpleNamespace:
    """The attributes of ``ServiceBusReceivedMessage`` that ``to_incoming`` reads."""
    return SimpleNamespace(
        message_id="ord-1001",
        body=json.dumps(body).encode(),
        correlation_id=None,
        delivery_count=1,
        application_properties={},
        locked_until_utc=None,
    )
