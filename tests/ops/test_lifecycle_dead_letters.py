"""The dead-letter tool's verdicts on the order lifecycle's dead letters: OrderAmended and
OrderCancelled (Subject = their type, a MessageId of their own), read as the consumer reads them.

Through the tool's Service Bus adapter on the real SDK over the local broker link, the real
function on the local Functions host (Microsoft's worker) and the real azure-cosmos client
against the local Cosmos DB server. What an operator checks: each verdict and its reason, what
is left in the dead-letter queue, and the order and its markers in Cosmos DB afterwards.
"""

from __future__ import annotations

import io
import json
from typing import Any

from azure.cosmos.aio import ContainerProxy

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import ManualClock, OutgoingMessage, PeekLockQueue
from local.standins.host import LocalFunctionsHost
from ops.cli import main
from ops.cosmos import CosmosOrderLookup
from ops.sample_orders import amended_body, cancelled_body, lifecycle_message_id, order_body
from tests.ops.test_dead_letter_tool import WINDOW, dead_ids, exhaust, lookup
from tests.state import documents

ORDER = "ord-7001"


def placed() -> OutgoingMessage:
    return OutgoingMessage(ORDER, json.dumps(order_body(ORDER)).encode(), "corr-p")


def amended(version: int, message_id: str | None = None, **fields: Any) -> OutgoingMessage:
    return OutgoingMessage(
        message_id or lifecycle_message_id(ORDER, version),
        json.dumps(amended_body(ORDER, version, **fields)).encode(),
        f"corr-a{version}",
        subject="OrderAmended",
    )


def cancelled(version: int) -> OutgoingMessage:
    return OutgoingMessage(
        lifecycle_message_id(ORDER, version),
        json.dumps(cancelled_body(ORDER, version)).encode(),
        f"corr-c{version}",
        subject="OrderCancelled",
    )


def resubmit(
    queue: PeekLockQueue, orders: CosmosOrderLookup | None, *argv: str
) -> tuple[int, dict[str, dict[str, Any]]]:
    """The tool's JSON report, its results by MessageId."""
    out = io.StringIO()
    code = main(
        ["resubmit", *argv, "--json"], queue=LocalDeadLetterQueue(queue), orders=orders, out=out
    )
    report = json.loads(out.getvalue())
    return code, {row["messageId"]: row for row in report["results"]}


async def stored(container: ContainerProxy) -> tuple[dict[str, Any], dict[str, str]]:
    """The order, and its markers' outcomes by MessageId."""
    found = await documents(container)
    (order,) = [d for d in found if d["type"] == "order"]
    return order, {d["messageId"]: d["outcome"] for d in found if d["type"] == "inbox"}


