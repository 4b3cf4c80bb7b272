"""What the tool decides and does to dead letters: which to resubmit, hold, refuse or purge, and
the field-by-field diff of a ``HashMismatch``. Pure over the ports (``ops.port``); it never
invents a MessageId, and it reports only what the broker confirmed: a dead letter is "removed"
when, and only when, the scan completed it (``ScanResult.removed``).

A dead letter is read as the consumer reads it: its type is its Subject (none: OrderPlaced),
its body is checked by the same contract (``shared.consumer.contract.parse_message``), and
"handled" is what the consumer records: an OrderPlaced's order document with its fingerprint,
or the inbox marker of (consumer, MessageId) with its fingerprint (``shared.kit.inbox``),
which every OrderAmended and OrderCancelled, and a stale OrderPlaced, leaves.

Resubmitting is where orders get lost, two ways, and both are silent on the broker's side:

- the queue has duplicate detection: a copy sent with the original MessageId while that id is
  still in the detection history (``duplicateDetectionHistoryTimeWindow``, from the original's
  enqueue time) is accepted by ``send`` and dropped. So inside the window the tool HOLDS (sends
  nothing) unless ``--inside-window`` is given, and in every case it removes a dead letter only
  after VERIFYING the copy: its MessageId is on the queue (peek) or the consumer recorded it
  handled with the same fingerprint (Cosmos DB). A dropped copy leaves the dead letter in place
  (``dropped``);
- a copy the consumer would dead-letter again is REFUSED (nothing sent; only the producer can
  fix it): no MessageId; a MessageId the contract refuses for its type (an OrderPlaced's must
  be its orderId, a change's must differ from it: ``MessageIdMismatch``); a Subject the contract
  does not read (``UnsupportedMessageType``); a body that cannot be read at all, or not as the
  consumer reads it (``read_document``: too large, not UTF-8 JSON, nested past its parser's
  depth, not an object), refused alone while the rest of the batch goes on; a MessageId
  handled with other content (``HashMismatch``); a change of an order cancelled at a lower
  version, or dead-lettered ``InvalidTransition`` (a cancelled order changes no more).

A copy of a version at or below the one the order holds is resubmitted: the consumer completes
it as ``stale`` (its marker written, nothing else changed), which the detail predicts.

Send first, remove second, under the dead letter's lock: a crash in between leaves the dead
letter AND the copy. The next run finds the copy handled (or on the queue) and only removes the
dead letter; if it sends again, the broker drops that copy or the consumer completes it as a
duplicate. Never two orders, never none.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from idempotent_consumer import InboxField, InvalidMessage, marker_id, read_json_object

from ops.port import DeadLetter, DeadLetterQueue, DocumentKey, OrderLookup, ScanResult
from ops.subscriptions import EventReading
from shared.consumer.contract import (
    CHANGE_FIELDS,
    CONTRACT_FIELDS,
    FINGERPRINT_ALGORITHMS,
    ORDER_AMENDED,
    ORDER_PLACED,
    DeadletterReason,
    ValidChange,
    ValidOrder,
    message_id_problem,
    parse_message,
)
from shared.consumer.lifecycle import CONSUMER_NAME
from shared.consumer.order import is_cancelled, stored_version


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


def read_document(letter: DeadLetter) -> dict[str, Any]:
    """The body's JSON object, read as the consumer reads a body (``shared.kit.message.
    read_json_object``: a MessageId, the size limit, UTF-8 JSON by pydantic-core, whose depth
    limit refuses a deeply nested body where ``json.loads`` raised RecursionError, an object);
    raises ``InvalidMessage`` with the reason the consumer dead-letters it with."""
    return read_json_object(letter.body, letter.message_id)[1]


def body_order_id(letter: DeadLetter) -> str | None:
    """The body's orderId; None when it has none, or the consumer cannot read the body."""
    try:
        order_id = read_document(letter).get("orderId")
    except InvalidMessage:
        return None
    return order_id if isinstance(order_id, str) else None


def message_type(letter: DeadLetter) -> str:
    """The consumer's reading of the type: the Subject, none meaning OrderPlaced."""
    return letter.subject or ORDER_PLACED


