"""The dead-letter port over the local broker model (``local.broker.PeekLockQueue``), for tests
and the local stand-in. Like Service Bus, its ``send`` is not asked whether duplicate detection
dropped the copy: the tool must find out by looking, as it must in Azure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from local.broker import OutgoingMessage, PeekLockQueue
from ops.port import DeadLetter


class LocalDeadLetterQueue:
    def __init__(self, queue: PeekLockQueue) -> None:
        self._queue = queue

    @property
    def duplicate_detection_window(self) -> timedelta:
        return self._queue.settings.duplicate_detection_window

    def now(self) -> datetime:
        return self._queue.clock.now()

    def dead_letters(self) -> list[DeadLetter]:
        return [
            DeadLetter(
                sequence_number=dead.sequence_number,
                message_id=dead.message.message_id,
                enqueued_time=dead.enqueued_time or dead.dead_lettered_at,
                delivery_count=dead.delivery_count,
                reason=dead.reason,
                description=dead.description,
                body=dead.message.body,
                correlation_id=dead.message.correlation_id,
                content_type=dead.message.content_type,
                subject=dead.message.subject,
                application_properties=dict(dead.message.application_properties),
            )
            for dead in self._queue.dead_letters
        ]

    def send_copy(self, letter: DeadLetter) -> None:
        self._queue.send(
            OutgoingMessage(
                message_id=letter.message_id,
                body=letter.body,
                correlation_id=letter.correlation_id,
                content_type=letter.content_type,
                application_properties=dict(letter.application_properties),
                subject=letter.subject,
            )
        )

    def queued_message_ids(self) -> set[str]:
        return {p.message.message_id for p in self._queue.peek() if p.message.message_id}

    def remove(self, sequence_numbers: Iterable[int]) -> set[int]:
        removed = set()
        for sequence_number in sequence_numbers:
            try:
                self._queue.remove_dead_letter(sequence_number)
            except KeyError:
                continue
            removed.add(sequence_number)
        return removed
