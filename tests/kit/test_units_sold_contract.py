"""The README's units-sold consumer held to the kit's shipped consumer contract
(``idempotent_consumer.testing.ConsumerContract``), exactly as a user's tests would hold theirs:
redeliveries, concurrent duplicates, a stop between two SKUs, an invalid message.

Checked to fail: with the inbox marker id made unique per delivery (the redelivery, the
concurrent and the stop tests). Concurrent deliveries of *different* sales racing to create a
day's counter are this consumer's own concern: tests/kit/test_your_own_consumer.py holds them
against the real SDK and the local Cosmos server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from idempotent_consumer import ConsumerDefinition, IncomingMessage
from idempotent_consumer.testing import ConsumerContract

from examples.units_sold import units_sold


def accepted(event_id: str, lines: list[tuple[str, int]]) -> IncomingMessage:
    payload = {
        "orderId": f"ord-{event_id}",
        "placedAt": "2026-11-30T08:00:00Z",
        "lines": [{"sku": sku, "quantity": quantity} for sku, quantity in lines],
    }
    body = json.dumps({"eventType": "OrderAccepted", "payload": payload}).encode()
    return IncomingMessage(event_id, body, subject="OrderAccepted")


class TestUnitsSold(ConsumerContract):
    @pytest.fixture
    def definition(self) -> ConsumerDefinition[Any]:
        return units_sold

    @pytest.fixture
    def messages(self) -> list[IncomingMessage]:
        return [
            accepted("event-1", [("SKU-1", 2), ("SKU-2", 1)]),
            accepted("event-2", [("SKU-1", 3)]),
            accepted("event-3", [("SKU-2", 4), ("SKU-3", 1), ("SKU-1", 1)]),
        ]

    @pytest.fixture
    def invalid_message(self) -> IncomingMessage:
        return IncomingMessage(
            "event-9", b'{"payload": {"lines": "none"}}', subject="OrderAccepted"
        )