def parsed(letter: DeadLetter) -> ValidOrder | ValidChange | None:
    """The dead letter as the consumer's contract reads it; None if the contract refuses it."""
    try:
        return parse_message(letter.body, letter.message_id, letter.subject)
    except InvalidMessage:
        return None


def document_keys(letter: DeadLetter, reading: EventReading | None = None) -> list[DocumentKey]:
    """What tells whether the consumer handled this dead letter: its order and this consumer's
    marker of its MessageId, both in the order's partition (a subscription's: ``reading``'s)."""
    if reading is not None:
        return reading.document_keys(letter)
    order_id = body_order_id(letter)
    if order_id is None or not letter.message_id:
        return []
    return [(order_id, order_id), (marker_id(CONSUMER_NAME, letter.message_id), order_id)]


def _order(
    letter: DeadLetter, stored: Mapping[DocumentKey, dict[str, Any]]
) -> dict[str, Any] | None:
    keys = document_keys(letter)
    return stored.get(keys[0]) if keys else None


def _marker(
    letter: DeadLetter, stored: Mapping[DocumentKey, dict[str, Any]]
) -> dict[str, Any] | None:
    keys = document_keys(letter)
    return stored.get(keys[1]) if keys else None


@dataclass(frozen=True)
class Handled:
    """Whether the consumer recorded this dead letter's MessageId as handled: True with the same
    fingerprint, False with another; and what recorded it."""

    same: bool
    what: str


def handled(
    letter: DeadLetter,
    stored: Mapping[DocumentKey, dict[str, Any]],
    reading: EventReading | None = None,
) -> Handled | None:
    """The consumer's record of this dead letter (None: none, or one it cannot compare)."""
    if reading is not None:
        found = reading.handled(letter, stored)
        return None if found is None else Handled(*found)
    valid = parsed(letter)
    if valid is None:
        return None
    marker = _marker(letter, stored)
    if marker is not None and marker.get(InboxField.HASH_ALGORITHM) == valid.hash_algorithm:
        outcome = marker.get(InboxField.OUTCOME)
        return Handled(
            marker.get(InboxField.REQUEST_HASH) == valid.request_hash,
            f"MessageId {letter.message_id} was handled as {marker.get(InboxField.MESSAGE_TYPE)} "
            f"version {marker.get(InboxField.ORDER_VERSION)} ({outcome})",
        )
    order = _order(letter, stored)
    if isinstance(valid, ValidOrder) and order is not None:
        fingerprint = FINGERPRINT_ALGORITHMS.get(str(order.get("hashAlgorithm")))
        if fingerprint is not None and order.get("requestHash") is not None:
            same = fingerprint(valid.fields) == order.get("requestHash")
            return Handled(same, f"order {valid.order_id} is stored")
    return None


def _stored(
    orders: OrderLookup | None,
    letters: Iterable[DeadLetter],
    reading: EventReading | None = None,
) -> dict[DocumentKey, dict[str, Any]]:
    """The orders and markers of these dead letters (a subscription's: its consumer's
    documents), in one batched read (none without a lookup)."""
    if orders is None:
        return {}
    keys = {key for letter in letters for key in document_keys(letter, reading)}
    return orders.documents(keys)


def _refused(letter: DeadLetter, why: str) -> Result:
    return Result(letter, Verdict.REFUSED, why)


def _producer_must(reason: str) -> str:
    return f"a copy would be dead-lettered as {reason} again; the producer must send it anew"


