"""The ``DeadLetterQueue`` contract (``ops.port.DeadLetterQueue``: the dead-letter tool's source),
run by the Service Bus adapter (``ops.servicebus.ServiceBusDeadLetterQueue``) on a real
``ServiceBusClient`` whose AMQP handlers speak to the broker model
(``local.assembly.dead_letter_queue.LocalDeadLetterQueue``, ``local.standins.servicebus_link``).

What the tool relies on (``ops.resubmit``): peeks change nothing; a scan hands ``decide`` only
the wanted dead letters, removes exactly what it returns, leaves every other dead letter where
it was, and says which wanted ones it never received; copies are sent with the dead letter's
MessageId and body, and the peeks from a sequence number find them (or find them dead-lettered
again). No double implements this port (``local.standins.doubles`` says why); a scan against a
real namespace would subclass ``DeadLetterQueueContract``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import ManualClock, PeekLockQueue, QueueSettings
from ops.port import DeadLetter, DeadLetterQueue
from tests.orders import message, order_body


@dataclass
class QueueUnderTest:
    queue: DeadLetterQueue
    broker: PeekLockQueue  # where dead letters are made, as the consumer makes them
    window: timedelta  # the queue's duplicate detection window
    clock: ManualClock  # the broker's

    def past_the_window(self) -> None:
        """A copy sent within the window of its MessageId's first send is dropped (duplicate
        detection): the tool resubmits only past it."""
        self.clock.advance(self.window)

    def dead_letter(self, order_id: str, reason: str = "HashMismatch") -> None:
        outgoing = message(order_body(order_id), message_id=order_id)
        assert self.broker.send(outgoing)
        [delivery] = self.broker.receive(1)
        self.broker.dead_letter(delivery.lock_token, reason, f"{reason} of {order_id}")


def by_id(letters: Sequence[DeadLetter]) -> dict[str | None, int]:
    return {letter.message_id: letter.sequence_number for letter in letters}


class DeadLetterQueueContract:
    """What every ``DeadLetterQueue`` must do. Subclasses provide ``subject``."""

    @pytest.fixture
    def subject(self) -> QueueUnderTest:
        raise NotImplementedError

    def test_the_queue_s_window_and_clock(self, subject: QueueUnderTest) -> None:
        assert subject.queue.duplicate_detection_window == subject.window
        assert subject.queue.now() == subject.broker.clock.now()

    def test_a_peek_lists_every_dead_letter_in_sequence_order_and_changes_nothing(
        self, subject: QueueUnderTest
    ) -> None:
        for index in range(3):
            subject.dead_letter(f"ord-{index}", reason=f"Reason{index}")

        first = subject.queue.dead_letters()
        second = subject.queue.dead_letters()

        assert first == second
        assert [d.message_id for d in first] == ["ord-0", "ord-1", "ord-2"]
        assert [d.sequence_number for d in first] == sorted(d.sequence_number for d in first)
        assert [(d.reason, d.description) for d in first] == [
            (f"Reason{index}", f"Reason{index} of ord-{index}") for index in range(3)
        ]
        assert first[0].body == message(order_body("ord-0"), message_id="ord-0").body

    def test_a_scan_removes_exactly_what_decide_returns(self, subject: QueueUnderTest) -> None:
        for index in range(4):
            subject.dead_letter(f"ord-{index}")
        sequence = by_id(subject.queue.dead_letters())
        wanted = {sequence["ord-1"], sequence["ord-2"]}
        given: list[int] = []

        def decide(letters: Sequence[DeadLetter]) -> Collection[int]:
            given.extend(letter.sequence_number for letter in letters)
            return {sequence["ord-2"]}  # keep ord-1 after all

        result = subject.queue.scan(wanted, decide)

        assert sorted(given) == sorted(wanted)  # only the wanted ones, each once
        assert result.removed == {sequence["ord-2"]}
        assert (result.failed, result.not_received) == ({}, set())
        assert [d.message_id for d in subject.queue.dead_letters()] == ["ord-0", "ord-1", "ord-3"]

    def test_a_scan_says_which_wanted_dead_letters_it_never_received(
        self, subject: QueueUnderTest
    ) -> None:
        subject.dead_letter("ord-0")
        [present] = subject.queue.dead_letters()
        missing = present.sequence_number + 1_000

        result = subject.queue.scan({present.sequence_number, missing}, lambda letters: ())

        assert result.not_received == {missing}
        assert result.removed == set()
        assert [d.message_id for d in subject.queue.dead_letters()] == ["ord-0"]

    def test_a_scan_for_nothing_receives_nothing(self, subject: QueueUnderTest) -> None:
        subject.dead_letter("ord-0")

        def decide(letters: Sequence[DeadLetter]) -> Collection[int]:
            raise AssertionError("nothing was wanted")

        result = subject.queue.scan(set(), decide)

        assert (result.removed, result.receives) == (set(), 0)
        assert len(subject.queue.dead_letters()) == 1

    def test_copies_go_to_the_queue_under_their_message_id_and_the_peeks_find_them(
        self, subject: QueueUnderTest
    ) -> None:
        subject.dead_letter("ord-0")
        subject.dead_letter("ord-1")
        letters = subject.queue.dead_letters()
        _ids, top_before = subject.queue.queued_message_ids(1)
        subject.past_the_window()

        subject.queue.send_copies(letters)

        ids, top = subject.queue.queued_message_ids(top_before + 1)
        assert ids == {"ord-0", "ord-1"}
        assert top > top_before
        copies = {p.message.message_id: p.message.body for p in subject.broker.peek()}
        assert copies == {letter.message_id: letter.body for letter in letters}

    def test_a_copy_dead_lettered_again_is_found_from_its_sequence_number(
        self, subject: QueueUnderTest
    ) -> None:
        subject.dead_letter("ord-0")
        [letter] = subject.queue.dead_letters()
        subject.past_the_window()
        subject.queue.send_copies([letter])
        _ids, top = subject.queue.queued_message_ids(letter.sequence_number + 1)
        [copy] = subject.broker.receive(1)
        subject.broker.dead_letter(copy.lock_token, "HashMismatch", "again")

        again = subject.queue.dead_lettered_since(top)

        assert list(again) == ["ord-0"]
        assert (again["ord-0"].sequence_number, again["ord-0"].description) == (top, "again")
        assert subject.queue.dead_lettered_since(top + 1) == {}


class TestServiceBusDeadLetterQueue(DeadLetterQueueContract):
    @pytest.fixture
    def subject(self) -> Iterator[QueueUnderTest]:
        # Ahead of the wall clock, so the SDK never judges a lock lapsed that the broker holds.
        clock = ManualClock(datetime.now(UTC).replace(microsecond=0) + timedelta(days=1))
        settings = QueueSettings.from_messaging_file()
        broker = PeekLockQueue(settings, clock)
        queue = LocalDeadLetterQueue(broker, wall_clock=clock)
        try:
            yield QueueUnderTest(queue, broker, settings.duplicate_detection_window, clock)
        finally:
            queue.close()
