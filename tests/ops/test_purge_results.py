"""What ``python -m ops purge`` reports for each dead letter, as the operator reads it (``--json``):
the verdict and its detail for a dry run, a removal that fails, a dead letter the scan never
receives and a scan that stops. Through the real azure-servicebus receiver over the local broker
(``local.assembly.dead_letter_queue``), as ``tests/ops/test_dead_letter_scan.py`` does.

Each test fails with one of ``ops.resubmit.purge``'s result lines changed (the verdict, the
detail or the letter it names): mutation testing found no test reading them.
"""

from __future__ import annotations

from datetime import timedelta

from azure.servicebus._pyamqp.error import ErrorCondition, MessageException

from local.standins.broker import ManualClock, PeekLockQueue, SubQueue
from local.standins.servicebus_link import LocalNamespace
from tests.ops.test_dead_letter_scan import OUTAGE, broker, clock, dead_ids, orders, tool

__all__ = ["broker", "clock"]  # the fixtures, shared with the scan's tests

PURGE = ("purge", "--reason", OUTAGE, "--older-than", "0m", "--yes", "--json")
NOT_RECEIVED = (
    "not received by the scan (no more dead letters to receive: it is locked by another "
    "receiver, or was removed meanwhile); nothing was done to it"
)


def rows(report: object) -> dict[str, tuple[str, str]]:
    assert isinstance(report, dict)
    return {row["messageId"]: (row["verdict"], row["detail"]) for row in report["results"]}


def test_a_dry_run_names_each_dead_letter_it_would_remove_and_removes_none(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    orders(broker, 3)
    clock.advance(timedelta(minutes=1))

    code, report = tool(broker, *PURGE, "--dry-run")

    assert code == 0
    assert rows(report) == dict.fromkeys(
        ["ord-00000", "ord-00001", "ord-00002"], ("would-remove", "would remove")
    )
    assert dead_ids(broker) == ["ord-00000", "ord-00001", "ord-00002"]


def test_a_refused_removal_says_why_stops_the_scan_and_every_letter_is_still_reported(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Found by this test: a refused complete (the role removed mid-purge) made the SDK close its
    handler, the next complete raised ValueError, and the tool ended with ``error:`` and no
    report of the removals already made. Fails with ``ops/servicebus.py``'s scan not stopping
    after a failed removal."""
    orders(broker, 3)
    clock.advance(timedelta(minutes=1))
    completes = {"seen": 0}

    def refuse_the_second_complete(operation: str) -> None:
        if operation.lower() == "settle:accepted":
            completes["seen"] += 1
            if completes["seen"] == 2:
                raise MessageException(ErrorCondition.UnauthorizedAccess, description="revoked")

    namespace = LocalNamespace(
        {"orders": broker}, before_operation=refuse_the_second_complete, client_clock=clock
    )

    code, report = tool(broker, *PURGE, namespace=namespace)

    assert code == 1
    results = rows(report)
    assert results["ord-00000"] == ("removed", "removed for good")
    verdict, detail = results["ord-00001"]
    assert verdict == "failed"
    assert detail.startswith("not removed: ") and "revoked" in detail
    # The SDK closed its handler on the refusal: the scan stops there and says so.
    verdict, detail = results["ord-00002"]
    assert verdict == "not-received"
    assert detail.startswith("not received by the scan (a removal failed (") and "revoked" in detail
    assert dead_ids(broker) == ["ord-00001", "ord-00002"]


def test_a_dead_letter_another_receiver_holds_is_reported_not_received_with_why(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    orders(broker, 2)
    clock.advance(timedelta(minutes=1))
    [other] = broker.receive(1, SubQueue.DEAD_LETTER)  # another operator's receiver holds it

    code, report = tool(broker, *PURGE)

    assert code == 1
    assert rows(report) == {
        "ord-00000": ("not-received", NOT_RECEIVED),
        "ord-00001": ("removed", "removed for good"),
    }
    broker.abandon(other.lock_token)
    assert dead_ids(broker) == ["ord-00000"]