def _precheck(
    letter: DeadLetter,
    stored: Mapping[DocumentKey, dict[str, Any]],
    window: timedelta,
    now: datetime,
    inside_window: bool,
    reading: EventReading | None = None,
) -> Result | tuple[Verdict, str]:
    """A final result (refused, held), or what the scan must do and why: WOULD_REMOVE (the
    consumer handled it: remove only) or WOULD_RESUBMIT (send a copy, verify, remove)."""
    if reading is not None:
        return _precheck_event(letter, stored, window, now, inside_window, reading)
    if letter.body_problem is not None:
        return _refused(
            letter,
            f"the body cannot be read as an order ({letter.body_problem}): "
            + _producer_must(DeadletterReason.INVALID_PAYLOAD),
        )
    if not letter.message_id:
        return _refused(letter, "no MessageId: the producer must send it anew")
    kind = message_type(letter)
    try:
        valid: ValidOrder | ValidChange | None = parse_message(
            letter.body, letter.message_id, letter.subject
        )
    except InvalidMessage as error:
        # Other refusals of the contract are left to the consumer: a copy of a schemaVersion it
        # does not read yet goes once the consumer that reads it is deployed.
        valid = None
        if error.reason == DeadletterReason.UNSUPPORTED_MESSAGE_TYPE:
            return _refused(
                letter,
                f"{error.description}: a copy (the Subject copied as is) would be dead-lettered "
                "as UnsupportedMessageType again; the producer must send it anew with the right "
                "Subject, or a consumer that reads this type be deployed first",
            )
    try:
        order_id = read_document(letter).get("orderId")
    except InvalidMessage as error:  # one dead letter refused; the batch goes on
        return _refused(
            letter,
            f"the consumer cannot read the body ({error.description}): "
            + _producer_must(error.reason),
        )
    problem = message_id_problem(kind, letter.message_id, order_id)
    if problem is not None:
        return _refused(
            letter, f"{problem}: " + _producer_must(DeadletterReason.MESSAGE_ID_MISMATCH)
        )
    if letter.reason == DeadletterReason.INVALID_TRANSITION:
        return _refused(
            letter,
            "a change after its order's cancellation (a cancelled order changes no more): "
            + _producer_must(DeadletterReason.INVALID_TRANSITION),
        )
    record = handled(letter, stored)
    if record is not None and not record.same:
        return _refused(
            letter,
            f"{record.what} with a different fingerprint: a copy would be dead-lettered as "
            "HashMismatch again (see `show`)",
        )
    if record is not None:
        return Verdict.WOULD_REMOVE, f"{record.what}, with this fingerprint"
    order = _order(letter, stored)
    note = ""
    if order is not None and valid is not None:
        version = stored_version(order)
        if isinstance(valid, ValidChange) and is_cancelled(order) and valid.version > version:
            return _refused(
                letter,
                f"order {order_id} was cancelled at version {version}; this {kind} is version "
                f"{valid.version}: " + _producer_must(DeadletterReason.INVALID_TRANSITION),
            )
        if valid.version <= version:
            note = (
                f"order {order_id} is at version {version}: the consumer will complete this "
                f"version {valid.version} as stale, changing nothing"
            )
    held = _inside_window(letter, window, now, inside_window)
    return held or (Verdict.WOULD_RESUBMIT, note)


def _inside_window(
    letter: DeadLetter, window: timedelta, now: datetime, inside_window: bool
) -> Result | None:
    window_ends = letter.enqueued_time + window
    if now < window_ends and not inside_window:
        return Result(
            letter,
            Verdict.HELD,
            f"inside the duplicate-detection window until {window_ends.isoformat()}: the broker "
            "would silently drop a copy. Resubmit after that time, or pass --inside-window to "
            "send anyway (the dead letter is removed only if the copy is seen)",
        )
    return None


