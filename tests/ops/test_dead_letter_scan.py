"""The dead-letter tool's one-pass scan, on the real azure-servicebus receiver and sender over the
local broker (``local.assembly.dead_letter_queue``: the Service Bus adapter itself, its AMQP
handlers answered by ``local.standins.broker``): what an operator would check afterwards, in the
broker's own state.

Each test names, in its docstring, the product line whose reversal makes it fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    AmqpSequence,
    AmqpValue,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
    SubQueue,
)
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from ops.cli import main
from ops.servicebus import ServiceBusDeadLetterQueue
from tests.orders import message, order_body

WINDOW = timedelta(days=1)
LOCK = timedelta(minutes=1)
OUTAGE = MAX_DELIVERY_COUNT_EXCEEDED


class ToolKilled(BaseException):
    """The tool's process dies: nothing it does afterwards reaches the broker."""


@pytest.fixture
def clock() -> ManualClock:
    # Ahead of the wall clock, so the SDK never judges a lock lapsed that the broker holds.
    return ManualClock(datetime.now(UTC).replace(microsecond=0) + timedelta(days=1))


@pytest.fixture
def broker(clock: ManualClock) -> PeekLockQueue:
    return PeekLockQueue(QueueSettings.from_messaging_file(), clock)


def dead_letter(broker: PeekLockQueue, outgoing: OutgoingMessage, reason: str = OUTAGE) -> None:
    """Put one message in the dead-letter queue as the consumer (or the broker) would."""
    assert broker.send(outgoing)
    [delivery] = broker.receive(1)
    if reason == OUTAGE:
        while True:  # every delivery abandoned: an outage
            broker.abandon(delivery.lock_token)
            if not (deliveries := broker.receive(1)):
                break
            [delivery] = deliveries
    else:
        broker.dead_letter(delivery.lock_token, reason, f"{reason} of {outgoing.message_id}")


def orders(
    broker: PeekLockQueue, count: int, reason: Callable[[int], str] = lambda _: OUTAGE
) -> None:
    for index in range(count):
        order_id = f"ord-{index:05d}"
        dead_letter(broker, message(order_body(order_id), message_id=order_id), reason(index))


def tool(
    broker: PeekLockQueue,
    *argv: str,
    namespace: LocalNamespace | None = None,
    clock: ManualClock | None = None,
) -> tuple[int, dict[str, object] | str]:
    from io import StringIO

    out = StringIO()
    wall = clock if clock is not None else broker.clock
    queue = LocalDeadLetterQueue(broker, namespace, wall_clock=wall)
    code = main(list(argv), queue=queue, out=out, confirm=lambda _prompt: True)
    text = out.getvalue()
    return code, json.loads(text) if "--json" in argv else text


def dead_ids(broker: PeekLockQueue) -> list[str]:
    return sorted(dead.message.message_id or "" for dead in broker.dead_letters)


def queued_ids(broker: PeekLockQueue) -> list[str]:
    return sorted(peeked.message.message_id or "" for peeked in broker.peek())


def verdicts(report: object) -> dict[str, str]:
    assert isinstance(report, dict)
    return {row["messageId"]: row["verdict"] for row in report["results"]}


