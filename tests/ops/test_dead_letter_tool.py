"""The dead-letter tool against the local broker model (same duplicate detection, delivery count
and dead-lettering as the Bicep's queue, from infra/messaging.json), and against the real
function and the local Cosmos DB server where the stored order matters.

Each resubmission case checks what an operator would: what is left in the dead-letter queue,
what is on the queue, and what the broker accepted or dropped.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from azure.cosmos.aio import ContainerProxy

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
)
from local.standins.host import LocalFunctionsHost
from local.standins.servicebus_link import LocalNamespace
from ops.cli import main, parse_duration
from ops.cosmos import CosmosOrderLookup
from tests.orders import message, order_body

WINDOW = timedelta(days=1)  # infra/messaging.json


def exhaust(queue: PeekLockQueue, outgoing: OutgoingMessage) -> None:
    """Send, then abandon every delivery until the broker dead-letters it (an outage)."""
    assert queue.send(outgoing)
    while deliveries := queue.receive(1):
        queue.abandon(deliveries[0].lock_token)
    assert queue.dead_letters[-1].reason == MAX_DELIVERY_COUNT_EXCEEDED


def run(queue: PeekLockQueue, *argv: str, **kwargs: object) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), queue=LocalDeadLetterQueue(queue), out=out, **kwargs)  # type: ignore[arg-type]
    return code, out.getvalue()


def dead_ids(queue: PeekLockQueue) -> list[str | None]:
    return [dead.message.message_id for dead in queue.dead_letters]


def queued_ids(queue: PeekLockQueue) -> list[str | None]:
    return [peeked.message.message_id for peeked in queue.peek()]


def test_the_window_comes_from_messaging_json(queue: PeekLockQueue) -> None:
    assert queue.settings.duplicate_detection_window == WINDOW
    assert LocalDeadLetterQueue(queue).duplicate_detection_window == WINDOW


def test_list_shows_each_dead_letter_and_filters_by_reason(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    exhaust(queue, message(order_body("ord-2"), message_id="ord-2"))

    code, text = run(queue, "list", "--json")
    rows = json.loads(text)
    assert code == 0
    assert [(row["messageId"], row["reason"], row["deliveryCount"]) for row in rows] == [
        ("ord-1", MAX_DELIVERY_COUNT_EXCEEDED, 10),
        ("ord-2", MAX_DELIVERY_COUNT_EXCEEDED, 10),
    ]
    assert rows[0]["enqueuedTime"] == clock.now().isoformat()
    assert "10 delivery attempts" in rows[0]["description"]
    assert json.loads(run(queue, "list", "--json", "--reason", "HashMismatch")[1]) == []
    code, table = run(queue, "list")
    assert "ord-2" in table
    assert "2 dead letter(s)" in table


def test_resubmit_after_the_window_sends_a_verified_copy_and_removes_the_dead_letter(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    original = message(order_body("ord-1"), message_id="ord-1", traceparent="00-1-2-01")
    exhaust(queue, original)
    clock.advance(WINDOW)

    code, text = run(queue, "resubmit", "ord-1")

    assert code == 0, text
    assert "resubmitted" in text
    assert dead_ids(queue) == []
    [copy] = queue.peek()
    assert copy.message.message_id == "ord-1"  # never a new MessageId
    assert copy.message.body == original.body
    assert copy.message.correlation_id == original.correlation_id
    assert copy.message.application_properties == original.application_properties


def test_resubmit_inside_the_window_is_held_and_sends_nothing(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(WINDOW - timedelta(minutes=1))
    sent = queue.stats.sent

    code, text = run(queue, "resubmit", "ord-1")

    assert code == 1  # the operator must look
    assert "held" in text
    assert "duplicate-detection window" in text
    assert queue.stats.sent == sent
    assert dead_ids(queue) == ["ord-1"]


def test_forcing_a_resubmit_inside_the_window_keeps_the_dead_letter_when_the_copy_is_dropped(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(timedelta(hours=1))
    dropped = queue.stats.dropped_duplicates

    code, text = run(queue, "resubmit", "ord-1", "--inside-window")

    assert code == 1
    assert "dropped" in text
    assert queue.stats.dropped_duplicates == dropped + 1  # the broker said nothing to the sender
    assert dead_ids(queue) == ["ord-1"]  # not lost
    assert queued_ids(queue) == []


def test_a_crash_between_send_and_removal_leaves_a_copy_the_rerun_verifies(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(WINDOW)
    port = LocalDeadLetterQueue(queue)
    [letter] = port.dead_letters()
    port.send_copies([letter])  # ... and the tool dies before removing the dead letter
    clock.advance(timedelta(minutes=5))

    code, text = run(queue, "resubmit", "ord-1")

    assert code == 0, text
    assert dead_ids(queue) == []
    assert queued_ids(queue) == ["ord-1"]  # one copy: the second send was dropped
    assert queue.stats.dropped_duplicates == 1


def test_a_message_id_that_is_not_the_order_id_is_refused(queue: PeekLockQueue) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-9"))
    exhaust(queue, message(order_body("ord-2"), message_id=None))
    sent = queue.stats.sent

    code, text = run(queue, "resubmit", "--reason", MAX_DELIVERY_COUNT_EXCEEDED, "--json")

    assert code == 1
    results = json.loads(text)["results"]
    assert [r["verdict"] for r in results] == ["refused", "refused"]
    assert "MessageIdMismatch" in results[0]["detail"]
    assert queue.stats.sent == sent
    assert dead_ids(queue) == ["ord-9", None]


async def test_a_deeply_nested_body_is_refused_and_the_rest_of_the_batch_is_resubmitted(
    host: LocalFunctionsHost, queue: PeekLockQueue, clock: ManualClock
) -> None:
    """A 200 KB nested array, under the 256 KB message limit: the consumer's parser refuses it
    (InvalidPayload); the tool reads it the same way, so it refuses that one dead letter and
    resubmits the others (``json.loads`` raised RecursionError and nothing was resubmitted)."""
    nested = b"[" * 100_000 + b"]" * 100_000
    queue.send(message(nested, message_id="ord-deep"))
    await host.run_until_idle()
    assert [dead.reason for dead in queue.dead_letters] == ["InvalidPayload"]
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(WINDOW)

    code, text = run(queue, "resubmit", "ord-deep", "ord-1", "--json")

    assert code == 1  # one refused: the operator must look
    results = {row["messageId"]: row for row in json.loads(text)["results"]}
    assert (results["ord-1"]["verdict"], results["ord-deep"]["verdict"]) == (
        "resubmitted",
        "refused",
    )
    assert "dead-lettered as InvalidPayload again" in results["ord-deep"]["detail"]
    assert "recursion limit" in results["ord-deep"]["detail"]  # the consumer's own words
    assert queued_ids(queue) == ["ord-1"]
    assert dead_ids(queue) == ["ord-deep"]


def test_bulk_resubmit_by_reason_takes_only_that_reason(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    for order_id in ("ord-1", "ord-2", "ord-3"):
        exhaust(queue, message(order_body(order_id), message_id=order_id))
    bad_version = message(order_body("ord-4", schemaVersion=2), message_id="ord-4")
    queue.send(bad_version)
    [delivery] = queue.receive(1)
    queue.dead_letter(delivery.lock_token, "UnsupportedSchemaVersion", "schemaVersion 2")
    clock.advance(WINDOW)

    code, text = run(queue, "resubmit", "--reason", MAX_DELIVERY_COUNT_EXCEEDED)

    assert code == 0, text
    assert sorted(queued_ids(queue), key=str) == ["ord-1", "ord-2", "ord-3"]
    assert dead_ids(queue) == ["ord-4"]
    code, _ = run(queue, "resubmit", "--reason", "UnsupportedSchemaVersion")
    assert code == 0
    assert dead_ids(queue) == []


def test_dry_run_changes_nothing(queue: PeekLockQueue, clock: ManualClock) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(WINDOW)
    sent = queue.stats.sent

    code, text = run(queue, "resubmit", "ord-1", "--dry-run")

    assert code == 0
    assert "would-resubmit" in text
    assert queue.stats.sent == sent
    assert dead_ids(queue) == ["ord-1"]


def test_unknown_ids_are_reported(queue: PeekLockQueue) -> None:
    code, text = run(queue, "resubmit", "ord-404")
    assert code == 1
    assert "not in the dead-letter queue: ord-404" in text


def test_purge_asks_and_removes_only_old_dead_letters_of_the_reason(
    queue: PeekLockQueue, clock: ManualClock
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(timedelta(days=8))
    exhaust(queue, message(order_body("ord-2"), message_id="ord-2"))  # too recent
    asked: list[str] = []

    def decline(prompt: str) -> bool:
        asked.append(prompt)
        return False

    args = ("purge", "--reason", MAX_DELIVERY_COUNT_EXCEEDED, "--older-than", "7d")
    code, _ = run(queue, *args, confirm=decline)
    assert (code, len(asked)) == (1, 1)
    assert "1 dead letter" in asked[0]
    assert dead_ids(queue) == ["ord-1", "ord-2"]

    code, text = run(queue, *args, confirm=lambda prompt: True)
    assert code == 0
    assert "1 dead letter(s): 1 removed" in text
    assert dead_ids(queue) == ["ord-2"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("30m", timedelta(minutes=30)),
        ("P1D", timedelta(days=1)),
        ("PT6H", timedelta(hours=6)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


# ---- with the real function and the stored order ------------------------------------------------


def lookup(app_env: dict[str, str]) -> CosmosOrderLookup:
    return CosmosOrderLookup.connect(
        app_env["COSMOS_ENDPOINT"],
        app_env["COSMOS_DATABASE"],
        app_env["COSMOS_CONTAINER"],
        key=app_env["COSMOS_KEY"],
        verify_tls=False,
    )


async def test_hash_mismatch_shows_the_differing_fields_and_is_not_resubmitted(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    queue.send(message(order_body("ord-1"), message_id="ord-1"))
    await host.run_until_idle()
    clock.advance(WINDOW)
    changed = order_body("ord-1", currency="USD")
    changed["lines"][1]["quantity"] = 5
    queue.send(message(changed, message_id="ord-1"))
    await host.run_until_idle()
    assert [dead.reason for dead in queue.dead_letters] == ["HashMismatch"]
    orders = lookup(app_env)

    code, text = run(queue, "show", "ord-1", orders=orders)
    assert code == 0
    assert "currency" in text
    assert '"USD"' in text
    assert '"EUR"' in text
    assert "lines[1].quantity" in text
    assert "lines[0]" not in text

    clock.advance(WINDOW)
    code, text = run(queue, "resubmit", "ord-1", orders=orders)
    assert code == 1
    assert "refused" in text
    assert "HashMismatch" in text
    assert len(queue.dead_letters) == 1


async def test_after_a_crash_the_consumer_absorbs_the_copy_and_the_rerun_removes_the_dead_letter(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))  # the outage
    clock.advance(WINDOW)
    port = LocalDeadLetterQueue(queue)
    [letter] = port.dead_letters()
    port.send_copies([letter])  # the tool crashed here, before removing the dead letter
    await host.run_until_idle()  # the consumer processes the copy: the order is stored
    orders = lookup(app_env)

    code, text = run(queue, "resubmit", "ord-1", orders=orders)

    assert code == 0, text
    assert "already-stored" in text
    assert dead_ids(queue) == []
    documents = [
        doc async for doc in container.query_items("SELECT * FROM c WHERE c.type = 'order'")
    ]
    assert [doc["id"] for doc in documents] == ["ord-1"]


class ToolKilled(BaseException):
    """The tool's process dies: nothing it does afterwards reaches the broker."""


