"""The pure core: which documents are published and the OrderAccepted v1 event built from the
outbox document exactly as the consumer writes it."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from idempotent_consumer import IncomingMessage, InvalidMessage

from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.relay.core import build_event
from shared.relay.outbox import (
    EVENT_ID_NAMESPACE,
    is_pending_outbox,
    order_event_id,
    version_event_id,
)
from tests.orders import order_body

ACCEPTED = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


def consumer_documents(order_id: str = "ord-7") -> list[dict[str, Any]]:
    raw = json.dumps(order_body(order_id)).encode()
    incoming = IncomingMessage(order_id, raw, correlation_id="corr-7")
    return build_documents(
        parse_order(raw, order_id), incoming, outbox_enabled=True, accepted_at=ACCEPTED
    )


def test_the_event_is_built_from_the_consumer_s_outbox_document() -> None:
    order, outbox = consumer_documents()
    assert not is_pending_outbox(order)
    assert is_pending_outbox(outbox)

    event = build_event({**outbox, "_etag": "etag-1"})

    assert event.event_id == outbox["eventId"]
    assert event.reference.etag == "etag-1"
    assert event.created_at == ACCEPTED
    assert json.loads(event.body) == {
        "schemaVersion": 1,
        "eventId": outbox["eventId"],
        "eventType": "OrderAccepted",
        "occurredAt": "2026-11-29T12:00:00.123456Z",
        "payload": {
            "orderId": "ord-7",
            "orderVersion": 1,
            "customerId": "cust-42",
            "currency": "EUR",
            "totalMinor": 3499,
            "placedAt": "2026-11-29T09:15:00Z",
            "lineCount": 2,
            "lines": order_body("ord-7")["lines"],
        },
    }
    assert dict(event.application_properties) == {
        "eventType": "OrderAccepted",
        "schemaVersion": 1,
        "causationId": "ord-7",
    }
    assert event.correlation_id == "corr-7"
    # Deterministic: the same order always gives the same event id (= MessageId).
    assert build_event(consumer_documents()[1]).event_id == event.event_id


@pytest.mark.parametrize(
    "change",
    [
        {"eventId": "not-a-uuid"},
        {"createdAt": "yesterday"},
        {"payload": None},
        {"orderId": "ord-8"},  # differs from the payload's
    ],
)
def test_an_outbox_document_that_is_no_valid_v1_event_is_refused(change: dict[str, Any]) -> None:
    _, outbox = consumer_documents()
    with pytest.raises(InvalidMessage):
        build_event({**outbox, **change})


EVENTS_MD = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def test_the_contract_s_example_and_event_id_derivation_are_what_the_service_emits() -> None:
    """docs/events.md gives downstream teams an example body and the exact eventId derivation
    (namespace, name format, a worked example): all three recomputed here with the service's
    own code. Fails on 223dafd, whose example eventId no code could produce."""
    text = EVENTS_MD.read_text(encoding="utf-8")
    example = json.loads(re.search(r"```json\n(.*?)\n```", text, re.S).group(1))  # type: ignore[union-attr]
    order_id = example["payload"]["orderId"]
    raw = json.dumps(order_body(order_id)).encode()
    _, outbox = build_documents(
        parse_order(raw, order_id),
        IncomingMessage(order_id, raw),
        outbox_enabled=True,
        accepted_at=ACCEPTED,
    )

    assert json.loads(build_event(outbox).body) == example
    namespace = re.search(r"the namespace `([0-9a-f-]{36})`", text).group(1)  # type: ignore[union-attr]
    assert uuid.UUID(namespace) == EVENT_ID_NAMESPACE
    name, worked = re.search(  # type: ignore[union-attr]
        r"gives the name `([^`]+)` and the eventId\n?\s*`([0-9a-f-]{36})`", text
    ).groups()
    assert name == f"{order_id}/OrderAccepted"
    assert worked == str(uuid.uuid5(uuid.UUID(namespace), name)) == order_event_id(order_id)
    assert worked == example["eventId"] == outbox["eventId"]
    later_name, later = re.search(  # type: ignore[union-attr]
        r"version 2 of `[^`]+` gives the name\n?\s*`([^`]+)` and the eventId `([0-9a-f-]{36})`",
        text,
    ).groups()
    assert later_name == f"{order_id}/v2"
    assert (
        later == str(uuid.uuid5(uuid.UUID(namespace), later_name)) == version_event_id(order_id, 2)
    )


def test_an_order_accepted_written_before_versions_is_published_as_version_1() -> None:
    """Outbox documents written before the lifecycle have no ``orderVersion``: on the wire
    every OrderAccepted says version 1 (docs/events.md)."""
    _, outbox = consumer_documents()
    del outbox["payload"]["orderVersion"]
    del outbox["payload"]["lines"]  # nor lines

    payload = json.loads(build_event(outbox).body)["payload"]
    assert payload["orderVersion"] == 1
    assert "lines" not in payload  # published without them: a tolerant reader copes
