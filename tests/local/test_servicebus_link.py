"""The real azure-servicebus receiver and sender over the local broker
(``local.standins.servicebus_link``):
every public call below runs the SDK's own code down to its pyamqp client, and the broker answers
with the Service Bus behaviour ``local.standins.broker`` documents. What a user of the SDK would
observe."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.amqp import AmqpMessageBodyType
from azure.servicebus.exceptions import MessageLockLostError

from local.standins.broker import (
    AmqpSequence,
    AmqpValue,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
)
from local.standins.servicebus_link import LocalNamespace, servicebus_client

LOCK = timedelta(minutes=1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
def broker(clock: ManualClock) -> PeekLockQueue:
    return PeekLockQueue(QueueSettings.from_messaging_file(max_delivery_count=2), clock)


@pytest.fixture
def client(broker: PeekLockQueue) -> Iterator[ServiceBusClient]:
    with servicebus_client(LocalNamespace({"orders": broker})) as sdk:
        yield sdk


def receiver(client: ServiceBusClient, *, dead_letters: bool = False) -> ServiceBusReceiver:
    sub_queue = ServiceBusSubQueue.DEAD_LETTER if dead_letters else None
    return client.get_queue_receiver("orders", sub_queue=sub_queue, max_wait_time=0.2)


def send(client: ServiceBusClient, *ids: str) -> None:
    with client.get_queue_sender("orders") as sender:
        batch = sender.create_message_batch()
        for message_id in ids:
            batch.add_message(ServiceBusMessage(b'{"n": 1}', message_id=message_id))
        sender.send_messages(batch)


def dead_letter(client: ServiceBusClient, count: int) -> None:
    with receiver(client) as active:
        for message in active.receive_messages(count, max_wait_time=0.2):
            active.dead_letter_message(message, "InvalidPayload", "not an order")


def test_complete_removes_and_abandon_makes_the_same_message_available_at_once(
    client: ServiceBusClient, broker: PeekLockQueue
) -> None:
    send(client, "m1", "m2")
    with receiver(client) as active:
        first, second = active.receive_messages(2)
        active.complete_message(second)
        active.abandon_message(first)

        [again] = active.receive_messages(5)

        assert (again.message_id, again.sequence_number) == ("m1", first.sequence_number)
        assert again.delivery_count == first.delivery_count + 1  # type: ignore[operator]
    assert [p.message.message_id for p in broker.peek()] == ["m1"]


def test_a_lock_lost_at_the_broker_fails_the_settlement_and_the_renewal(
    client: ServiceBusClient, broker: PeekLockQueue, clock: ManualClock
) -> None:
    send(client, "m1")
    with receiver(client) as active:
        [message] = active.receive_messages()
        clock.advance(LOCK)  # the broker's lock lapsed; the SDK's view of it has not

        with pytest.raises(MessageLockLostError):
            active.renew_message_lock(message)
        with pytest.raises(MessageLockLostError):
            active.complete_message(message)
    assert len(broker.peek()) == 1  # not removed


def test_a_renewed_lock_outlives_its_first_expiry(
    client: ServiceBusClient, broker: PeekLockQueue, clock: ManualClock
) -> None:
    send(client, "m1")
    with receiver(client) as active:
        [message] = active.receive_messages()
        clock.advance(LOCK - timedelta(seconds=5))
        renewed = active.renew_message_lock(message)
        clock.advance(LOCK - timedelta(seconds=5))

        active.complete_message(message)

    assert renewed > datetime.now(UTC) + LOCK - timedelta(seconds=10)
    assert broker.peek() == []


def test_dead_letters_carry_their_reason_and_are_received_and_completed_like_messages(
    client: ServiceBusClient, broker: PeekLockQueue, clock: ManualClock
) -> None:
    send(client, "m1", "m2")
    enqueued = clock.now()
    dead_letter(client, 2)
    clock.advance(timedelta(hours=1))
    with receiver(client, dead_letters=True) as dlq:
        peeked = dlq.peek_messages(10, sequence_number=1)
        assert [(m.message_id, m.dead_letter_reason) for m in peeked] == [
            ("m1", "InvalidPayload"),
            ("m2", "InvalidPayload"),
        ]
        assert peeked[0].dead_letter_error_description == "not an order"
        assert peeked[0].enqueued_time_utc == enqueued  # the original's

        first, second = dlq.receive_messages(5)
        dlq.abandon_message(first)
        dlq.complete_message(second)
        [again] = dlq.receive_messages(5)  # an abandoned dead letter is back at once

        assert again.sequence_number == first.sequence_number
    assert [d.message.message_id for d in broker.dead_letters] == ["m1"]


def test_peek_pages_from_a_sequence_number(client: ServiceBusClient) -> None:
    send(client, *(f"m{index}" for index in range(7)))
    with receiver(client) as active:
        page = active.peek_messages(3, sequence_number=3)
        after = active.peek_messages(3, sequence_number=int(page[-1].sequence_number or 0) + 1)
        rest = active.peek_messages(3, sequence_number=int(after[-1].sequence_number or 0) + 1)
        beyond = active.peek_messages(3, sequence_number=8)

    assert [m.message_id for m in page + after + rest] == [f"m{i}" for i in range(2, 7)]
    assert beyond == []


def test_a_repeated_message_id_is_accepted_by_the_send_and_dropped(
    client: ServiceBusClient, broker: PeekLockQueue, clock: ManualClock
) -> None:
    send(client, "m1")
    clock.advance(timedelta(hours=23))
    send(client, "m1", "m2")  # no error: the sender is not told
    clock.advance(timedelta(hours=1))
    send(client, "m1")  # the window (P1D, infra/messaging.json) has passed

    assert [p.message.message_id for p in broker.peek()] == ["m1", "m2", "m1"]
    assert broker.stats.dropped_duplicates == 1


def test_value_and_sequence_bodies_arrive_with_their_body_type(
    client: ServiceBusClient, broker: PeekLockQueue
) -> None:
    broker.send(OutgoingMessage("text", b"", amqp_body=AmqpValue('{"orderId": "text"}')))
    broker.send(OutgoingMessage("stream", b"", amqp_body=AmqpSequence(((1, "a"),))))
    with receiver(client) as active:
        text, stream = active.receive_messages(2)

    assert (text.body_type, text.body) == (AmqpMessageBodyType.VALUE, b'{"orderId": "text"}')
    assert stream.body_type == AmqpMessageBodyType.SEQUENCE
    assert list(stream.body) == [[1, b"a"]]
