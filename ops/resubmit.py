"""What the tool decides: which dead letters to resubmit, hold, refuse or purge, and the
field-by-field diff of a ``HashMismatch``. Pure over the ports; it never invents a MessageId.

Resubmitting is where orders get lost, two ways, and both are silent on the broker's side:

- the queue has duplicate detection: a copy sent with the original MessageId while that id is
  still in the detection history (``duplicateDetectionHistoryTimeWindow``, one day, from the
  original's enqueue time) is accepted by ``send`` and dropped. So inside the window the tool
  HOLDS (sends nothing) unless ``--inside-window`` is given, and in every case it removes a dead
  letter only after VERIFYING the copy: its MessageId is on the queue (peek) or its order is
  stored with the same fingerprint (Cosmos DB). A dropped copy leaves the dead letter in place,
  reported as ``dropped``.
- the consumer requires MessageId = orderId: a copy under any other MessageId is dead-lettered
  as ``MessageIdMismatch``. The tool copies the MessageId as is and REFUSES a dead letter whose
  MessageId is missing or differs from its body's orderId (the producer must send it anew).

Send first, remove second: a crash in between leaves the dead letter AND the copy. The next run
finds the copy on the queue (or its order stored) and only removes the dead letter; if it sends
again, the broker drops that copy or the consumer completes it as a duplicate. Never two orders.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ops.port import DeadLetter, DeadLetterQueue, OrderLookup
from shared.contract import CONTRACT_FIELDS, FINGERPRINT_ALGORITHMS, InvalidMessage, parse_order


class Verdict(enum.StrEnum):
    RESUBMITTED = (
        "resubmitted"  # the copy is verifiably on the queue (or stored); DLQ entry removed
    )
    ALREADY_STORED = "already-stored"  # the order is stored, same fingerprint; DLQ entry removed
    HELD = "held"  # inside the duplicate-detection window: nothing sent, left in the DLQ
    DROPPED = "dropped"  # sent, but neither queued nor stored: the broker dropped it; left in DLQ
    REFUSED = "refused"  # a copy cannot succeed; left in the DLQ
    WOULD_RESUBMIT = "would-resubmit"  # --dry-run
    WOULD_REMOVE = "would-remove"  # --dry-run, the order is already stored


@dataclass(frozen=True)
class Result:
    letter: DeadLetter
    verdict: Verdict
    detail: str


def select(
    letters: Sequence[DeadLetter], message_ids: Iterable[str] = (), reason: str | None = None
) -> tuple[list[DeadLetter], list[str]]:
    """The dead letters named by MessageId and/or by reason; and the ids not found."""
    wanted = set(message_ids)
    chosen = [
        letter
        for letter in letters
        if (letter.message_id in wanted) or (reason is not None and letter.reason == reason)
    ]
    missing = sorted(wanted - {letter.message_id for letter in chosen if letter.message_id})
    return chosen, missing


def body_order_id(body: bytes) -> str | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    order_id = document.get("orderId") if isinstance(document, dict) else None
    return order_id if isinstance(order_id, str) else None


def _same_as_stored(letter: DeadLetter, stored: dict[str, Any]) -> bool | None:
    """Whether the dead letter's fingerprint equals the stored order's (None: cannot tell)."""
    fingerprint = FINGERPRINT_ALGORITHMS.get(str(stored.get("hashAlgorithm")))
    try:
        valid = parse_order(letter.body, letter.message_id)
    except InvalidMessage:
        return None
    if fingerprint is None:
        return None
    return fingerprint(valid.fields) == stored.get("requestHash")


def _stored_state(letter: DeadLetter, order_id: str, orders: OrderLookup | None) -> bool | None:
    """True: stored with this fingerprint; False: stored, different; None: not stored/unknown."""
    if orders is None:
        return None
    stored = orders.stored_order(order_id)
    if stored is None:
        return None
    same = _same_as_stored(letter, stored)
    return False if same is False else (True if same else None)


def resubmit(
    queue: DeadLetterQueue,
    letters: Sequence[DeadLetter],
    *,
    orders: OrderLookup | None,
    dry_run: bool = False,
    inside_window: bool = False,
) -> list[Result]:
    results = []
    window = queue.duplicate_detection_window
    for letter in letters:
        results.append(_resubmit_one(queue, letter, orders, window, dry_run, inside_window))
    return results


def _resubmit_one(
    queue: DeadLetterQueue,
    letter: DeadLetter,
    orders: OrderLookup | None,
    window: timedelta,
    dry_run: bool,
    inside_window: bool,
) -> Result:
    order_id = body_order_id(letter.body)
    if not letter.message_id:
        return Result(letter, Verdict.REFUSED, "no MessageId: the producer must send it anew")
    if order_id != letter.message_id:
        return Result(
            letter,
            Verdict.REFUSED,
            f"MessageId {letter.message_id!r} is not the body's orderId {order_id!r}: a copy "
            "would be dead-lettered as MessageIdMismatch again; the producer must send it anew",
        )
    stored = _stored_state(letter, order_id, orders)
    if stored is False:
        return Result(
            letter,
            Verdict.REFUSED,
            f"order {order_id} is stored with a different fingerprint: a copy would be "
            "dead-lettered as HashMismatch again (see `show`)",
        )
    if stored is True:
        if dry_run:
            return Result(letter, Verdict.WOULD_REMOVE, "order already stored: would remove")
        queue.remove([letter.sequence_number])
        return Result(letter, Verdict.ALREADY_STORED, f"order {order_id} is stored: removed")
    window_ends = letter.enqueued_time + window
    inside = queue.now() < window_ends
    if inside and not inside_window:
        return Result(
            letter,
            Verdict.HELD,
            f"inside the duplicate-detection window until {window_ends.isoformat()}: the broker "
            "would silently drop a copy. Resubmit after that time, or pass --inside-window to "
            "send anyway (the dead letter is removed only if the copy is seen)",
        )
    if dry_run:
        return Result(letter, Verdict.WOULD_RESUBMIT, "would send a copy and verify it")
    queue.send_copy(letter)
    if letter.message_id in queue.queued_message_ids() or (
        _stored_state(letter, order_id, orders) is True
    ):
        queue.remove([letter.sequence_number])
        return Result(letter, Verdict.RESUBMITTED, "copy seen on the queue: dead letter removed")
    if orders is None:
        why = (
            "not seen on the queue: dropped as a duplicate, or already consumed (give the "
            "Cosmos DB endpoint to check the stored order). The dead letter stays"
        )
    else:
        why = (
            "sent, but the copy is neither on the queue nor stored: the broker dropped it as "
            "a duplicate. The dead letter stays; resubmit after the window"
        )
    return Result(letter, Verdict.DROPPED, why)


def purge_candidates(
    letters: Sequence[DeadLetter], reason: str, older_than: timedelta, queue: DeadLetterQueue
) -> list[DeadLetter]:
    cutoff = queue.now() - older_than
    return [
        letter for letter in letters if letter.reason == reason and letter.enqueued_time < cutoff
    ]


def field_diff(letter: DeadLetter, stored: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, in the dead letter, in the stored order) for each contract field that differs;
    order lines compared line by line and field by field."""
    try:
        incoming = parse_order(letter.body, letter.message_id).fields
    except InvalidMessage as error:
        return [("(body)", f"not a valid order: {error}", None)]
    differences: list[tuple[str, Any, Any]] = []
    for name in CONTRACT_FIELDS:
        mine, theirs = incoming.get(name), stored.get(name)
        if name == "lines" and isinstance(mine, list) and isinstance(theirs, list):
            for index in range(max(len(mine), len(theirs))):
                line = mine[index] if index < len(mine) else {}
                other = theirs[index] if index < len(theirs) else {}
                for key in sorted(set(line) | set(other)):
                    if line.get(key) != other.get(key):
                        differences.append((f"lines[{index}].{key}", line.get(key), other.get(key)))
        elif mine != theirs:
            differences.append((name, mine, theirs))
    return differences