def test_a_dead_letter_far_beyond_the_first_receive_batch_is_resubmitted(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails with the old loop (abandon what is passed over, stop when a batch brings nothing
    new): the abandoned first batch comes back first, and the 250th is never reached."""
    orders(broker, 250)
    clock.advance(WINDOW)

    code, report = tool(broker, "resubmit", "ord-00249", "--json")

    assert code == 0, report
    assert verdicts(report) == {"ord-00249": "resubmitted"}
    assert "ord-00249" not in dead_ids(broker)
    assert len(broker.dead_letters) == 249  # the others untouched, none lost
    assert queued_ids(broker) == ["ord-00249"]  # its copy, under its MessageId


def test_bulk_resubmit_by_reason_across_a_large_queue_receives_each_dead_letter_once(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails if passed-over dead letters are abandoned instead of held (ServiceBusDeadLetterQueue
    .scan keeps ``held`` until the end): they would be received again and again."""
    orders(broker, 1_000, lambda index: "UnsupportedSchemaVersion" if index % 7 else OUTAGE)
    clock.advance(WINDOW)
    wanted = {f"ord-{index:05d}" for index in range(0, 1_000, 7)}

    code, report = tool(broker, "resubmit", "--reason", OUTAGE, "--json")

    assert code == 0
    assert verdicts(report) == dict.fromkeys(sorted(wanted), "resubmitted")
    assert set(queued_ids(broker)) == wanted
    assert len(broker.dead_letters) == 1_000 - len(wanted)
    assert all(dead.reason == "UnsupportedSchemaVersion" for dead in broker.dead_letters)
    assert isinstance(report, dict)
    assert report["scan"]["mostReceivesOfOne"] == 1  # type: ignore[index]
    # the scan stopped at the last one it wanted: it received no dead letter twice
    assert broker.stats.dead_letter_deliveries == report["scan"]["received"]  # type: ignore[index]


def test_a_dead_letter_locked_by_another_receiver_is_reported_not_received_and_nothing_is_sent(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails with the old ``_resubmit_one``, which ignored what ``remove()`` returned and said
    "dead letter removed" (exit 0) for a dead letter it could not remove."""
    orders(broker, 3)
    clock.advance(WINDOW)
    [other] = broker.receive(1, SubQueue.DEAD_LETTER)  # another operator's receiver holds it
    sent = broker.stats.sent

    code, report = tool(broker, "resubmit", "--reason", OUTAGE, "--json")

    assert code == 1
    assert verdicts(report) == {
        "ord-00000": "not-received",
        "ord-00001": "resubmitted",
        "ord-00002": "resubmitted",
    }
    assert broker.stats.sent == sent + 2  # no copy for the one it could not lock
    broker.abandon(other.lock_token)
    assert dead_ids(broker) == ["ord-00000"]


def test_locks_of_passed_over_dead_letters_are_renewed_while_the_scan_is_slow(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails without ``_renew_due``: the held locks lapse (20 s per receive, 1-minute locks),
    the passed-over dead letters come back and are received again."""

    def slow(operation: str) -> None:
        if operation == "receive":
            clock.advance(timedelta(seconds=20))

    orders(broker, 600)
    clock.advance(WINDOW)
    namespace = LocalNamespace({"orders": broker}, before_operation=slow, client_clock=clock)

    code, report = tool(broker, "resubmit", "ord-00599", "--json", namespace=namespace)

    assert code == 0, report
    assert isinstance(report, dict)
    scan = report["scan"]
    assert scan["mostReceivesOfOne"] == 1  # type: ignore[index]
    assert scan["lockRenewals"] > 0  # type: ignore[index]
    assert broker.stats.dead_letter_locks_expired == 0
    assert len(broker.dead_letters) == 599


def test_a_tool_killed_mid_scan_loses_no_dead_letter_and_the_rerun_finishes(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails if the scan completed (or deferred) what it passes over: after the kill, those would
    be gone (or out of reach of any receive)."""
    orders(broker, 300, lambda index: "InvalidPayload" if index % 2 else OUTAGE)
    clock.advance(timedelta(minutes=1))
    killed = {"after": 2, "dead": False}

    def die_on_third_receive(operation: str) -> None:
        if killed["dead"]:
            raise ToolKilled(operation)
        if operation == "receive":
            killed["after"] -= 1
            if killed["after"] < 0:
                killed["dead"] = True
                raise ToolKilled(operation)

    namespace = LocalNamespace(
        {"orders": broker}, before_operation=die_on_third_receive, client_clock=clock
    )
    purge = ("purge", "--reason", "InvalidPayload", "--older-than", "0m", "--yes", "--json")
    with pytest.raises(ToolKilled):
        tool(broker, *purge, namespace=namespace)
    removed_before_the_kill = 300 - len(broker.dead_letters)
    clock.advance(LOCK)  # the dead tool's locks lapse

    assert removed_before_the_kill == 100  # the two batches before the kill: 50 each
    assert sum(dead.reason == OUTAGE for dead in broker.dead_letters) == 150  # none lost
    code, report = tool(broker, *purge)
    assert code == 0, report
    assert [dead.reason for dead in broker.dead_letters] == [OUTAGE] * 150


def test_killed_between_the_send_and_the_removal_the_rerun_removes_without_a_second_order(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails if the removal came before the send (the order would be lost with the kill)."""
    orders(broker, 1)
    clock.advance(WINDOW)
    state = {"sent": False}

    def die_before_removal(operation: str) -> None:
        if operation == "send":
            state["sent"] = True
        elif state["sent"]:
            raise ToolKilled(operation)

    namespace = LocalNamespace({"orders": broker}, before_operation=die_before_removal)
    with pytest.raises(ToolKilled):
        tool(broker, "resubmit", "ord-00000", namespace=namespace)
    clock.advance(LOCK)
    assert dead_ids(broker) == ["ord-00000"]  # the dead letter is still there
    assert queued_ids(broker) == ["ord-00000"]  # and so is its copy

    code, report = tool(broker, "resubmit", "ord-00000", "--json")

    assert code == 0
    assert verdicts(report) == {"ord-00000": "resubmitted"}  # the copy seen on the queue
    assert dead_ids(broker) == []
    assert queued_ids(broker) == ["ord-00000"]  # one copy: the second was dropped
    assert broker.stats.dropped_duplicates == 1


def test_unusual_bodies_are_listed_shown_and_refused_never_fatal(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails with ``b"".join(message.body)`` in ``to_dead_letter``: a value or sequence body
    raised, and every command failed once one such dead letter was in the queue."""
    text_order = json.dumps(order_body("ord-text"))
    dead_letter(broker, OutgoingMessage("ord-text", b"", amqp_body=AmqpValue(text_order)))
    dead_letter(broker, OutgoingMessage("ord-map", b"", amqp_body=AmqpValue({"orderId": "m"})))
    dead_letter(broker, OutgoingMessage("ord-seq", b"", amqp_body=AmqpSequence(((1, "a"),))))
    clock.advance(WINDOW)  # past the window, and older than "0m"

    code, listed = tool(broker, "list", "--json")
    assert code == 0
    assert isinstance(listed, list)
    assert [(row["messageId"], row["bodyKind"], row["bodyProblem"]) for row in listed] == [
        ("ord-text", "value", None),
        ("ord-map", "value", "an AMQP value body holding a dict, not text"),
        ("ord-seq", "sequence", "an AMQP sequence body (a JMS StreamMessage)"),
    ]
    code, shown = tool(broker, "show", "ord-seq")
    assert code == 0
    assert "an AMQP sequence body" in str(shown)

    code, report = tool(broker, "resubmit", "--reason", OUTAGE, "--json")

    assert code == 1
    assert verdicts(report) == {
        "ord-text": "resubmitted",
        "ord-map": "refused",
        "ord-seq": "refused",
    }
    [copy] = broker.peek()
    assert copy.message.amqp_body == AmqpValue(text_order.encode())  # a value body still
    assert dead_ids(broker) == ["ord-map", "ord-seq"]
    code, _ = tool(broker, "purge", "--reason", OUTAGE, "--older-than", "0m", "--yes")
    assert (code, broker.dead_letters) == (0, [])


def test_a_resubmit_inside_the_window_is_held_then_forced_and_dropped_never_lost(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    orders(broker, 2)
    clock.advance(timedelta(hours=2))

    code, held = tool(broker, "resubmit", "--reason", OUTAGE, "--json")
    assert code == 1
    assert set(verdicts(held).values()) == {"held"}
    code, forced = tool(broker, "resubmit", "--reason", OUTAGE, "--inside-window", "--json")

    assert code == 1
    assert set(verdicts(forced).values()) == {"dropped"}
    assert broker.stats.dropped_duplicates == 2  # the broker took the sends and kept nothing
    assert dead_ids(broker) == ["ord-00000", "ord-00001"]


def test_an_explicit_window_wins_over_the_one_the_adapter_was_given(clock: ManualClock) -> None:
    """The Bicep can deploy a shorter window (``duplicateDetectionHistoryTimeWindowOverride``)
    than infra/messaging.json's P1D, which the adapter was built with."""
    from io import StringIO

    deployed = QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(hours=1))
    broker = PeekLockQueue(deployed, clock)
    orders(broker, 1)
    clock.advance(timedelta(hours=2))
    client = servicebus_client(LocalNamespace({"orders": broker}, client_clock=clock))
    queue = ServiceBusDeadLetterQueue(client, "orders", WINDOW, clock=clock, wall_clock=clock)

    def resubmit(*argv: str) -> tuple[int, dict[str, Any]]:
        out = StringIO()
        code = main([*argv, "resubmit", "ord-00000", "--json"], queue=queue, out=out)
        return code, json.loads(out.getvalue())

    assert verdicts(resubmit()[1]) == {"ord-00000": "held"}
    code, report = resubmit("--window", "PT1H")

    assert code == 0
    assert verdicts(report) == {"ord-00000": "resubmitted"}
    assert report["notes"][0] == "duplicate-detection window: 1:00:00 (from --window)"


@pytest.fixture
def adapter(broker: PeekLockQueue, clock: ManualClock) -> Iterator[ServiceBusDeadLetterQueue]:
    queue = LocalDeadLetterQueue(broker, wall_clock=clock)
    yield queue
    queue.close()


def test_the_scan_completes_only_what_the_decision_returns(
    broker: PeekLockQueue, adapter: ServiceBusDeadLetterQueue
) -> None:
    orders(broker, 5)
    letters = adapter.dead_letters()
    seen: list[int] = []

    def keep_odd(batch: object) -> set[int]:
        sequences = [letter.sequence_number for letter in batch]  # type: ignore[attr-defined]
        seen.extend(sequences)
        return {s for s in sequences if s % 2 == 0}

    result = adapter.scan({x.sequence_number for x in letters[1:]}, keep_odd)

    assert sorted(seen) == [x.sequence_number for x in letters[1:]]
    assert result.removed == {x.sequence_number for x in letters if x.sequence_number % 2 == 0}
    assert result.removed.isdisjoint({letters[0].sequence_number})
    assert (result.failed, result.not_received) == ({}, set())
    assert len(broker.dead_letters) == 5 - len(result.removed)
    assert broker.receive(10, SubQueue.DEAD_LETTER)  # every held lock was released at the end


def test_a_receive_that_fails_mid_scan_ends_the_scan_with_what_was_done_reported(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Fails if a failing receive aborted the command: the removals already made would go
    unreported, and the operator would rerun blind."""
    from azure.servicebus._pyamqp.error import ErrorCondition, MessageException

    orders(broker, 250)
    clock.advance(timedelta(minutes=1))
    receives = {"left": 2}

    def refuse_the_third_receive(operation: str) -> None:
        if operation == "receive":
            receives["left"] -= 1
            if receives["left"] < 0:  # e.g. the role was removed meanwhile
                raise MessageException(ErrorCondition.UnauthorizedAccess, description="revoked")

    namespace = LocalNamespace(
        {"orders": broker}, before_operation=refuse_the_third_receive, client_clock=clock
    )
    purge = ("purge", "--reason", OUTAGE, "--older-than", "0m", "--yes", "--json")

    code, report = tool(broker, *purge, namespace=namespace)

    assert code == 1
    assert isinstance(report, dict)
    assert report["counts"] == {"removed": 200, "not-received": 50}
    assert "a receive failed" in report["scan"]["stopped"]  # type: ignore[index]
    assert len(broker.dead_letters) == 50
