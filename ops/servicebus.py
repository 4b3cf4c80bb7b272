"""The dead-letter port over Azure Service Bus (``azure-servicebus``, sync client): peeks to
list, a peek-lock receiver on the dead-letter sub-queue to remove, a sender to copy. Entra ID
(``DefaultAzureCredential``: Data Receiver + Data Sender on the queue) or a connection string
(the emulator)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)

from ops.port import DeadLetter, PropertyValue

_PEEK_BATCH = 250
# Service Bus records the dead-lettering in these application properties; they describe the
# dead letter, not the order, and must not travel with a resubmitted copy.
_BROKER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})
_RECEIVE_BATCH = 50
_RECEIVE_WAIT_S = 5


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _properties(message: ServiceBusReceivedMessage) -> dict[str, PropertyValue]:
    properties: dict[str, PropertyValue] = {}
    for key, value in (message.application_properties or {}).items():
        if _text(key) in _BROKER_PROPERTIES:
            continue
        kept = value if isinstance(value, str | int | float | bool) else _text(value)
        properties[_text(key)] = kept
    return properties


def to_dead_letter(message: ServiceBusReceivedMessage) -> DeadLetter:
    return DeadLetter(
        sequence_number=int(message.sequence_number or 0),
        message_id=message.message_id,
        enqueued_time=message.enqueued_time_utc or datetime.now(UTC),
        delivery_count=int(message.delivery_count or 0),
        reason=message.dead_letter_reason or "",
        description=message.dead_letter_error_description,
        body=b"".join(message.body),
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        subject=message.subject,
        application_properties=_properties(message),
    )


class ServiceBusDeadLetterQueue:
    """``peek_limit`` bounds the peek of the active queue when verifying a copy: a copy beyond
    it is reported as not seen, and its dead letter stays (the safe side)."""

    def __init__(
        self,
        client: ServiceBusClient,
        queue_name: str,
        duplicate_detection_window: timedelta,
        peek_limit: int = 10_000,
    ) -> None:
        self._client = client
        self._queue_name = queue_name
        self._window = duplicate_detection_window
        self._peek_limit = peek_limit

    @classmethod
    def connect(
        cls,
        queue_name: str,
        window: timedelta,
        *,
        namespace: str | None = None,
        connection_string: str | None = None,
    ) -> ServiceBusDeadLetterQueue:
        if connection_string:
            client = ServiceBusClient.from_connection_string(connection_string)
        elif namespace:
            from azure.identity import DefaultAzureCredential

            client = ServiceBusClient(namespace, DefaultAzureCredential())
        else:
            raise ValueError("give --namespace (Entra ID) or --connection-string (emulator)")
        return cls(client, queue_name, window)

    @property
    def duplicate_detection_window(self) -> timedelta:
        return self._window

    def now(self) -> datetime:
        return datetime.now(UTC)

    def _peek_all(self, sub_queue: ServiceBusSubQueue | None, limit: int) -> list[Any]:
        found: list[ServiceBusReceivedMessage] = []
        with self._client.get_queue_receiver(self._queue_name, sub_queue=sub_queue) as receiver:
            next_sequence = 0
            while len(found) < limit:
                batch = receiver.peek_messages(
                    max_message_count=_PEEK_BATCH, sequence_number=next_sequence
                )
                if not batch:
                    break
                found.extend(batch)
                next_sequence = int(batch[-1].sequence_number or 0) + 1
        return found

    def dead_letters(self) -> list[DeadLetter]:
        peeked = self._peek_all(ServiceBusSubQueue.DEAD_LETTER, limit=1_000_000)
        return [to_dead_letter(message) for message in peeked]

    def send_copy(self, letter: DeadLetter) -> None:
        copy = ServiceBusMessage(
            letter.body,
            message_id=letter.message_id,
            correlation_id=letter.correlation_id,
            content_type=letter.content_type,
            subject=letter.subject,
            application_properties=dict(letter.application_properties),  # type: ignore[arg-type]
        )
        with self._client.get_queue_sender(self._queue_name) as sender:
            sender.send_messages(copy)

    def queued_message_ids(self) -> set[str]:
        return {
            message.message_id
            for message in self._peek_all(None, limit=self._peek_limit)
            if message.message_id
        }

    def remove(self, sequence_numbers: Iterable[int]) -> set[int]:
        """Receive the dead-letter sub-queue in peek-lock mode, complete the wanted messages and
        abandon the others, until all are found or the sub-queue has nothing more to give."""
        wanted = set(sequence_numbers)
        removed: set[int] = set()
        with self._client.get_queue_receiver(
            self._queue_name,
            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            receive_mode=ServiceBusReceiveMode.PEEK_LOCK,
        ) as receiver:
            seen: set[int] = set()
            while wanted - removed:
                batch = receiver.receive_messages(
                    max_message_count=_RECEIVE_BATCH, max_wait_time=_RECEIVE_WAIT_S
                )
                if not batch:
                    break
                fresh = False
                for message in batch:
                    sequence = int(message.sequence_number or 0)
                    fresh = fresh or sequence not in seen
                    seen.add(sequence)
                    if sequence in wanted:
                        receiver.complete_message(message)
                        removed.add(sequence)
                    else:
                        receiver.abandon_message(message)
                if not fresh:
                    break  # only messages already passed over: the rest are gone
        return removed
