"""The broker model must behave like Service Bus where the app's guarantees depend on it."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from local.standins.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    AmqpSequence,
    AmqpValue,
    Delivery,
    ManualClock,
    MessageLockLostError,
    NotAllowedError,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
    SubQueue,
)
from ops.durations import parse_iso8601_duration

LOCK = timedelta(seconds=30)
WINDOW = timedelta(minutes=10)


def make_queue(max_delivery_count: int = 3) -> tuple[PeekLockQueue, ManualClock]:
    clock = ManualClock()
    settings = QueueSettings(
        lock_duration=LOCK,
        max_delivery_count=max_delivery_count,
        duplicate_detection_window=WINDOW,
        queue_name="orders",
    )
    return PeekLockQueue(settings, clock), clock


def msg(message_id: str | None = "m1", body: bytes = b"{}") -> OutgoingMessage:
    return OutgoingMessage(message_id=message_id, body=body)


def receive_one(queue: PeekLockQueue) -> Delivery:
    deliveries = queue.receive()
    assert len(deliveries) == 1
    return deliveries[0]


# -- settings -------------------------------------------------------------------------


def test_settings_come_from_infra_messaging_json() -> None:
    raw = json.loads((Path(__file__).resolve().parents[2] / "infra" / "messaging.json").read_text())
    settings = QueueSettings.from_messaging_file()

    assert settings.queue_name == raw["queueName"]
    assert settings.max_delivery_count == raw["maxDeliveryCount"]
    assert settings.lock_duration == parse_iso8601_duration(raw["lockDuration"])
    assert settings.duplicate_detection_window == parse_iso8601_duration(
        raw["duplicateDetectionHistoryTimeWindow"]
    )


def test_settings_file_values_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "messaging.json"
    path.write_text(
        json.dumps(
            {
                "queueName": "q",
                "lockDuration": "PT45S",
                "maxDeliveryCount": 7,
                "duplicateDetectionHistoryTimeWindow": "P1DT2H",
            }
        )
    )

    settings = QueueSettings.from_messaging_file(path)
    assert settings == QueueSettings(timedelta(seconds=45), 7, timedelta(days=1, hours=2), "q")

    overridden = QueueSettings.from_messaging_file(path, max_delivery_count=2)
    assert overridden.max_delivery_count == 2
    assert overridden.lock_duration == timedelta(seconds=45)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT1M", timedelta(minutes=1)),
        ("P1D", timedelta(days=1)),
        ("P14D", timedelta(days=14)),
        ("PT5M30S", timedelta(minutes=5, seconds=30)),
        ("P1DT1H1M1.5S", timedelta(days=1, hours=1, minutes=1, seconds=1.5)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_iso8601_duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1M", "P1M", "P1W", "PT-1S"])
def test_parse_duration_rejects_unsupported(text: str) -> None:
    with pytest.raises(ValueError, match="unsupported ISO-8601 duration"):
        parse_iso8601_duration(text)


# -- receiving and settling -----------------------------------------------------------


def test_receive_returns_messages_in_sequence_order() -> None:
    queue, _ = make_queue()
    for i in range(5):
        assert queue.send(msg(f"m{i}"))

    first = queue.receive(max_count=3)
    rest = queue.receive(max_count=10)

    assert [d.message.message_id for d in first + rest] == [f"m{i}" for i in range(5)]
    numbers = [d.sequence_number for d in first + rest]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == 5
    assert queue.receive() == []  # everything is locked


def test_first_delivery_has_count_one_and_a_lock() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    delivery = receive_one(queue)

    assert delivery.delivery_count == 1
    assert delivery.locked_until == clock.now() + LOCK
    assert delivery.enqueued_time == clock.now()
    assert queue.next_lock_expiry() == delivery.locked_until


def test_complete_removes_the_message() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    queue.complete(receive_one(queue).lock_token)

    assert queue.active_count() == 0
    assert queue.is_idle()
    clock.advance(LOCK * 2)
    assert queue.receive() == []
    assert queue.stats.completed == 1
    assert queue.settlement_log[-1].operation == "complete"
    assert queue.settlement_log[-1].ok


def test_lock_expiry_redelivers_with_new_token_and_old_token_is_lost() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    first = receive_one(queue)

    clock.advance(LOCK - timedelta(microseconds=1))
    assert queue.receive() == []  # still locked just before expiry
    clock.advance(timedelta(microseconds=1))  # now == locked_until: expired

    second = receive_one(queue)
    assert second.delivery_count == 2
    assert second.lock_token != first.lock_token
    assert second.message.message_id == first.message.message_id

    with pytest.raises(MessageLockLostError):
        queue.complete(first.lock_token)
    assert queue.active_count() == 1  # the stale settle did not remove it
    queue.complete(second.lock_token)
    assert queue.is_idle()
    stats = queue.stats
    assert (stats.lock_expired, stats.lock_lost_errors) == (1, 1)


def test_expired_lock_cannot_be_settled_even_before_anyone_receives_again() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    delivery = receive_one(queue)
    clock.advance(LOCK)

    with pytest.raises(MessageLockLostError, match="expired"):
        queue.complete(delivery.lock_token)
    assert queue.active_count() == 1


def test_abandon_redelivers_at_once_with_incremented_count() -> None:
    queue, _ = make_queue()
    queue.send(msg())
    first = receive_one(queue)
    queue.abandon(first.lock_token)

    second = receive_one(queue)
    assert second.delivery_count == 2
    assert second.lock_token != first.lock_token
    assert queue.stats.abandoned == 1


def test_max_delivery_count_dead_letters_after_exactly_that_many_deliveries() -> None:
    queue, clock = make_queue(max_delivery_count=3)
    queue.send(msg("poison"))
    counts = []
    for attempt in range(3):
        delivery = receive_one(queue)
        counts.append(delivery.delivery_count)
        if attempt == 1:
            clock.advance(LOCK)  # lock expiry counts like an abandon
        else:
            queue.abandon(delivery.lock_token)
    assert counts == [1, 2, 3]

    # Like Service Bus, the last abandon/expiry dead-letters at once, not on the next receive.
    assert [d.reason for d in queue.dead_letters] == [MAX_DELIVERY_COUNT_EXCEEDED]
    assert queue.receive() == []
    assert queue.is_idle()
    [dead] = queue.dead_letters
    assert dead.reason == MAX_DELIVERY_COUNT_EXCEEDED
    assert dead.delivery_count == 3
    assert dead.message.message_id == "poison"
    assert queue.stats.deliveries == 3


def test_last_delivery_lock_expiry_also_dead_letters() -> None:
    queue, clock = make_queue(max_delivery_count=1)
    queue.send(msg())
    receive_one(queue)
    clock.advance(LOCK)

    assert queue.receive() == []
    assert [d.reason for d in queue.dead_letters] == [MAX_DELIVERY_COUNT_EXCEEDED]


def test_dead_letter_stores_reason_and_description() -> None:
    queue, clock = make_queue()
    queue.send(msg("bad"))
    delivery = receive_one(queue)
    queue.dead_letter(delivery.lock_token, "SchemaValidationFailed", "amount must be > 0")

    [dead] = queue.dead_letters
    assert (dead.reason, dead.description) == ("SchemaValidationFailed", "amount must be > 0")
    assert dead.delivery_count == 1
    assert dead.dead_lettered_at == clock.now()
    assert queue.is_idle()
    record = queue.settlement_log[-1]
    assert (record.operation, record.reason, record.description) == (
        "dead_letter",
        "SchemaValidationFailed",
        "amount must be > 0",
    )


@pytest.mark.parametrize("second_op", ["complete", "abandon", "dead_letter", "renew_lock"])
def test_settled_token_cannot_be_used_again(second_op: str) -> None:
    queue, _ = make_queue()
    queue.send(msg())
    delivery = receive_one(queue)
    queue.complete(delivery.lock_token)

    with pytest.raises(MessageLockLostError, match="already completed"):
        getattr(queue, second_op)(delivery.lock_token)
    assert queue.stats.completed == 1
    assert queue.dead_letters == []
    assert not queue.settlement_log[-1].ok


def test_abandoned_token_cannot_complete_the_redelivered_message() -> None:
    queue, _ = make_queue()
    queue.send(msg())
    first = receive_one(queue)
    queue.abandon(first.lock_token)
    second = receive_one(queue)

    with pytest.raises(MessageLockLostError):
        queue.complete(first.lock_token)
    queue.complete(second.lock_token)


def test_unknown_token_raises() -> None:
    queue, _ = make_queue()
    queue.send(msg())
    receive_one(queue)

    with pytest.raises(MessageLockLostError, match="unknown"):
        queue.complete(uuid.uuid4())
    assert queue.active_count() == 1
    assert queue.stats.lock_lost_errors == 1


def test_renewal_extends_the_lock_past_the_original_expiry() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    delivery = receive_one(queue)

    clock.advance(LOCK / 2)
    renewed_until = queue.renew_lock(delivery.lock_token)
    assert renewed_until == clock.now() + LOCK
    assert queue.next_lock_expiry() == renewed_until

    clock.advance(LOCK / 2)  # past the original locked_until
    assert queue.receive() == []
    queue.complete(delivery.lock_token)
    assert queue.is_idle()


def test_renewing_an_expired_lock_fails() -> None:
    queue, clock = make_queue()
    queue.send(msg())
    delivery = receive_one(queue)
    clock.advance(LOCK)

    with pytest.raises(MessageLockLostError):
        queue.renew_lock(delivery.lock_token)


def test_defer_is_not_supported() -> None:
    queue, _ = make_queue()
    queue.send(msg())
    with pytest.raises(NotImplementedError):
        queue.defer(receive_one(queue).lock_token)


# -- duplicate detection ---------------------------------------------------------------


def test_duplicate_within_window_is_dropped() -> None:
    queue, clock = make_queue()
    assert queue.send(msg("order-1", b'{"v": 1}'))
    clock.advance(WINDOW - timedelta(seconds=1))
    assert not queue.send(msg("order-1", b'{"v": 2}'))

    [delivery] = queue.receive(max_count=10)
    assert delivery.message.body == b'{"v": 1}'
    stats = queue.stats
    assert (stats.sent, stats.accepted, stats.dropped_duplicates) == (2, 1, 1)


def test_duplicate_detection_outlives_completion() -> None:
    queue, _ = make_queue()
    queue.send(msg("order-1"))
    queue.complete(receive_one(queue).lock_token)

    assert not queue.send(msg("order-1"))
    assert queue.is_idle()


def test_window_is_measured_from_the_first_accepted_send() -> None:
    queue, clock = make_queue()
    assert queue.send(msg("order-1"))
    clock.advance(WINDOW / 2)
    assert not queue.send(msg("order-1"))  # dropped: must not restart the window
    clock.advance(WINDOW / 2)
    assert queue.send(msg("order-1"))  # window elapsed since the accepted send
    assert len(queue.receive(max_count=10)) == 2


def test_messages_without_id_are_never_deduplicated() -> None:
    queue, _ = make_queue()
    assert queue.send(msg(None))
    assert queue.send(msg(None))
    assert queue.active_count() == 2
    assert queue.stats.dropped_duplicates == 0


def test_sent_message_is_isolated_from_later_caller_mutation() -> None:
    queue, _ = make_queue()
    original = OutgoingMessage("m", b"{}", application_properties={"k": 1})
    queue.send(original)
    original.application_properties["k"] = 2

    assert receive_one(queue).message.application_properties == {"k": 1}


def test_expire_lock_makes_the_message_available_and_the_old_token_stale() -> None:
    queue, _ = make_queue()
    queue.send(msg())
    [first] = queue.receive(1)

    queue.expire_lock(first.lock_token)
    [second] = queue.receive(1)

    assert second.delivery_count == 2
    assert second.lock_token != first.lock_token
    with pytest.raises(MessageLockLostError):
        queue.complete(first.lock_token)
    queue.complete(second.lock_token)
    assert queue.is_idle()


# -- the dead-letter sub-queue: a queue like the others -------------------------------


def dead_letter_one(queue: PeekLockQueue, message_id: str, reason: str = "InvalidPayload") -> int:
    queue.send(msg(message_id))
    delivery = receive_one(queue)
    queue.dead_letter(delivery.lock_token, reason, f"{message_id} is bad")
    return delivery.sequence_number


def test_a_dead_letter_keeps_its_sequence_number_enqueue_time_reason_and_description() -> None:
    queue, clock = make_queue()
    sequence = dead_letter_one(queue, "m1")
    enqueued = clock.now()
    clock.advance(timedelta(minutes=5))

    [peeked] = queue.peek(sub_queue=SubQueue.DEAD_LETTER)

    assert (peeked.sequence_number, peeked.enqueued_time) == (sequence, enqueued)
    assert (peeked.dead_letter_reason, peeked.dead_letter_description) == (
        "InvalidPayload",
        "m1 is bad",
    )
    assert queue.peek() == []  # not on the queue any more


def test_a_dead_letter_is_received_under_a_lock_and_completed_to_remove_it() -> None:
    queue, _ = make_queue()
    dead_letter_one(queue, "m1")

    [delivery] = queue.receive(5, SubQueue.DEAD_LETTER)
    assert delivery.sub_queue is SubQueue.DEAD_LETTER
    assert delivery.dead_letter_reason == "InvalidPayload"
    assert queue.receive(5, SubQueue.DEAD_LETTER) == []  # locked: not delivered twice
    assert len(queue.peek(sub_queue=SubQueue.DEAD_LETTER)) == 1  # peek sees locked ones

    queue.complete(delivery.lock_token)

    assert queue.dead_letters == []
    assert queue.stats.dead_letters_completed == 1
    assert queue.stats.completed == 0  # the queue's own completes are counted apart
    with pytest.raises(MessageLockLostError):
        queue.complete(delivery.lock_token)


def test_an_abandoned_dead_letter_comes_back_at_once_first_in_line() -> None:
    """What made the old removal loop stop after one batch: abandon releases the lock now, so
    the next receive returns the same lowest-sequence messages again."""
    queue, _ = make_queue()
    for index in range(4):
        dead_letter_one(queue, f"m{index}")
    first = queue.receive(2, SubQueue.DEAD_LETTER)
    for delivery in first:
        queue.abandon(delivery.lock_token)

    again = queue.receive(2, SubQueue.DEAD_LETTER)

    assert [d.sequence_number for d in again] == [d.sequence_number for d in first]
    assert [d.delivery_count for d in again] == [d.delivery_count + 1 for d in first]


def test_a_dead_letter_is_never_dead_lettered_again_however_often_it_is_abandoned() -> None:
    queue, clock = make_queue(max_delivery_count=2)
    dead_letter_one(queue, "m1")
    for _ in range(5):
        [delivery] = queue.receive(1, SubQueue.DEAD_LETTER)
        queue.abandon(delivery.lock_token)
    [delivery] = queue.receive(1, SubQueue.DEAD_LETTER)
    clock.advance(LOCK)  # a lapsed lock releases it too

    [dead] = queue.dead_letters
    assert dead.delivery_count == 7
    assert queue.stats.dead_letter_locks_expired == 1
    [again] = queue.receive(1, SubQueue.DEAD_LETTER)
    with pytest.raises(NotAllowedError):
        queue.dead_letter(again.lock_token, "Again")


def test_a_dead_letter_lock_is_renewed_like_any_other() -> None:
    queue, clock = make_queue()
    dead_letter_one(queue, "m1")
    [delivery] = queue.receive(1, SubQueue.DEAD_LETTER)
    clock.advance(LOCK - timedelta(seconds=1))

    assert queue.renew_lock(delivery.lock_token) == clock.now() + LOCK
    clock.advance(LOCK - timedelta(seconds=1))
    queue.complete(delivery.lock_token)
    assert queue.dead_letters == []


def test_peek_starts_at_a_sequence_number_and_returns_at_most_the_count() -> None:
    queue, _ = make_queue()
    for index in range(6):
        queue.send(msg(f"m{index}"))
    receive_one(queue)  # locked messages are peeked too
    deliveries_before = queue.stats.deliveries

    page = queue.peek(from_sequence_number=2, max_count=3)

    assert [p.sequence_number for p in page] == [2, 3, 4]
    assert queue.peek(from_sequence_number=7) == []
    assert queue.peek(max_count=1)[0].locked_until is not None
    assert queue.stats.deliveries == deliveries_before  # a peek delivers nothing


def test_value_and_sequence_bodies_are_kept_as_sent() -> None:
    queue, _ = make_queue()
    text = OutgoingMessage("m1", b"", amqp_body=AmqpValue('{"orderId": "m1"}'))
    stream = OutgoingMessage("m2", b"", amqp_body=AmqpSequence(((1, "a"),)))
    queue.send(text)
    queue.send(stream)

    assert [p.message.amqp_body for p in queue.peek()] == [text.amqp_body, stream.amqp_body]


def test_a_batch_send_drops_each_repeated_message_id_on_its_own() -> None:
    queue, _ = make_queue()
    queue.send(msg("m1"))

    assert queue.send_batch([msg("m1"), msg("m2")]) == [False, True]
    assert [p.message.message_id for p in queue.peek()] == ["m1", "m2"]


def test_there_is_no_way_to_remove_a_dead_letter_by_its_sequence_number() -> None:
    """Service Bus has none: the stand-in offers only what the real API offers."""
    assert not [name for name in dir(PeekLockQueue) if "remove" in name and "listener" not in name]