async def test_killed_after_sending_then_rerun_a_day_later_the_consumer_absorbs_the_second_copy(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """The tool dies between the send and the removal, and nobody consumes the copy for a day
    (the consumer is still down). The rerun, past both windows, sends a second copy (the first
    is on the queue, so it verifies either way) and removes the dead letter; the consumer then
    takes both copies: one order, the second completed as a duplicate. No order lost, none
    doubled."""
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))
    clock.advance(WINDOW)
    state = {"sent": False}

    def die_after_the_send(operation: str) -> None:
        if operation == "send":
            state["sent"] = True
        elif state["sent"]:
            raise ToolKilled(operation)

    namespace = LocalNamespace({"orders": queue}, before_operation=die_after_the_send)
    with pytest.raises(ToolKilled):
        main(["resubmit", "ord-1"], queue=LocalDeadLetterQueue(queue, namespace))
    clock.advance(WINDOW)  # the dead tool's lock lapsed long ago; the copy is a day old
    assert (dead_ids(queue), queued_ids(queue)) == (["ord-1"], ["ord-1"])

    code, text = run(queue, "resubmit", "ord-1", "--json", orders=lookup(app_env))

    assert code == 0, text
    assert [r["verdict"] for r in json.loads(text)["results"]] == ["resubmitted"]
    assert (dead_ids(queue), queued_ids(queue)) == ([], ["ord-1", "ord-1"])
    await host.run_until_idle()
    orders = [doc async for doc in container.query_items("SELECT * FROM c WHERE c.type = 'order'")]
    assert [doc["id"] for doc in orders] == ["ord-1"]
    assert queue.is_idle()
    completes = [r for r in queue.settlement_log if r.operation == "complete" and r.ok]
    assert [r.message_id for r in completes[-2:]] == ["ord-1", "ord-1"]  # the duplicate too
