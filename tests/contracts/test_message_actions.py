"""The ``MessageActions`` contract (``shared.adapters.servicebus_in.MessageActions``: the Functions
extension's settlement client), run by the real ``ServiceBusMessageActions`` against the host's
settlement service (``local.standins.settlement_server`` over the broker model) and by the
double (``local.standins.doubles.RecordingActions``).

What the consumer relies on (``Settler.settle``): each call settles the message it is given as
named, a dead letter with the reason and description given (None stays None); a call on a
message already settled raises and changes nothing (the consumer logs and swallows it: the
redelivery resolves it); calls arrive from several threads at once (the settler's pool).

``test_a_settled_message_cannot_be_settled_again`` fails for the double as it was (every fake
of this port accepted any call, so none could stand for a lost lock).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions import (
    SettlementError,
)
from idempotent_consumer.servicebus import MessageActions

from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue, QueueSettings
from local.standins.doubles import RecordingActions, SettlementRefused
from local.standins.host_binding import decode_host_binding, encode_amqp, host_binding_bytes
from local.standins.settlement_server import SettlementServer, bind_message_actions

# (operation, dead-letter reason, dead-letter description), operations named as the port does.
Settled = tuple[str, str | None, str | None]


@dataclass
class ActionsUnderTest:
    actions: MessageActions
    deliver: Callable[[], Any]  # a message under a lock, as the function receives it
    settled: Callable[[Any], list[Settled]]  # what took effect for that message, in order
    refused: type[Exception]  # what a settlement of a settled message raises


class MessageActionsContract:
    """What every ``MessageActions`` must do. Subclasses provide ``subject``."""

    @pytest.fixture
    def subject(self) -> ActionsUnderTest:
        raise NotImplementedError

    def test_complete_settles_the_message_as_completed(self, subject: ActionsUnderTest) -> None:
        message = subject.deliver()

        subject.actions.complete(message)

        assert subject.settled(message) == [("complete", None, None)]

    def test_abandon_settles_the_message_as_abandoned(self, subject: ActionsUnderTest) -> None:
        message = subject.deliver()

        subject.actions.abandon(message)

        assert subject.settled(message) == [("abandon", None, None)]

    def test_a_dead_letter_carries_its_reason_and_description(
        self, subject: ActionsUnderTest
    ) -> None:
        message = subject.deliver()

        subject.actions.deadletter(
            message,
            deadletter_reason="HashMismatch",
            deadletter_error_description="order ord-1 already exists with another hash",
        )

        assert subject.settled(message) == [
            ("deadletter", "HashMismatch", "order ord-1 already exists with another hash")
        ]

    def test_a_dead_letter_without_a_description_has_none(self, subject: ActionsUnderTest) -> None:
        message = subject.deliver()

        subject.actions.deadletter(message, deadletter_reason="InvalidJson")

        assert subject.settled(message) == [("deadletter", "InvalidJson", None)]

    @pytest.mark.parametrize("again", ["complete", "abandon", "deadletter"])
    def test_a_settled_message_cannot_be_settled_again(
        self, subject: ActionsUnderTest, again: str
    ) -> None:
        """Fails for the double as it was (see the module docstring)."""
        message = subject.deliver()
        subject.actions.complete(message)

        with pytest.raises(subject.refused):
            getattr(subject.actions, again)(message)

        assert subject.settled(message) == [("complete", None, None)]

    def test_settlements_from_many_threads_each_take_effect_once(
        self, subject: ActionsUnderTest
    ) -> None:
        messages = [subject.deliver() for _ in range(24)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(subject.actions.complete, messages))

        assert [subject.settled(message) for message in messages] == [
            [("complete", None, None)]
        ] * 24


class TestRecordingActions(MessageActionsContract):
    @pytest.fixture
    def subject(self) -> ActionsUnderTest:
        actions = RecordingActions()

        def settled(message: Any) -> list[Settled]:
            return [
                (call.operation, call.deadletter_reason, call.deadletter_error_description)
                for call in list(actions.calls)
                if call.message is message
            ]

        return ActionsUnderTest(actions, object, settled, SettlementRefused)


# The broker's names of its settlement operations, as the port names them.
_PORT_OPERATION = {"complete": "complete", "abandon": "abandon", "dead_letter": "deadletter"}


class TestServiceBusMessageActions(MessageActionsContract):
    """The extension's client over gRPC to the local settlement service; each message is built
    as the host hands it to the worker and decoded by the extension's own converter, so its lock
    token is the one the broker issued."""

    @pytest.fixture
    def subject(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[ActionsUnderTest]:
        # bind_message_actions rewrites sys.argv and the client singleton; undo both afterwards.
        monkeypatch.setattr(sys, "argv", list(sys.argv))
        monkeypatch.setattr(ServiceBusMessageActions, "_instance", None)
        settings = QueueSettings(timedelta(minutes=1), 10, timedelta(minutes=10), "orders")
        queue = PeekLockQueue(settings, ManualClock())

        def deliver() -> Any:
            message_id = f"ord-{uuid.uuid4().hex[:8]}"
            queue.send(OutgoingMessage(message_id, b'{"orderId": "1"}'))
            [delivery] = queue.receive()
            amqp = encode_amqp(body=delivery.message.body, message_id=message_id)
            return decode_host_binding(host_binding_bytes(delivery.lock_token, amqp))

        def settled(message: Any) -> list[Settled]:
            return [
                (_PORT_OPERATION[record.operation], record.reason, record.description)
                for record in queue.settlement_log
                if record.ok and record.lock_token == message.lock_token
            ]

        with SettlementServer(queue) as server:
            actions = bind_message_actions(server.port)
            yield ActionsUnderTest(actions, deliver, settled, SettlementError)
