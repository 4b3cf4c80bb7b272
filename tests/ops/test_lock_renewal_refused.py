"""A lock renewal the broker refuses, mid-scan: ``resubmit`` and ``purge`` stop the scan there and
report every dead letter with its true verdict, checked against the broker's own state (what is
still dead-lettered, which copies are on the queue). Through the real azure-servicebus receiver
over the local broker (``local.assembly.dead_letter_queue``), faults raised at the SDK's link
(``LocalNamespace.before_operation``), as ``tests/ops/test_purge_results.py`` does.

Found by these tests: ``_renew_due`` caught only ``MessageLockLostError``; any other refusal
escaped the scan, and the tool ended with ``error:`` and exit 2 while copies had been sent and
dead letters removed, none of it reported. Each test fails with ``ops/servicebus.py``'s
``_renew_due`` catching only ``MessageLockLostError`` again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusReceiver
from azure.servicebus._pyamqp.error import ErrorCondition, MessageException

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.servicebus_link import LocalNamespace
from ops.cli import main
from tests.ops.test_dead_letter_scan import (
    OUTAGE,
    WINDOW,
    broker,
    clock,
    dead_ids,
    orders,
    queued_ids,
)

__all__ = ["broker", "clock"]  # the fixtures, shared with the scan's tests

RENEW = "mgmt:com.microsoft:renew-lock"
HELD_REASON = "UnsupportedSchemaVersion"  # passed over, so held (and renewed) by the scan
# The scenario (batches of 100, every other dead letter wanted, a send that outlasts half a
# lock): batch 1's 100 locks are renewals 1-100, batch 2's decision renews 101-250 before its
# removals. Refusing the 120th: batch 1's 50 resubmitted, batch 2's 50 copies sent and verified
# but their dead letters not removed, the last 100 wanted never received.
REFUSED_RENEWAL = 120


def _dead_letters(broker: PeekLockQueue) -> None:
    orders(broker, 400, lambda index: OUTAGE if index % 2 == 0 else HELD_REASON)


def _refuse(error: Callable[[], BaseException]) -> Callable[[int, LocalDeadLetterQueue], None]:
    """Every renewal from the ``REFUSED_RENEWAL``-th on refused: the SDK's retries (of a
    condition it retries) are refused too."""

    def refuse(renewal: int, _queue: LocalDeadLetterQueue) -> None:
        if renewal >= REFUSED_RENEWAL:
            raise error()

    return refuse


def _close_the_handler(renewal: int, queue: LocalDeadLetterQueue) -> None:
    """What the SDK does to the scan's receiver on an error it does not retry
    (``_close_handler``, azure/servicebus/_base_handler.py:353): this renewal goes through, the
    next one meets the closed handler and raises ``ValueError`` (receiver_mixins.py:97)."""
    if renewal != REFUSED_RENEWAL:
        return
    # The client's receivers (the SDK's own registry, _servicebus_client.py:376): the scan's, and
    # the peekers, which reopen on their next peek (a management request opens its handler).
    for handler in list(queue._client._handlers):
        if isinstance(handler, ServiceBusReceiver):
            handler._close_handler()  # type: ignore[no-untyped-call]


def _run(
    broker: PeekLockQueue,
    clock: ManualClock,
    *argv: str,
    fault: Callable[[int, LocalDeadLetterQueue], None],
    slow: str,
) -> tuple[int, dict[str, Any]]:
    """The tool over the broker, ``slow`` (an operation) taking 40 s of the clock, past half of
    each lock, and ``fault`` called with the number of each lock renewal."""
    import json
    from io import StringIO

    renewals = {"seen": 0}
    holder: dict[str, LocalDeadLetterQueue] = {}

    def before(operation: str) -> None:
        if operation == slow:
            clock.advance(timedelta(seconds=40))
        if operation == RENEW:
            renewals["seen"] += 1
            fault(renewals["seen"], holder["queue"])

    namespace = LocalNamespace({"orders": broker}, before_operation=before, client_clock=clock)
    queue = holder["queue"] = LocalDeadLetterQueue(broker, namespace, wall_clock=clock)
    out = StringIO()
    try:
        code = main([*argv, "--json"], queue=queue, out=out, confirm=lambda _prompt: True)
    finally:
        queue.close()
    text = out.getvalue()
    assert text.startswith("{"), text  # a report, not "error: ..."
    report: dict[str, Any] = json.loads(text)
    return code, report


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {row["messageId"]: (row["verdict"], row["detail"]) for row in report["results"]}


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        pytest.param(
            # retried by the SDK (3 times, about 11 s of its backoff), then raised
            _refuse(lambda: MessageException(ErrorCondition.InternalError, description="gone")),
            "ServiceBusError",
            id="service-bus-error-after-retries",
        ),
        pytest.param(
            _refuse(
                lambda: MessageException(ErrorCondition.UnauthorizedAccess, description="revoked")
            ),
            "ServiceBusAuthorizationError",
            id="role-revoked",
        ),
        pytest.param(_close_the_handler, "ValueError", id="handler-closed"),
    ],
)
def test_a_refused_renewal_stops_the_resubmit_and_every_letter_has_its_true_verdict(
    broker: PeekLockQueue,
    clock: ManualClock,
    fault: Callable[[int, LocalDeadLetterQueue], None],
    cause: str,
) -> None:
    _dead_letters(broker)
    clock.advance(WINDOW)
    wanted = [f"ord-{index:05d}" for index in range(0, 400, 2)]

    code, report = _run(broker, clock, "resubmit", "--reason", OUTAGE, fault=fault, slow="send")

    assert code == 1  # incomplete: the operator must look
    stopped = report["scan"]["stopped"]
    assert stopped.startswith(f"a lock renewal failed ({cause}: "), stopped
    results = _verdicts(report)
    assert sorted(results) == wanted  # every dead letter asked for, each once
    dead, queued = set(dead_ids(broker)), set(queued_ids(broker))
    for message_id, (verdict, detail) in results.items():
        if verdict == "resubmitted":  # its copy on the queue, its dead letter gone
            assert (message_id in queued, message_id in dead) == (True, False), message_id
        elif verdict == "failed":  # its copy on the queue, its dead letter still there: says so
            assert (message_id in queued, message_id in dead) == (True, True), message_id
            assert detail == (
                "the copy was sent and verified, but the dead letter was not removed: "
                f"{stopped}: it is still in the dead-letter queue; rerun to remove it"
            )
        else:  # nothing done to it
            assert verdict == "not-received", (message_id, verdict)
            assert (message_id in queued, message_id in dead) == (False, True), message_id
            assert detail == f"not received by the scan ({stopped}); nothing was done to it"
    assert Counter(v for v, _ in results.values()) == {
        "resubmitted": 50,
        "failed": 50,
        "not-received": 100,
    }
    assert report["counts"] == {"resubmitted": 50, "failed": 50, "not-received": 100}
    assert len(broker.dead_letters) == 350  # none lost: 50 removed, with their copies sent


def test_a_refused_renewal_stops_the_purge_and_every_letter_has_its_true_verdict(
    broker: PeekLockQueue, clock: ManualClock
) -> None:
    """Each receive takes 40 s, so the held locks are renewed after each: the refusal comes
    after the 3rd receive, before its removals. Removed, not removed, never received: each
    says so."""
    _dead_letters(broker)
    clock.advance(timedelta(minutes=1))
    revoked = _refuse(
        lambda: MessageException(ErrorCondition.UnauthorizedAccess, description="revoked")
    )
    purge = ("purge", "--reason", OUTAGE, "--older-than", "0m", "--yes")

    code, report = _run(broker, clock, *purge, fault=revoked, slow="receive")

    assert code == 1
    stopped = report["scan"]["stopped"]
    assert stopped.startswith("a lock renewal failed (ServiceBusAuthorizationError: "), stopped
    results = _verdicts(report)
    dead = set(dead_ids(broker))
    by_verdict: dict[str, set[str]] = {}
    for message_id, (verdict, _) in results.items():
        by_verdict.setdefault(verdict, set()).add(message_id)
    assert {verdict: len(ids) for verdict, ids in by_verdict.items()} == {
        "removed": 100,
        "failed": 50,
        "not-received": 50,
    }
    assert by_verdict["removed"].isdisjoint(dead)
    assert by_verdict["failed"] | by_verdict["not-received"] <= dead
    details = {verdict: {results[m][1] for m in ids} for verdict, ids in by_verdict.items()}
    assert details == {
        "removed": {"removed for good"},
        "failed": {f"not removed: {stopped}: it is still in the dead-letter queue"},
        "not-received": {f"not received by the scan ({stopped}); nothing was done to it"},
    }
    assert len(broker.dead_letters) == 300
