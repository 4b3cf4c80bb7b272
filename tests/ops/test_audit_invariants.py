"""Each audit invariant exactly as the operator reads it: the row's name, PASS or FAIL, every
offending id, and the one-line detail (what broke, how many, the first ids). ``python -m ops
audit`` prints these rows and the demo matches its rows to the tool's by name, so a renamed
invariant, a lost or misspelt detail, or an offending id dropped is a broken report.

Documents are the consumer's own (``build_documents``), dead letters as the port describes
them. What each test kills (``make mutation``, ``ops.audit``): every literal of the names and
details, each selection of offending ids, the bound on the ids shown, the Service Bus reasons,
the reading of a delivered event's body, the live audit's merge of window and stuck documents.

Found by it: ``OrphanedDocument``, a reason the consumer itself dead-letters with
(shared/consumer/core.py), was unknown to the audit, so one orphaned order made "every dead
letter with its reason" FAIL (``test_every_reason_service_bus_or_the_consumer_gives_is_known``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ops.audit import (
    MARKERS_OF_ORDERS,
    NO_EVENT_FOR_REJECTED,
    ONE_EVENT_PER_ORDER,
    ONE_ORDER_PER_ID,
    AuditData,
    Invariant,
    SeenEvent,
    audit,
    dead_lettered_as,
    every_dead_letter_has_a_reason,
    markers_of_orders,
    no_dead_letter_for,
    no_event_for_rejected,
    no_order_lost,
    nothing_pending,
    one_event_per_accepted_order,
    one_order_per_id,
    orders_are_the_requests,
)
from ops.sample_orders import amended_body, cancelled_body, order_body
from tests.ops.audit_data import NOW, accepted, letter, lifecycle, of_type, seen_event, seen_events

# ---- 1. one order per id --------------------------------------------------------------------


def test_one_order_per_id_passes_with_the_count_and_names_each_kind_of_break() -> None:
    a, _ = accepted("ord-a")
    b, _ = accepted("ord-b")
    assert one_order_per_id([a, b]) == Invariant(
        "one order document per valid order id", True, [], "2 orders"
    )

    twice = {**a, "id": "ord-a-copy", "messageId": "ord-a-copy"}
    moved = {**b, "id": "ord-x"}
    unhashed = {**accepted("ord-c")[0], "requestHash": ""}
    unknown = {**accepted("ord-d")[0], "hashAlgorithm": "md5"}
    assert one_order_per_id([a, twice, moved, unhashed, unknown]) == Invariant(
        "one order document per valid order id",
        False,
        ["ord-a", "ord-b", "ord-c", "ord-d"],
        "1 stored twice ['ord-a']; 2 whose id, orderId and MessageId differ ['ord-a', 'ord-b']"
        "; 2 without a known fingerprint ['ord-c', 'ord-d']",
    )


def test_an_order_without_its_message_id_breaks_the_id_rule() -> None:
    a, _ = accepted("ord-a")
    result = one_order_per_id([{**a, "messageId": None}])
    assert (result.passed, result.offending) == (False, ["ord-a"])


def test_more_than_five_offending_ids_are_shown_as_five_and_a_count() -> None:
    orders = [{**accepted(f"ord-{i}")[0], "requestHash": None} for i in range(7)]
    result = one_order_per_id(orders)
    assert result.offending == [f"ord-{i}" for i in range(7)]  # all of them, always
    assert result.detail == (
        "7 without a known fingerprint ['ord-0', 'ord-1', 'ord-2', 'ord-3', 'ord-4'] (+2 more)"
    )
    exactly_five = one_order_per_id(orders[:5])
    assert exactly_five.detail == (
        "5 without a known fingerprint ['ord-0', 'ord-1', 'ord-2', 'ord-3', 'ord-4']"
    )


# ---- the demo's expectations ----------------------------------------------------------------


def test_no_order_lost_names_the_missing_ones() -> None:
    a, _ = accepted("ord-a")
    assert no_order_lost([a], ["ord-a"]) == Invariant(
        "no valid order lost", True, [], "none missing"
    )
    assert no_order_lost([a], ["ord-a", "ord-z", "ord-y"]) == Invariant(
        "no valid order lost", False, ["ord-y", "ord-z"], "2 missing ['ord-y', 'ord-z']"
    )


def test_orders_are_the_requests_names_a_different_and_an_unexpected_order() -> None:
    a, _ = accepted("ord-a")
    b, _ = accepted("ord-b")
    hashes = {"ord-a": a["requestHash"], "ord-b": b["requestHash"]}
    assert orders_are_the_requests([a, b], hashes) == Invariant(
        "every stored order is the original request", True, [], "2 orders"
    )
    c, _ = accepted("ord-c")
    assert orders_are_the_requests([a, b, c], {**hashes, "ord-b": "sha256:other"}) == (
        Invariant(
            "every stored order is the original request",
            False,
            ["ord-b", "ord-c"],
            "1 differ ['ord-b']; 1 unexpected ['ord-c']",
        )
    )


def test_dead_lettered_as_counts_each_expected_reason_exactly() -> None:
    letters = [letter("m1", "InvalidPayload"), letter(None, "InvalidPayload", 2)]
    expected = [("m1", "InvalidPayload"), (None, "InvalidPayload")]
    assert dead_lettered_as(letters, expected, "poison dead-lettered") == Invariant(
        "poison dead-lettered", True, [], "2 expected, 2 found"
    )
    assert dead_lettered_as(letters[:1], expected, "poison dead-lettered") == Invariant(
        "poison dead-lettered",
        False,
        ["(no MessageId)"],
        "1 not dead-lettered exactly with their reasons ['(no MessageId)']",
    )
    twice = [*letters, letter("m1", "InvalidPayload", 3)]
    assert dead_lettered_as(twice, expected, "x").offending == ["m1"]


def test_no_dead_letter_for_a_valid_order_except_with_an_allowed_reason() -> None:
    letters = [letter("ord-a", "HashMismatch"), letter("ord-b", "MaxDeliveryCountExceeded", 2)]
    assert no_dead_letter_for(letters, ["ord-c"]) == Invariant(
        "no valid order dead-lettered", True, [], "none"
    )
    assert no_dead_letter_for(letters, ["ord-a", "ord-b"], ["HashMismatch"]) == Invariant(
        "no valid order dead-lettered",
        False,
        ["ord-b (MaxDeliveryCountExceeded)"],
        "1 dead-lettered ['ord-b (MaxDeliveryCountExceeded)']",
    )


# ---- 2. one OrderAccepted per accepted order ------------------------------------------------


def test_one_event_per_order_from_the_outbox_alone() -> None:
    a, a_event = accepted("ord-a")
    b, _ = accepted("ord-b")
    misplaced = {**accepted("ord-c")[1], "id": "ord-c:Other"}
    c = accepted("ord-c")[0]
    assert one_event_per_accepted_order([a], [a_event]) == Invariant(
        "exactly one event per applied version, in increasing versions",
        True,
        [],
        "1 orders, 1 outbox events",
    )
    assert one_event_per_accepted_order([a, b, c], [a_event, misplaced]) == Invariant(
        "exactly one event per applied version, in increasing versions",
        False,
        ["ord-b", "ord-c"],
        "2 without the outbox event of its current version ['ord-b', 'ord-c']",
    )
    # An untyped document under the order's outbox id counts; an order typed one does not.
    assert one_event_per_accepted_order([a], [{**a_event, "type": "order"}]).offending == ["ord-a"]
    untyped = {k: v for k, v in a_event.items() if k != "type"}
    assert one_event_per_accepted_order([a], [untyped]).passed


def test_one_event_per_order_with_what_the_subscription_delivered() -> None:
    a, a_event = accepted("ord-a")
    b, b_event = accepted("ord-b")
    c, c_event = accepted("ord-c")
    outbox = [a_event, b_event, c_event]
    events = [seen_event(a), seen_event(b), seen_event(b), SeenEvent("stray", "ord-z")]
    assert one_event_per_accepted_order([a, b, c], outbox, events) == Invariant(
        "exactly one event per applied version, in increasing versions",
        False,
        ["ord-b", "ord-c"],
        "1 without a delivered event of its current version ['ord-c']; "
        "1 delivered twice or more ['ord-b']",
    )
    assert one_event_per_accepted_order([a], [a_event], [seen_event(a)]) == Invariant(
        "exactly one event per applied version, in increasing versions",
        True,
        [],
        "1 orders, 1 outbox events, 1 delivered",
    )


def test_an_event_pending_within_the_grace_is_not_missing_from_the_subscription() -> None:
    """The relay has yet to publish it; past the grace, or dispatched, or parked, it is missing.
    The outbox event itself has no grace: it is written with its order."""
    a, a_event = accepted("ord-a")  # createdAt NOW, pending
    b, b_event = accepted("ord-b")
    b_event = {**b_event, "status": "dispatched"}
    c, c_event = accepted("ord-c")
    c_event = {**c_event, "status": "parked"}
    d, d_event = accepted("ord-d")  # pending, and already delivered (its patch not yet made)
    grace = timedelta(minutes=5)
    orders, outbox = [a, b, c, d], [a_event, b_event, c_event, d_event]

    assert one_event_per_accepted_order(
        orders, outbox, [seen_event(d)], now=NOW + grace, grace=grace
    ) == Invariant(
        "exactly one event per applied version, in increasing versions",
        False,
        ["ord-b", "ord-c"],
        "2 without a delivered event of its current version ['ord-b', 'ord-c']",
    )
    assert one_event_per_accepted_order(
        [a, d], [a_event, d_event], [seen_event(d)], now=NOW + grace, grace=grace
    ) == Invariant(
        "exactly one event per applied version, in increasing versions",
        True,
        [],
        "2 orders, 2 outbox events, 1 delivered, 1 pending within 0:05:00",
    )
    late = NOW + grace + timedelta(seconds=1)
    assert one_event_per_accepted_order([a], [a_event], [], now=late, grace=grace).offending == [
        "ord-a"
    ]
    assert one_event_per_accepted_order([a], [a_event], [], now=NOW).offending == ["ord-a"]
    assert one_event_per_accepted_order([a], [a_event], []).offending == ["ord-a"]  # no clock
    assert one_event_per_accepted_order([a], [], [], now=NOW, grace=grace).offending == ["ord-a"]


# ---- 3. none for a rejected request ---------------------------------------------------------


def test_no_event_for_a_rejected_request() -> None:
    a, a_event = accepted("ord-a")
    _, orphan = accepted("ord-r")
    assert no_event_for_rejected([a], [a_event]) == Invariant(
        "no event for a rejected message or above its order's version", True, [], "none"
    )
    assert no_event_for_rejected([a], [a_event, orphan]) == Invariant(
        "no event for a rejected message or above its order's version",
        False,
        ["ord-r"],
        "1 outbox events without an order ['ord-r']",
    )
    # An order outside the window, read by id, is an order.
    assert no_event_for_rejected([a], [orphan], referenced={"ord-r": accepted("ord-r")[0]}).passed


def test_no_delivered_event_without_its_order_or_other_than_it() -> None:
    a, a_event = accepted("ord-a")
    b, b_event = accepted("ord-b")
    events = [
        seen_event(a),
        seen_event(b, total_minor=1),
        seen_event(a, customer_id="someone-else"),
        SeenEvent("msg-9", None),
        SeenEvent("msg-8", "ord-z"),
    ]
    assert no_event_for_rejected([a, b], [a_event, b_event], events) == Invariant(
        "no event for a rejected message or above its order's version",
        False,
        ["msg-9", "ord-a", "ord-b", "ord-z"],
        "2 delivered events for no stored order ['msg-9', 'ord-z']; "
        "2 delivered events that are not the stored order ['ord-a', 'ord-b']",
    )
    assert no_event_for_rejected([a, b], [a_event, b_event], [seen_event(a), seen_event(b)]).passed


# ---- 4. nothing pending ---------------------------------------------------------------------


def test_nothing_parked_and_nothing_pending_past_the_grace() -> None:
    _, fresh = accepted("ord-f")  # createdAt NOW
    _, old = accepted("ord-o")
    old = {**old, "createdAt": "2026-11-29T11:00:00.000000Z"}
    _, parked = accepted("ord-p")
    parked = {**parked, "status": "parked"}
    _, done = accepted("ord-d")
    done = {**done, "status": "dispatched"}
    _, unreadable = accepted("ord-u")
    unreadable = {**unreadable, "createdAt": "yesterday"}
    now = NOW + timedelta(minutes=10)
    grace = timedelta(minutes=30)

    assert nothing_pending([fresh, done], now=now, grace=grace) == Invariant(
        "no outbox event left pending or parked", True, [], "none"
    )
    assert nothing_pending([fresh, old, parked, done, unreadable], now=now, grace=grace) == (
        Invariant(
            "no outbox event left pending or parked",
            False,
            ["ord-o", "ord-p", "ord-u"],
            "1 parked ['ord-p']; 2 pending longer than 0:30:00 ['ord-o', 'ord-u']",
        )
    )
    # Exactly the grace is not longer than it; without a grace, anything pending is left.
    assert nothing_pending([fresh], now=NOW + grace, grace=grace).passed
    assert nothing_pending([fresh], now=NOW, grace=timedelta(0)).offending == ["ord-f"]
    assert nothing_pending([fresh], now=NOW).detail == "1 pending longer than 0:00:00 ['ord-f']"


# ---- 5. every dead letter with its reason ---------------------------------------------------


@pytest.mark.parametrize(
    "reason",
    [
        "MaxDeliveryCountExceeded",
        "TTLExpiredException",
        "HeaderSizeExceeded",
        "Session ID is null",
        "MaxTransferHopCountExceeded",
        "InvalidPayload",
        "HashMismatch",
        "OrphanedDocument",
    ],
)
def test_every_reason_service_bus_or_the_consumer_gives_is_known(reason: str) -> None:
    assert every_dead_letter_has_a_reason([letter("m", reason)]) == Invariant(
        "every dead letter with its reason", True, [], f"1 dead letters: 1 {reason}"
    )


def test_a_dead_letter_without_a_known_reason_is_named_with_its_sequence_number() -> None:
    letters = [
        letter("m1", "InvalidPayload"),
        letter("m2", "", 2),
        letter("m3", "InvalidPayload", 3),
        letter(None, "Whatever", 4),
    ]
    assert every_dead_letter_has_a_reason(letters) == Invariant(
        "every dead letter with its reason",
        False,
        ["None#4", "m2#2"],
        "2 without a known reason ['None#4', 'm2#2']",
    )
    assert every_dead_letter_has_a_reason([]) == Invariant(
        "every dead letter with its reason", True, [], "0 dead letters: none"
    )
    assert every_dead_letter_has_a_reason(letters[:1] + letters[2:3]).detail == (
        "2 dead letters: 2 InvalidPayload"
    )
    assert (
        every_dead_letter_has_a_reason(
            [letter("a", "B"), letter("b", "A", 2)], known={"A", "B"}
        ).detail
        == "2 dead letters: 1 A, 1 B"
    )


# ---- what a subscription holds --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'{"payload": {"orderId": "ord-a", "totalMinor": 5, "customerId": "c-1"}}',
            SeenEvent("m", "ord-a", 5, "c-1"),
        ),
        (b'{"payload": {"orderId": 7, "totalMinor": 5}}', SeenEvent("m", None, 5, None)),
        (b'{"payload": [1, 2]}', SeenEvent("m", None, None, None)),
        (b'{"eventId": "x"}', SeenEvent("m", None, None, None)),
        (b"[1, 2]", SeenEvent("m", None, None, None)),
        (b"not json", SeenEvent("m", None, None, None)),
    ],
)
def test_a_delivered_event_is_read_from_its_body_whatever_it_holds(
    body: bytes, expected: SeenEvent
) -> None:
    assert SeenEvent.from_body("m", body) == expected


# ---- the live audit -------------------------------------------------------------------------


def test_the_live_audit_checks_the_six_and_counts_a_stuck_document_once() -> None:
    a, a_event = accepted("ord-a")
    a_event = {**a_event, "status": "dispatched"}
    _, old_parked = accepted("ord-p")
    old_parked = {**old_parked, "status": "parked"}
    data = AuditData(
        orders=[a],
        outbox=[a_event, old_parked],
        stuck=[old_parked],  # in the window and stuck: one document
        referenced={"ord-p": accepted("ord-p")[0]},
        dead_letters=[letter("m", "InvalidPayload")],
        events=[seen_event(a)],
    )

    rows = audit(data, now=NOW + timedelta(hours=1), pending_grace=timedelta(minutes=5))

    assert [(row.name, row.verdict, row.offending) for row in rows] == [
        ("one order document per valid order id", "PASS", []),
        ("exactly one event per applied version, in increasing versions", "PASS", []),
        ("no event for a rejected message or above its order's version", "PASS", []),
        ("every inbox marker of a stored order, processed or stale, at or below it", "PASS", []),
        ("no outbox event left pending or parked", "FAIL", ["ord-p"]),
        ("every dead letter with its reason", "PASS", []),
    ]
    assert rows[4].detail == "1 parked ['ord-p']"
    assert rows[1].detail == "1 orders, 2 outbox events, 1 delivered"


def test_the_live_audit_gives_the_delivery_check_the_pending_grace() -> None:
    a, a_event = accepted("ord-a")  # pending since NOW, not delivered yet
    data = AuditData(
        orders=[a],
        outbox=[a_event],
        stuck=[a_event],
        referenced={},
        dead_letters=[],
        events=[],
    )
    grace = timedelta(minutes=5)

    young = audit(data, now=NOW + grace, pending_grace=grace)
    old = audit(data, now=NOW + grace + timedelta(seconds=1), pending_grace=grace)

    assert [row.verdict for row in young] == ["PASS"] * 6
    assert [(row.verdict, row.offending) for row in old][1:5] == [
        ("FAIL", ["ord-a"]),
        ("PASS", []),
        ("PASS", []),
        ("FAIL", ["ord-a"]),
    ]


# ---- the lifecycle: several events per order, orders created by a change, markers ----------


def lifecycles() -> list[dict[str, Any]]:
    """ord-l placed, amended, cancelled, and its amendment retried under a new MessageId
    (stale); ord-m created by its amendment at version 3, its OrderPlaced late (stale). Every
    event dispatched."""
    documents = lifecycle(
        (None, order_body("ord-l"), "ord-l"),
        ("OrderAmended", amended_body("ord-l", 2), "ord-l:v2"),
        ("OrderCancelled", cancelled_body("ord-l", 3), "ord-l:v3"),
        ("OrderAmended", amended_body("ord-l", 2), "ord-l:v2:retry"),
        ("OrderAmended", amended_body("ord-m", 3), "ord-m:v3"),
        (None, order_body("ord-m"), "ord-m"),
    )
    return [{**d, "status": "dispatched"} if d["type"] == "outbox" else d for d in documents]


def lifecycle_audit(
    documents: list[dict[str, Any]], events: list[SeenEvent] | None = None
) -> dict[str, Invariant]:
    data = AuditData(
        orders=of_type(documents, "order"),
        outbox=of_type(documents, "outbox"),
        stuck=[],
        referenced={},
        dead_letters=[],
        events=seen_events(documents) if events is None else events,
        markers=of_type(documents, "inbox"),
    )
    return {
        i.name: i for i in audit(data, now=NOW + timedelta(hours=1), pending_grace=timedelta(0))
    }


def failing(checked: dict[str, Invariant]) -> dict[str, list[str]]:
    return {name: i.offending for name, i in checked.items() if not i.passed}


def test_healthy_lifecycles_pass_every_invariant() -> None:
    documents = lifecycles()
    assert [d["orderVersion"] for d in of_type(documents, "order")] == [3, 3]
    assert sorted(m["outcome"] for m in of_type(documents, "inbox")) == [
        "processed",
        "processed",
        "processed",
        "stale",
        "stale",
    ]

    checked = lifecycle_audit(documents)

    assert failing(checked) == {}
    assert checked[ONE_ORDER_PER_ID].detail == "2 orders, 1 created by a change"
    assert checked[ONE_EVENT_PER_ORDER].detail == "2 orders, 4 outbox events, 4 delivered"
    assert checked[MARKERS_OF_ORDERS].detail == "5 markers: 3 processed, 2 stale"


def _edit(documents: list[dict[str, Any]], doc_id: str, **changes: Any) -> list[dict[str, Any]]:
    return [{**d, **changes} if d["id"] == doc_id else d for d in documents]


def test_an_order_created_by_a_change_needs_a_known_change_above_version_1() -> None:
    for changes in ({"createdBy": "OrderPlaced"}, {"orderVersion": 1}):
        documents = _edit(lifecycles(), "ord-m", **changes)
        assert failing(lifecycle_audit(documents)).get(ONE_ORDER_PER_ID) == ["ord-m"]
    # A placed order still needs its fingerprint, amended or not.
    documents = _edit(lifecycles(), "ord-l", requestHash=None)
    assert failing(lifecycle_audit(documents)) == {ONE_ORDER_PER_ID: ["ord-l"]}


def test_each_version_one_outbox_event_created_in_order_the_current_among_them() -> None:
    documents = lifecycles()
    lost_current = [d for d in documents if d["id"] != "ord-l:v3"]
    assert failing(lifecycle_audit(lost_current, seen_events(documents))) == {
        ONE_EVENT_PER_ORDER: ["ord-l"]
    }
    # v3's event created an hour before v2's: out of version order.
    v2 = next(d for d in documents if d["id"] == "ord-l:v2")
    earlier = (NOW - timedelta(hours=1)).isoformat()
    assert v2["createdAt"] > earlier
    backwards = _edit(documents, "ord-l:v3", createdAt=earlier)
    assert failing(lifecycle_audit(backwards)) == {ONE_EVENT_PER_ORDER: ["ord-l"]}
    # Within the tolerance (the instances' clocks), not.
    assert not failing(lifecycle_audit(_edit(documents, "ord-l:v3", createdAt=v2["createdAt"])))


def test_delivered_events_of_each_order_in_increasing_versions_the_current_among_them() -> None:
    documents = lifecycles()
    events = seen_events(documents)  # l v1, l v2, l v3 and m v3, in version order
    l1, l2, l3 = (e for e in events if e.order_id == "ord-l")
    m3 = next(e for e in events if e.order_id == "ord-m")
    broken = {
        "out of order": [l1, l3, l2, m3],
        "the current one missing": [l1, l2, m3],
        "one twice": [l1, l2, l2, l3, m3],
    }
    for what, delivered in broken.items():
        assert failing(lifecycle_audit(documents, delivered)) == {ONE_EVENT_PER_ORDER: ["ord-l"]}, (
            what
        )
    # Earlier versions may be gone from the subscription (its TTL): the current one suffices.
    assert not failing(lifecycle_audit(documents, [l3, m3]))


def test_no_event_above_its_orders_version_or_of_a_type_its_order_contradicts() -> None:
    documents = lifecycles()
    [m_event] = [d for d in documents if d["id"] == "ord-m:v3"]
    l_cancel = next(d for d in documents if d["id"] == "ord-l:v3")
    l_accept = next(d for d in documents if d["id"] == "ord-l:OrderAccepted")
    outbox_breaks = {
        "an event above its order's version": {
            **m_event,
            "id": "ord-m:v4",
            "payload": {**m_event["payload"], "orderVersion": 4},
        },
        "an OrderAccepted for an order a change created": {
            **l_accept,
            "id": "ord-m:OrderAccepted",
            "orderId": "ord-m",
            "payload": {**l_accept["payload"], "orderId": "ord-m"},
        },
    }
    for what, extra in outbox_breaks.items():
        checked = lifecycle_audit([*documents, extra], seen_events(documents))
        assert failing(checked) == {NO_EVENT_FOR_REJECTED: ["ord-m"]}, what
    # A cancellation that is not the order's last: the order back at accepted.
    uncancelled = _edit(documents, "ord-l", status="accepted")
    assert NO_EVENT_FOR_REJECTED in failing(lifecycle_audit(uncancelled, []))
    assert l_cancel["eventType"] == "OrderCancelled"


def test_no_delivered_event_above_its_orders_version_or_other_than_its_current_state() -> None:
    documents = lifecycles()
    events = seen_events(documents)
    l1, l2, l3, m3 = events
    assert (l3.event_type, m3.event_type) == ("OrderCancelled", "OrderAmended")
    above = SeenEvent("x", "ord-m", m3.total_minor, m3.customer_id, 4, "OrderAmended")
    other_total = SeenEvent("y", "ord-m", 1, m3.customer_id, 3, "OrderAmended")
    amended_not_cancelled = SeenEvent(
        "z", "ord-l", l2.total_minor, l2.customer_id, 3, "OrderAmended"
    )
    for delivered in (
        [l1, l2, l3, m3, above],
        [l1, l2, l3, other_total],
        [l1, l2, amended_not_cancelled, m3],
    ):
        assert NO_EVENT_FOR_REJECTED in failing(lifecycle_audit(documents, delivered))


def test_every_marker_of_a_stored_order_processed_or_stale_at_or_below_it() -> None:
    documents = lifecycles()
    orders = of_type(documents, "order")
    markers = of_type(documents, "inbox")
    assert markers_of_orders(markers, orders).passed
    stale = next(m for m in markers if m["outcome"] == "stale" and m["orderId"] == "ord-l")
    broken = {
        "another outcome": {**stale, "outcome": "duplicate"},
        "above its order": {**stale, "orderVersion": 4},
        "without a version": {**stale, "orderVersion": None},
        "of no stored order": {**stale, "orderId": "ord-z"},
    }
    for what, marker in broken.items():
        checked = markers_of_orders([*markers, marker], orders)
        expected = f"{marker['orderId']}/ord-l:v2:retry"
        assert (checked.passed, checked.offending) == (False, [expected]), what
    # A marker of an order outside the window, read by id, belongs to it.
    outside = {"ord-l": next(d for d in orders if d["id"] == "ord-l")}
    assert markers_of_orders(markers, [o for o in orders if o["id"] != "ord-l"], outside).passed
