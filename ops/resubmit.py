"""What the tool decides and does to dead letters: which to resubmit, hold, refuse or purge, and
the field-by-field diff of a ``HashMismatch``. Pure over the ports (``ops.port``); it never
invents a MessageId, and it reports only what the broker confirmed: a dead letter is "removed"
when, and only when, the scan completed it (``ScanResult.removed``).

Resubmitting is where orders get lost, two ways, and both are silent on the broker's side:

- the queue has duplicate detection: a copy sent with the original MessageId while that id is
  still in the detection history (``duplicateDetectionHistoryTimeWindow``, from the original's
  enqueue time) is accepted by ``send`` and dropped. So inside the window the tool HOLDS (sends
  nothing) unless ``--inside-window`` is given, and in every case it removes a dead letter only
  after VERIFYING the copy: its MessageId is on the queue (peek) or its order is stored with the
  same fingerprint (Cosmos DB). A dropped copy leaves the dead letter in place (``dropped``);
- the consumer requires MessageId = orderId: a copy under any other MessageId is dead-lettered
  as ``MessageIdMismatch``. The tool copies the MessageId as is and REFUSES a dead letter whose
  MessageId is missing or differs from its body's orderId, or whose body cannot be read as an
  order at all (the producer must send it anew).

Send first, remove second, under the dead letter's lock: a crash in between leaves the dead
letter AND the copy. The next run finds the order stored (or the copy on the queue) and only
removes the dead letter; if it sends again, the broker drops that copy or the consumer completes
it as a duplicate. Never two orders, never none.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ops.port import DeadLetter, DeadLetterQueue, OrderLookup, ScanResult
from shared.consumer.contract import CONTRACT_FIELDS, FINGERPRINT_ALGORITHMS, parse_order
from shared.kit.errors import InvalidMessage


class Verdict(enum.StrEnum):
    RESUBMITTED = "resubmitted"  # sent, the copy verified, the dead letter removed
    ALREADY_STORED = "already-stored"  # nothing sent: the order is stored; the dead letter removed
    REMOVED = "removed"  # purged
    HELD = "held"  # inside the duplicate-detection window: nothing sent, left in the DLQ
    REFUSED = "refused"  # a copy cannot succeed: nothing sent, left in the DLQ
    DROPPED = "dropped"  # sent, but neither queued nor stored: dropped as a duplicate; left
    DEAD_LETTERED_AGAIN = "dead-lettered-again"  # sent; the consumer dead-lettered the copy
    FAILED = "failed"  # meant to go, not removed (the send or the removal failed)
    NOT_RECEIVED = "not-received"  # meant to go, never received by the scan
    WOULD_RESUBMIT = "would-resubmit"  # --dry-run
    WOULD_REMOVE = "would-remove"  # --dry-run


#: What was asked for and did happen; anything else makes the command exit 1.
DONE = frozenset(
    {
        Verdict.RESUBMITTED,
        Verdict.ALREADY_STORED,
        Verdict.REMOVED,
        Verdict.WOULD_RESUBMIT,
        Verdict.WOULD_REMOVE,
    }
)


@dataclass(frozen=True)
class Result:
    letter: DeadLetter
    verdict: Verdict
    detail: str

    @property
    def done(self) -> bool:
        return self.verdict in DONE


@dataclass(frozen=True)
class Run:
    """The results, one per dead letter asked for, and what the scan did to get them."""

    results: list[Result]
    scan: ScanResult


Progress = Callable[[int], None]


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


def _stored_state(letter: DeadLetter, stored: Mapping[str, dict[str, Any]]) -> bool | None:
    """True: stored with this fingerprint; False: stored, different; None: not stored/unknown."""
    order = stored.get(str(letter.message_id))
    return None if order is None else _same_as_stored(letter, order)


def _stored(orders: OrderLookup | None, letters: Iterable[DeadLetter]) -> dict[str, dict[str, Any]]:
    """The stored orders of these dead letters, in one batched read (none without a lookup)."""
    if orders is None:
        return {}
    return orders.stored_orders({letter.message_id for letter in letters if letter.message_id})


def _precheck(
    letter: DeadLetter,
    stored_orders: Mapping[str, dict[str, Any]],
    window: timedelta,
    now: datetime,
    inside_window: bool,
) -> Result | Verdict:
    """A final result (refused, held), or what the scan must do: WOULD_REMOVE (the order is
    stored: remove only) or WOULD_RESUBMIT (send a copy, verify, remove)."""
    if letter.body_problem is not None:
        return Result(
            letter,
            Verdict.REFUSED,
            f"the body cannot be read as an order ({letter.body_problem}): a copy would be "
            "dead-lettered as InvalidPayload again; the producer must send it anew",
        )
    if not letter.message_id:
        return Result(letter, Verdict.REFUSED, "no MessageId: the producer must send it anew")
    order_id = body_order_id(letter.body)
    if order_id != letter.message_id:
        return Result(
            letter,
            Verdict.REFUSED,
            f"MessageId {letter.message_id!r} is not the body's orderId {order_id!r}: a copy "
            "would be dead-lettered as MessageIdMismatch again; the producer must send it anew",
        )
    stored = _stored_state(letter, stored_orders)
    if stored is False:
        return Result(
            letter,
            Verdict.REFUSED,
            f"order {order_id} is stored with a different fingerprint: a copy would be "
            "dead-lettered as HashMismatch again (see `show`)",
        )
    if stored is True:
        return Verdict.WOULD_REMOVE
    window_ends = letter.enqueued_time + window
    if now < window_ends and not inside_window:
        return Result(
            letter,
            Verdict.HELD,
            f"inside the duplicate-detection window until {window_ends.isoformat()}: the broker "
            "would silently drop a copy. Resubmit after that time, or pass --inside-window to "
            "send anyway (the dead letter is removed only if the copy is seen)",
        )
    return Verdict.WOULD_RESUBMIT


class _CopyVerifier:
    """Where the queue's new messages start: a copy's sequence number is above every number
    seen on the queue before it was sent (see ``ops.servicebus``), so each verification peeks
    only what arrived since the last one."""

    def __init__(self, queue: DeadLetterQueue, first: int) -> None:
        self._queue = queue
        self.first = first

    def queued_since_last(self) -> tuple[set[str], dict[str, DeadLetter]]:
        first = self.first
        queued, top = self._queue.queued_message_ids(first)
        again = self._queue.dead_lettered_since(first)
        self.first = max(first, top + 1)
        return queued, again


def resubmit(
    queue: DeadLetterQueue,
    letters: Sequence[DeadLetter],
    *,
    orders: OrderLookup | None,
    window: timedelta | None = None,
    dry_run: bool = False,
    inside_window: bool = False,
    progress: Progress = lambda _received: None,
    first_new_sequence: int = 1,
) -> Run:
    """Resubmit ``letters`` in one scan of the dead-letter queue. ``window``: the duplicate-
    detection window (default: the queue adapter's); ``first_new_sequence``: a sequence number
    no copy can be below (one past the highest the caller has seen)."""
    now = queue.now()
    window = queue.duplicate_detection_window if window is None else window
    results: dict[int, Result] = {}
    to_send: dict[int, DeadLetter] = {}
    to_remove: dict[int, DeadLetter] = {}
    stored_before = _stored(orders, letters)
    for letter in letters:
        checked = _precheck(letter, stored_before, window, now, inside_window)
        if isinstance(checked, Result):
            results[letter.sequence_number] = checked
        elif dry_run:
            detail = (
                "order already stored: would remove the dead letter"
                if checked is Verdict.WOULD_REMOVE
                else "would send a copy, verify it, and remove the dead letter"
            )
            results[letter.sequence_number] = Result(letter, checked, detail)
        elif checked is Verdict.WOULD_REMOVE:
            to_remove[letter.sequence_number] = letter
        else:
            to_send[letter.sequence_number] = letter
    if dry_run or not (to_send or to_remove):
        return Run([results[letter.sequence_number] for letter in letters], ScanResult())

    verifier = _CopyVerifier(queue, first_new_sequence)
    verified: dict[int, Result] = {}

    def decide(batch: Sequence[DeadLetter]) -> set[int]:
        chosen: set[int] = set()
        for letter in batch:
            if letter.sequence_number in to_remove:
                verified[letter.sequence_number] = Result(
                    letter, Verdict.ALREADY_STORED, f"order {letter.message_id} is stored: removed"
                )
                chosen.add(letter.sequence_number)
        sends = [letter for letter in batch if letter.sequence_number in to_send]
        if not sends:
            return chosen
        try:
            queue.send_copies(sends)
        except Exception as error:  # noqa: BLE001 - whatever went wrong, nothing is removed
            for letter in sends:
                results[letter.sequence_number] = Result(
                    letter,
                    Verdict.FAILED,
                    f"the send failed ({type(error).__name__}: {error}); the dead letter stays "
                    "(a copy may have been accepted: a rerun finds it)",
                )
            return chosen
        try:
            queued, again = verifier.queued_since_last()
            stored_now = _stored(orders, [x for x in sends if x.message_id not in queued])
        except Exception as error:  # noqa: BLE001 - unverified: nothing is removed
            for letter in sends:
                results[letter.sequence_number] = Result(
                    letter,
                    Verdict.FAILED,
                    f"sent, but the copy could not be verified ({type(error).__name__}: "
                    f"{error}); the dead letter stays (a rerun verifies it)",
                )
            return chosen
        for letter in sends:
            sequence = letter.sequence_number
            copy = again.get(str(letter.message_id))
            if letter.message_id in queued:
                verified[sequence] = Result(letter, Verdict.RESUBMITTED, "copy seen on the queue")
            elif _stored_state(letter, stored_now) is True:
                verified[sequence] = Result(letter, Verdict.RESUBMITTED, "the order is stored")
            elif copy is not None:
                verified[sequence] = Result(
                    letter,
                    Verdict.DEAD_LETTERED_AGAIN,
                    f"the copy was dead-lettered again as {copy.reason} ({copy.description}): "
                    f"it is dead letter {copy.sequence_number} now; this one was removed",
                )
            else:
                results[sequence] = Result(letter, Verdict.DROPPED, _not_seen(orders))
                continue
            chosen.add(sequence)
        return chosen

    scan = queue.scan(set(to_send) | set(to_remove), decide, progress=progress)
    everything = {**to_send, **to_remove}
    for sequence in scan.removed:
        result = verified[sequence]
        removed = "dead letter removed" if result.verdict is Verdict.RESUBMITTED else ""
        detail = f"{result.detail}: {removed}" if removed else result.detail
        results[sequence] = Result(result.letter, result.verdict, detail)
    for sequence, why in scan.failed.items():
        before = verified.get(sequence)
        sent = "the copy was sent and verified, but " if sequence in to_send and before else ""
        results[sequence] = Result(
            everything[sequence],
            Verdict.FAILED,
            f"{sent}the dead letter was not removed: {why}; rerun to remove it",
        )
    for sequence in scan.not_received:
        results[sequence] = Result(everything[sequence], Verdict.NOT_RECEIVED, _unreached(scan))
    return Run([results[letter.sequence_number] for letter in letters], scan)


def _not_seen(orders: OrderLookup | None) -> str:
    if orders is None:
        return (
            "sent, but not seen on the queue: dropped as a duplicate, or already consumed (give "
            "the Cosmos DB endpoint to check the stored order). The dead letter stays"
        )
    return (
        "sent, but the copy is neither on the queue nor stored: the broker dropped it as a "
        "duplicate. The dead letter stays; resubmit after the window"
    )


def _unreached(scan: ScanResult) -> str:
    why = scan.stopped or (
        "no more dead letters to receive: it is locked by another receiver, or was removed "
        "meanwhile"
    )
    return f"not received by the scan ({why}); nothing was done to it"


def purge(
    queue: DeadLetterQueue,
    letters: Sequence[DeadLetter],
    *,
    dry_run: bool = False,
    progress: Progress = lambda _received: None,
) -> Run:
    if dry_run:
        return Run([Result(x, Verdict.WOULD_REMOVE, "would remove") for x in letters], ScanResult())
    by_sequence = {letter.sequence_number: letter for letter in letters}
    scan = queue.scan(
        set(by_sequence), lambda batch: {x.sequence_number for x in batch}, progress=progress
    )
    results = {s: Result(by_sequence[s], Verdict.REMOVED, "removed for good") for s in scan.removed}
    for sequence, why in scan.failed.items():
        results[sequence] = Result(by_sequence[sequence], Verdict.FAILED, f"not removed: {why}")
    for sequence in scan.not_received:
        results[sequence] = Result(by_sequence[sequence], Verdict.NOT_RECEIVED, _unreached(scan))
    return Run([results[letter.sequence_number] for letter in letters], scan)


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