async def test_an_amendment_dead_lettered_by_an_outage_is_resubmitted_and_applied(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """Fails on a tool that reads every dead letter as an OrderPlaced: a change's MessageId is
    not its orderId, so it was refused as a MessageIdMismatch it is not."""
    queue.send(placed())
    await host.run_until_idle()
    exhaust(queue, amended(2))  # the outage
    clock.advance(WINDOW)

    code, results = resubmit(queue, lookup(app_env), "--reason", "MaxDeliveryCountExceeded")

    v2 = lifecycle_message_id(ORDER, 2)
    assert code == 0, results
    assert results[v2]["verdict"] == "resubmitted"
    [copy] = queue.peek()
    assert (copy.message.message_id, copy.message.subject) == (v2, "OrderAmended")
    await host.run_until_idle()
    order, markers = await stored(container)
    assert (order["orderVersion"], order["lines"]) == (2, amended_body(ORDER, 2)["lines"])
    assert markers == {v2: "processed"}
    assert dead_ids(queue) == []


async def test_a_change_after_the_cancellation_is_refused_as_an_invalid_transition(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """Refused like the other reasons only the producer can fix: by its reason, with or without
    the Cosmos DB endpoint; and by the stored cancellation for a change that was dead-lettered
    for another reason (an outage) before the cancellation was applied."""
    queue.send(placed())
    await host.run_until_idle()
    exhaust(queue, amended(3))  # the outage: v3 dead-lettered before anything said cancelled
    for outgoing in (cancelled(2), amended(4)):  # in this order: the host runs deliveries
        queue.send(outgoing)  # concurrently
        await host.run_until_idle()
    assert [(d.message.message_id, d.reason) for d in queue.dead_letters] == [
        (lifecycle_message_id(ORDER, 3), "MaxDeliveryCountExceeded"),
        (lifecycle_message_id(ORDER, 4), "InvalidTransition"),
    ]
    clock.advance(WINDOW)
    sent = queue.stats.sent

    code, without_cosmos = resubmit(queue, None, "--reason", "InvalidTransition")
    code_all, results = resubmit(
        queue,
        lookup(app_env),
        lifecycle_message_id(ORDER, 3),
        lifecycle_message_id(ORDER, 4),
    )

    assert (code, code_all) == (1, 1)
    v3, v4 = lifecycle_message_id(ORDER, 3), lifecycle_message_id(ORDER, 4)
    for row in (without_cosmos[v4], results[v4], results[v3]):
        assert row["verdict"] == "refused"
        assert "dead-lettered as InvalidTransition again" in row["detail"], row
        assert "MessageIdMismatch" not in row["detail"]
    assert "cancelled at version 2" in results[v3]["detail"]
    assert queue.stats.sent == sent  # nothing sent
    assert dead_ids(queue) == [v3, v4]


async def test_an_older_version_replayed_is_resubmitted_and_completed_as_stale(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """v2 dead-lettered by an outage, v3 applied since: the copy of v2 can change nothing. The
    tool says so before, sends it (the consumer decides), and the consumer completes it as
    stale; a rerun after a crash finds it handled and only removes the dead letter."""
    queue.send(placed())
    await host.run_until_idle()
    exhaust(queue, amended(2))
    queue.send(amended(3))
    await host.run_until_idle()
    clock.advance(WINDOW)
    v2 = lifecycle_message_id(ORDER, 2)

    code, dry = resubmit(queue, lookup(app_env), v2, "--dry-run")

    assert (code, dry[v2]["verdict"]) == (0, "would-resubmit")
    stale = "order ord-7001 is at version 3: the consumer will complete this version 2 as stale"
    assert stale in dry[v2]["detail"]
    port = LocalDeadLetterQueue(queue)
    [letter] = port.dead_letters()
    port.send_copies([letter])  # the tool crashed here, before removing the dead letter
    await host.run_until_idle()  # the consumer completes the copy as stale
    order, markers = await stored(container)
    assert order["orderVersion"] == 3
    assert markers == {v2: "stale", lifecycle_message_id(ORDER, 3): "processed"}

    code, rerun = resubmit(queue, lookup(app_env), v2)

    assert code == 0, rerun
    assert rerun[v2]["verdict"] == "already-stored"
    assert f"{v2} was handled as OrderAmended version 2 (stale)" in rerun[v2]["detail"]
    assert dead_ids(queue) == []


async def test_a_reused_change_message_id_is_refused_as_a_hash_mismatch_and_shown_as_its_diff(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    queue.send(placed())
    await host.run_until_idle()
    queue.send(amended(2))
    await host.run_until_idle()
    clock.advance(WINDOW)
    other = amended_body(ORDER, 2)["lines"]
    other[1]["quantity"] = 7
    queue.send(amended(2, lines=other))
    await host.run_until_idle()
    v2 = lifecycle_message_id(ORDER, 2)
    assert [d.reason for d in queue.dead_letters] == ["HashMismatch"]
    clock.advance(WINDOW)

    code, results = resubmit(queue, lookup(app_env), v2)

    assert code == 1
    assert results[v2]["verdict"] == "refused"
    assert "dead-lettered as HashMismatch again" in results[v2]["detail"]
    out = io.StringIO()
    main(["show", v2], queue=LocalDeadLetterQueue(queue), orders=lookup(app_env), out=out)
    diff = out.getvalue().split("dead letter")[-1]  # the table after the dead letter's JSON
    assert "requestHash" in diff
    assert "lines[1].quantity" in diff  # the order still holds the v2 the marker recorded
    assert "orderVersion" not in diff  # the same version: not a difference


async def test_a_change_the_contract_refuses_by_its_message_id_or_subject_is_refused(
    host: LocalFunctionsHost, queue: PeekLockQueue, clock: ManualClock, app_env: dict[str, str]
) -> None:
    """A change under its order's MessageId (with duplicate detection, the queue would drop it
    silently) and a Subject the consumer does not read: the consumer dead-letters both, and a
    copy would be dead-lettered again, whatever the order's state."""
    queue.send(placed())
    await host.run_until_idle()
    clock.advance(WINDOW)
    queue.send(amended(2, message_id=ORDER))
    body = json.dumps(order_body(ORDER)).encode()
    queue.send(OutgoingMessage("refund-1", body, "c", subject="OrderRefunded"))
    await host.run_until_idle()
    assert {d.message.message_id: d.reason for d in queue.dead_letters} == {
        ORDER: "MessageIdMismatch",
        "refund-1": "UnsupportedMessageType",
    }
    clock.advance(WINDOW)

    code, results = resubmit(queue, lookup(app_env), ORDER, "refund-1")

    assert code == 1
    assert results[ORDER]["verdict"] == results["refund-1"]["verdict"] == "refused"
    assert "equals the orderId" in results[ORDER]["detail"]
    assert "dead-lettered as MessageIdMismatch again" in results[ORDER]["detail"]
    assert "UnsupportedMessageType again" in results["refund-1"]["detail"]
    assert sorted(map(str, dead_ids(queue))) == [ORDER, "refund-1"]
