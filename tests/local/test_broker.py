"""The broker model must behave like Service Bus where the app's guarantees depend on it."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from local.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    Delivery,
    ManualClock,
    MessageLockLostError,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
    parse_iso8601_duration,
)

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