def _precheck_event(
    letter: DeadLetter,
    stored: Mapping[DocumentKey, dict[str, Any]],
    window: timedelta,
    now: datetime,
    inside_window: bool,
    reading: EventReading,
) -> Result | tuple[Verdict, str]:
    """``_precheck`` of a topic subscription's dead letter, read by its consumer's contract
    (``ops.subscriptions``)."""
    if letter.body_problem is not None:
        return _refused(
            letter,
            f"the body cannot be read as an event ({letter.body_problem}): "
            + _producer_must(DeadletterReason.INVALID_PAYLOAD),
        )
    if not letter.message_id:
        return _refused(letter, "no MessageId: the producer must send it anew")
    try:
        reading.valid(letter)
    except InvalidMessage as error:
        return _refused(
            letter,
            f"{reading.consumer} refuses it ({error.reason}: {error.description}): a copy "
            f"would be dead-lettered as {error.reason} again (docs/operations.md)",
        )
    record = handled(letter, stored, reading)
    if record is not None and not record.same:
        return _refused(
            letter,
            f"{record.what} with a different fingerprint: a copy would be dead-lettered as "
            "HashMismatch again (see `show`)",
        )
    if record is not None:
        return Verdict.WOULD_REMOVE, f"{record.what}, with this fingerprint"
    blocked = reading.block(letter, stored)
    if blocked is not None:
        return _refused(letter, blocked)
    held = _inside_window(letter, window, now, inside_window)
    return held or (Verdict.WOULD_RESUBMIT, "")


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
    reading: EventReading | None = None,
) -> Run:
    """Resubmit ``letters`` in one scan of the dead-letter queue. ``window``: the duplicate-
    detection window (default: the queue adapter's); ``first_new_sequence``: a sequence number
    no copy can be below (one past the highest the caller has seen); ``reading``: a topic
    subscription's consumer (``ops.subscriptions``), whose contract and documents decide, and
    ``orders`` then reads its container."""
    now = queue.now()
    window = queue.duplicate_detection_window if window is None else window
    results: dict[int, Result] = {}
    to_send: dict[int, DeadLetter] = {}
    to_remove: dict[int, DeadLetter] = {}
    notes: dict[int, str] = {}
    stored_before = _stored(orders, letters, reading)
    for letter in letters:
        checked = _precheck(letter, stored_before, window, now, inside_window, reading)
        if isinstance(checked, Result):
            results[letter.sequence_number] = checked
            continue
        verdict, notes[letter.sequence_number] = checked
        if dry_run:
            note = notes[letter.sequence_number]
            detail = (
                f"{note}: would remove the dead letter"
                if verdict is Verdict.WOULD_REMOVE
                else _with_note("would send a copy, verify it, and remove the dead letter", note)
            )
            results[letter.sequence_number] = Result(letter, verdict, detail)
        elif verdict is Verdict.WOULD_REMOVE:
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
                    letter, Verdict.ALREADY_STORED, f"{notes[letter.sequence_number]}: removed"
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
            stored_now = _stored(orders, [x for x in sends if x.message_id not in queued], reading)
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
            note = notes[sequence]
            if letter.message_id in queued:
                verified[sequence] = Result(
                    letter, Verdict.RESUBMITTED, _with_note("copy seen on the queue", note)
                )
            elif (record := handled(letter, stored_now, reading)) is not None and record.same:
                verified[sequence] = Result(letter, Verdict.RESUBMITTED, record.what)
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


def _with_note(detail: str, note: str) -> str:
    return f"{detail} ({note})" if note else detail


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


def field_diff(
    letter: DeadLetter, stored: Mapping[DocumentKey, dict[str, Any]]
) -> list[tuple[str, Any, Any]]:
    """(field, in the dead letter, in what the consumer stored) for each field that differs,
    against the record the consumer compared it with (``document_keys`` read): an OrderPlaced
    against its order's contract fields, order lines line by line and field by field; a change
    (or a stale OrderPlaced) against this consumer's marker of its MessageId (type, version,
    fingerprint) and, when the order still holds that amendment, against its fields."""
    try:
        valid = parse_message(letter.body, letter.message_id, letter.subject)
    except InvalidMessage as error:
        return [("(body)", f"not a valid {message_type(letter)}: {error}", None)]
    order, marker = _order(letter, stored) or {}, _marker(letter, stored)
    if marker is not None:
        differences = [
            (field, mine, marker.get(field))
            for field, mine in (
                (InboxField.MESSAGE_TYPE, valid.message_type),
                (InboxField.ORDER_VERSION, valid.version),
                (InboxField.REQUEST_HASH, valid.request_hash),
            )
            if mine != marker.get(field)
        ]
        # The order still holds the amendment the marker recorded: its fields are that content.
        if (
            isinstance(valid, ValidChange)
            and marker.get(InboxField.MESSAGE_TYPE) == valid.message_type == ORDER_AMENDED
            and marker.get(InboxField.ORDER_VERSION) == stored_version(order)
            and not is_cancelled(order)
        ):
            names = [n for n in CHANGE_FIELDS[valid.message_type] if n in order]
            differences += _contract_diff(valid.fields, order, names)
        return differences
    if isinstance(valid, ValidChange):
        return []
    return _contract_diff(valid.fields, order, CONTRACT_FIELDS)


def _contract_diff(
    incoming: Mapping[str, Any], stored: Mapping[str, Any], names: Iterable[str]
) -> list[tuple[str, Any, Any]]:
    differences: list[tuple[str, Any, Any]] = []
    for name in names:
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
