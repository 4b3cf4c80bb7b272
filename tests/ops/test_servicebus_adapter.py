"""The Service Bus adapter's reading of a dead letter, on a real ``ServiceBusReceivedMessage``
(decoded by the extension from the bytes the host sends), and of the deployed queue's window.
Its receive, peek, settle and send calls run on the real SDK in tests/ops/test_dead_letter_scan.py
(over ``local.standins.servicebus_link``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from azure.core.pipeline.transport import HttpTransport
from azure.core.pipeline.transport._requests_basic import RequestsTransportResponse
from azure.servicebus.management import ServiceBusAdministrationClient

from local.standins.host_binding import decode_host_binding, encode_amqp, host_binding_bytes
from ops.servicebus import to_dead_letter
from ops.window import configured_window, deployed_window


def test_a_dead_letter_is_read_with_its_reason_and_without_the_brokers_properties() -> None:
    enqueued = datetime(2026, 11, 1, 8, 30, tzinfo=UTC)
    received = decode_host_binding(
        host_binding_bytes(
            uuid.uuid4(),
            encode_amqp(
                body=b'{"orderId": "ord-1"}',
                message_id="ord-1",
                correlation_id="corr-1",
                content_type="application/json",
                subject="OrderPlaced",
                application_properties={
                    "DeadLetterReason": "MaxDeliveryCountExceeded",
                    "DeadLetterErrorDescription": "Message could not be consumed after 10 tries",
                    "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
                },
                delivery_count=10,
                enqueued_time=enqueued,
                sequence_number=42,
            ),
        )
    )

    letter = to_dead_letter(received)

    assert (letter.sequence_number, letter.message_id, letter.delivery_count) == (42, "ord-1", 10)
    assert letter.enqueued_time == enqueued  # the window runs from the original send
    assert letter.reason == "MaxDeliveryCountExceeded"
    assert letter.description == "Message could not be consumed after 10 tries"
    assert letter.body == b'{"orderId": "ord-1"}'
    assert (letter.correlation_id, letter.content_type, letter.subject) == (
        "corr-1",
        "application/json",
        "OrderPlaced",
    )
    # the copy carries the producer's properties, not the broker's record of the dead-lettering
    assert dict(letter.application_properties) == {
        "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    }


# ---- the deployed window, read with the administration client ---------------------------------
# Through the real ServiceBusAdministrationClient, with the namespace's HTTP answers supplied at
# azure-core's transport (the SDK's lowest boundary for its management endpoint).

QUEUE_ENTRY = """<?xml version="1.0" encoding="utf-8"?>
<entry xmlns="http://www.w3.org/2005/Atom">
  <id>https://ns.servicebus.windows.net/orders?api-version=2021-05</id>
  <title type="text">orders</title>
  <content type="application/xml">
    <QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
        xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
      <LockDuration>PT1M</LockDuration>
      <RequiresDuplicateDetection>{detect}</RequiresDuplicateDetection>
      <DuplicateDetectionHistoryTimeWindow>PT2H</DuplicateDetectionHistoryTimeWindow>
      <MaxDeliveryCount>10</MaxDeliveryCount>
      <EnablePartitioning>false</EnablePartitioning>
    </QueueDescription>
  </content>
</entry>"""
# What the namespace answers a caller without the Manage claim (a Data Receiver/Sender).
UNAUTHORIZED = (
    "<Error><Code>401</Code><Detail>Manage,EntityRead claims required for this operation."
    "</Detail></Error>"
)


class NamespaceTransport(HttpTransport[Any, Any]):
    def __init__(self, status: int, body: str) -> None:
        self.status, self.body = status, body.encode()
        self.requests: list[Any] = []

    def __enter__(self) -> NamespaceTransport:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send(self, request: Any, **kwargs: Any) -> Any:
        self.requests.append(request)
        response = requests.Response()
        response.status_code, response._content = self.status, self.body
        response.headers["Content-Type"] = "application/atom+xml;type=entry;charset=utf-8"
        return RequestsTransportResponse(request, response)  # type: ignore[no-untyped-call]


def admin(transport: NamespaceTransport) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a2V5",
        transport=transport,
        retry_total=0,
    )


def test_the_window_is_the_deployed_queues_when_its_properties_can_be_read() -> None:
    transport = NamespaceTransport(200, QUEUE_ENTRY.format(detect="true"))

    window = deployed_window(admin(transport), "orders")

    assert window.value == timedelta(hours=2)  # a Bicep override, not the file's P1D
    assert "administration client" in window.source
    assert [(r.method, r.url.split("?")[0]) for r in transport.requests] == [
        ("GET", "https://ns.servicebus.windows.net/orders")
    ]


def test_without_the_manage_right_the_window_falls_back_to_the_file_and_says_so() -> None:
    window = deployed_window(admin(NamespaceTransport(401, UNAUTHORIZED)), "orders")

    assert window.value == configured_window() == timedelta(days=1)
    assert window.source.startswith("infra/messaging.json: the queue's properties could not")
    assert "--window" in window.source


def test_a_queue_without_duplicate_detection_has_no_window() -> None:
    window = deployed_window(
        admin(NamespaceTransport(200, QUEUE_ENTRY.format(detect="false"))), "q"
    )

    assert window.value == timedelta(0)
