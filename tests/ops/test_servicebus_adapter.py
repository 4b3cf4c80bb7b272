"""The Service Bus adapter's reading of a dead letter, on a real ``ServiceBusReceivedMessage``
(decoded by the extension from the bytes the host sends; no emulator on this machine, so the
receive/peek/complete calls themselves run only against a namespace or the emulator)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from local.host_binding import decode_host_binding, encode_amqp, host_binding_bytes
from ops.servicebus import to_dead_letter


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
