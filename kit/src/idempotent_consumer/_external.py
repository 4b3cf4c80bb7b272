"""Apply one message's effect **outside** the store's transaction exactly once: a call another
system makes (a payment captured, an email sent), which no batch can hold with the marker.

The shape every description of the pattern agrees on, and how this kit makes it safe:

1. **In progress**: before the call, the consumer's state document (one per entity, in the
   entity's partition) records the call it is about to make under ``pending``: the operation,
   its idempotency key (derived from the consumer name, the MessageId and the operation: the same
   on every attempt, ``call_key``) and the request, written from the revision it read (a
   conditional patch), so that two deliveries can never start two different calls for one
   entity. One write. A first version's first delivery writes it unread, as a create (the
   common case: no state yet); a state that exists refuses the create, and is then read.
2. **The call**, with the key, so the other side deduplicates too.
3. **Completed**: one transactional batch: the message's inbox marker, the state moved to the
   message's version with what the call did (``ExternalEffect.settled``) and ``pending`` cleared,
   and a record of the call and its result. One write. Two writes and one call: the floor.

An in-progress record is **not a lock** (the Service Bus lock is), and nothing waits for it to
expire: whoever reads a ``pending`` call (the redelivery of its own message after a crash or a
lock expiry, a concurrent delivery, or the next version's message) finishes it first, then goes
on. Finishing a call that may already have been made starts with the other side's lookup by
reference: found, its result is recorded as is; not found or still in progress, the call is
repeated with the same key when the other side honours keys (it answers the first result, or 409
while the first is still running: retried within the delivery), claimed first by a conditional
write of the state's revision: the delivery that recorded the call may withdraw it as unsent
(below), which is true only until another delivery sends it.

**Time is a premise, so each side enforces its own.** An attempt carries its window in its
record: ``startedAt`` (the sender's clock, read just before the record is written, so never
later than the commit) and ``overBy`` (``startedAt`` + twice ``call_deadline_s``). The sender
starts its send only within ``call_deadline_s`` of reading its start, by the time that really
passed (a monotonic clock: no wall-clock step moves it), and the client's timeout ends it one
``call_deadline_s`` later, so by ``overBy`` on the sender's clock. A record the store took
longer than the deadline to confirm (a throttled write the SDK retried, a slow store) is
withdrawn unsent and the delivery decides again, so an attempt never leaves after its window,
however late the store answers. A side that honours **no** key is called again only when an
attempt that may have been sent can provably no longer take effect: its lookup, asked after
``overBy`` + the other side's stated processing bound (``processing_bound_s``) + a margin for
clock skew between instances (``clock_skew_s``), says it has no such operation; and only by the
one delivery that claims the new attempt (a conditional write of a new window, held to the same
rule: a claim confirmed late is withdrawn unsent). An attempt the other side provably did not
perform (it never reached it, or refused it before processing: ``NotMade``) is withdrawn at
once, so nothing waits for it. Where no processing bound is configured an attempt that may have
been sent has an unknown outcome for good: it is never made again. The waiting side reads the
``clock`` it is given: in Azure the system clock; the local stand-in's manual clock jumps ahead
of real time (backoff takes none), so there a waiter may act before a real attempt is over: the
stand-in's limit, not the kit's (tests of the windows use real time). Such a call, or one the
other side still says is in progress after that moment, is **inconclusive**: retried within the
delivery and redelivered, and after ``park_after_deliveries`` deliveries the message is
**parked**: dead-lettered ``NeedsReconciliation`` with that attempt (its key and start, nothing
else: a newer call found there meanwhile is decided again) marked for an operator, counted
(the definition's ``reconciliation_measure``, by the delivery that marked it, whichever message
it was) and alerted, never retried blindly. A lookup that says the operation was performed more
than once is parked at once. Later messages of the same entity are parked behind it (the state
cannot move past an unknown call) until an operator resolves it (the app's runbook, which the
definition names: ``reconciliation_runbook``), and are resubmitted then; a message at or below
the version the state has already applied is still answered as a duplicate or stale, never
parked.

A version at or below the state's is stale, as in ``apply_once``: its marker alone. Results the
other side gives about the request itself (a declined card, a refused refund) are outcomes the
instance records in the state (``settled``) and counts (``measures``), completed, not retried. A
message the instance must not act on without a person (``plan`` answers ``Escalation``: a payer
changed after money moved) is dead-lettered with the instance's reason and counted; nothing is
written.

Errors: the instance's ``perform`` and ``look_up`` raise the kit's ``TransientStoreError`` for
what a retry can fix (a timeout, a 5xx, a 409 for a call in progress) and ``SystemicStoreError``
for what it cannot (a refused credential, a key reused with another payload); the consumer's
table classifies them as for a store. Pure: no Azure, no I/O beyond the ports it is handed.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from idempotent_consumer._clock import Clock, document_timestamp
from idempotent_consumer._consumer import Monotonic, classified
from idempotent_consumer._decision import (
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    decided,
    refused,
)
from idempotent_consumer._errors import (
    InvalidMessage,
    StoreError,
    TransientStoreError,
    WriteRefused,
    bound,
)
from idempotent_consumer._ids import uuid5_text
from idempotent_consumer._inbox import PROCESSED, Handled, Inbox
from idempotent_consumer._message import HASH_ALGORITHM
from idempotent_consumer._writes import Condition, Create, Patch, PatchOperation, Write, set_field

NEEDS_RECONCILIATION = "NeedsReconciliation"  # the dead-letter reason of a parked call
RECONCILIATION_NEEDED = "reconciliation_needed"  # its measure, unless the definition names one
MAX_ROUNDS = 4
_KEY_NAMESPACE = uuid.UUID("2b0e8f1c-5d7a-4c1e-9f3b-7a6d2c4e8b10")


class StateField:
    """The state document's fields the kit owns; the instance owns the others."""

    ID = "id"
    TYPE = "type"
    VERSION = "version"
    REVISION = "revision"
    PENDING = "pending"


class CallField:
    """The fields of a pending call (and of a call's record)."""

    MESSAGE_ID = "messageId"
    MESSAGE_TYPE = "messageType"
    ABOUT = "about"
    VERSION = "version"
    REQUEST_HASH = "requestHash"
    HASH_ALGORITHM = "hashAlgorithm"
    OPERATION = "operation"
    KEY = "key"
    REQUEST = "request"
    STARTED_AT = "startedAt"  # the attempt's window (module docstring): its start,
    OVER_BY = "overBy"  # and when it is over on our side (the client's timeout)
    RECONCILE = "reconcile"
    RESULT = "result"
    COMPLETED_AT = "completedAt"


def call_key(consumer: str, message_id: str, operation: str) -> str:
    """The idempotency key of one operation of one message for one consumer: a UUIDv5 of the
    three (RFC 9562), the same on every attempt, computable by an operator."""
    return uuid5_text(_KEY_NAMESPACE, f"{consumer}\n{message_id}\n{operation}")


@dataclass(frozen=True, slots=True)
class Call:
    """One call to make: its ``operation``, its idempotency ``key`` and the JSON ``request``
    the instance makes it from (stored in the in-progress record before the call)."""

    operation: str
    key: str
    request: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Escalation:
    """A message the instance must not act on without a person: dead-lettered with ``reason``
    (a bounded, stable word) and ``detail`` (no message value in it), counted under
    ``measure``; nothing is written, so a resubmission after the person acted decides again."""

    reason: str
    detail: str
    measure: str


@dataclass(frozen=True, slots=True)
class Found:
    """The other side's lookup found the call's operation: its result, and how many times it
    performed the operation again under the same reference (never, unless it honours no key)."""

    result: Mapping[str, Any]
    repeats: int = 0


@dataclass(frozen=True, slots=True)
class NotFound:
    """The other side has no operation under the call's reference."""


@dataclass(frozen=True, slots=True)
class InProgress:
    """The other side is processing the call's operation now."""


Looked = Found | NotFound | InProgress


class ExternalEffect[M](Protocol):
    """An instance's effect outside the transaction, in one entity's partition."""

    @property
    def state_id(self) -> str:
        """The id of the entity's state document in its partition."""
        ...

    @property
    def honours_keys(self) -> bool:
        """Whether the other side answers a repeated key with the first result."""
        ...

    @property
    def call_deadline_s(self) -> float:
        """The client's timeout for one call: an attempt is sent within this of its record's
        start or not at all, and is over on our side this long after it was sent."""
        ...

    @property
    def processing_bound_s(self) -> float | None:
        """How long after a request reached the other side it can still take effect there (its
        stated bound); None when not known: then an attempt that may have been sent is never
        made again without keys, and its unknown outcome is parked."""
        ...

    @property
    def clock_skew_s(self) -> float:
        """The margin for the difference between two instances' clocks."""
        ...

    @property
    def park_after_deliveries(self) -> int:
        """After this many deliveries an inconclusive call is parked for an operator."""
        ...

    def new_state(self, message: M) -> dict[str, Any]:
        """The instance's fields of a state document created by ``message``."""
        ...

    def plan(self, message: M, state: Mapping[str, Any] | None) -> Call | Escalation | None:
        """The call ``message`` needs given the stored state (None: nothing to call; an
        ``Escalation``: a person must decide)."""
        ...

    async def perform(self, call: Call) -> Mapping[str, Any]:
        """Make the call with its key; the result as JSON."""
        ...

    async def look_up(self, call: Call) -> Looked:
        """What the other side knows of the call's operation."""
        ...

    def settled(
        self, state: Mapping[str, Any], call: Call, result: Mapping[str, Any]
    ) -> Sequence[PatchOperation]:
        """The instance's fields of the state once ``call`` ended with ``result``."""
        ...

    def measures(self, result: Mapping[str, Any]) -> Mapping[str, int]:
        """The business counts of a call's result (a declined card ...)."""
        ...


@dataclass(frozen=True, slots=True)
class CallingConsumerDefinition[M: Handled]:
    """A consumer whose effect is a call (module docstring): its name (part of every marker
    and call key), its contract, the one partition a message concerns (the entity's) and its
    effect there. ``reconciliation_runbook``: where the app's operators read how to resolve a
    parked call (a page and section of the app's own docs), named in every parked message's
    dead-letter description; None names none (the kit has no runbook of its own).
    ``reconciliation_measure``: the ``Decision.measures`` key a newly parked call is counted
    under (the app declares it to its telemetry, alerts on it)."""

    name: str
    partition_field: str
    parse: Callable[[IncomingMessage], M]
    partition: Callable[[M], str]
    effect: Callable[[M], ExternalEffect[M]]
    reconciliation_runbook: str | None = None
    reconciliation_measure: str = RECONCILIATION_NEEDED


async def decide_call[M: Handled](
    definition: CallingConsumerDefinition[M],
    incoming: IncomingMessage,
    store: DocumentStore,
    *,
    marker_ttl_s: int,
    clock: Clock,
    monotonic: Monotonic = time.monotonic,
) -> Decision:
    """Validate, apply through the call once, and classify (``_consumer.classified``).
    ``clock`` is read wherever a moment matters (a window's start, a waiter's lookup), never once
    for the whole delivery; ``monotonic`` times the sender's own window. Never raises for
    anything a message can cause."""
    try:
        message = definition.parse(incoming)
    except InvalidMessage as invalid:
        return refused(incoming, invalid, incoming.subject)
    inbox = Inbox(definition.name, definition.partition_field, marker_ttl_s)
    effect = definition.effect(message)
    work = apply_with_call(
        store,
        inbox,
        message,
        definition.partition(message),
        effect,
        incoming=incoming,
        clock=clock,
        monotonic=monotonic,
        parking=Parking(definition.reconciliation_runbook, definition.reconciliation_measure),
    )
    return await classified(message, work)


@dataclass(frozen=True, slots=True)
class Parking:
    """How a parked call reaches an operator: the runbook its description names (none when
    None) and the measure a newly parked call is counted under (``CallingConsumerDefinition``)."""

    runbook: str | None = None
    measure: str = RECONCILIATION_NEEDED


class NotMade(Exception):
    """Raised by ``ExternalEffect.perform`` for an attempt the other side provably did not
    perform (it never reached its processing, or it refused the request before processing):
    the kit withdraws the attempt's in-progress record, so the next delivery makes it afresh
    instead of waiting out a window for nothing, and raises ``error`` for the consumer's
    table."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error


class Inconclusive(TransientStoreError):
    """An attempt of a call that may or may not have taken effect, which the other side cannot
    tell: ``key`` and ``started_at`` name the attempt (the one to park, nothing else);
    ``park_now`` when waiting cannot help (the other side performed it more than once)."""

    def __init__(self, description: str, pending: Mapping[str, Any], *, park_now: bool = False):
        super().__init__(description)
        self.key = pending.get(CallField.KEY)
        self.started_at = pending.get(CallField.STARTED_AT)
        self.park_now = park_now

    def names(self, pending: Mapping[str, Any]) -> bool:
        return (pending.get(CallField.KEY), pending.get(CallField.STARTED_AT)) == (
            self.key,
            self.started_at,
        )


@dataclass(frozen=True, slots=True)
class _PendingMessage:
    """The message a pending call belongs to, as its marker needs it (``Handled``)."""

    message_id: str
    message_type: str
    order_id: str
    version: int
    request_hash: str
    hash_algorithm: str


async def apply_with_call[M: Handled](
    store: DocumentStore,
    inbox: Inbox,
    message: M,
    partition_key: str,
    effect: ExternalEffect[M],
    *,
    incoming: IncomingMessage,
    clock: Clock,
    monotonic: Monotonic = time.monotonic,
    parking: Parking = Parking(),
) -> Decision:
    """Apply ``message`` through ``effect`` once (module docstring). Raises the store's and the
    effect's transient and systemic errors for the consumer's table; an inconclusive call is
    transient until ``park_after_deliveries``, then parked as ``parking`` says."""
    # A first version on its first delivery finds no state in the common case: its in-progress
    # record is created without the read (the create is the same check: refused when a state
    # exists, and then it is read). A redelivery reads first: its state is likely there.
    blind = message.version == 1 and (incoming.delivery_count or 1) <= 1
    try:
        return await _apply(
            store, inbox, message, partition_key, effect, clock, monotonic, parking, blind
        )
    except Inconclusive as inconclusive:
        park = inconclusive.park_now or (
            (incoming.delivery_count or 1) >= effect.park_after_deliveries
        )
        if not park:
            raise
        return await _park(store, message, partition_key, effect, inconclusive, parking)


async def _apply[M: Handled](
    store: DocumentStore,
    inbox: Inbox,
    message: M,
    partition_key: str,
    effect: ExternalEffect[M],
    clock: Clock,
    monotonic: Monotonic,
    parking: Parking,
    blind: bool = False,
) -> Decision:
    # The business counts of the calls this delivery completed, its own and any it finished on
    # another message's behalf: counted once, by the delivery whose completion committed.
    counted: Counter[str] = Counter()
    for _ in range(MAX_ROUNDS):
        state = None if blind else await store.read(partition_key, effect.state_id)
        blind = False  # a refused create: read what is there
        pending = state.get(StateField.PENDING) if state is not None else None
        version = _int(state, StateField.VERSION) if state is not None else 0
        if version >= message.version:
            # A duplicate or stale whatever call is pending: a pending call is always a later
            # version's, so this message neither waits for it nor is parked behind it.
            decision = await inbox.record_stale(
                store, message, partition_key, stored_version=version, now=clock.now()
            )
            return replace(decision, measures=_positive(counted))
        if state is not None and pending and pending.get(CallField.RECONCILE):
            # A parked call holds back every version after the state's.
            return _parked(message, pending, "its call is parked for reconciliation", parking)
        if state is not None and pending:
            # Finish whoever's call is in progress first: nothing waits for it to expire.
            result, state = await _resume(
                store, partition_key, effect, state, pending, clock, monotonic
            )
            done = await complete_call(
                store, inbox, partition_key, effect, state, pending, result, clock.now()
            )
            if done:
                counted.update(effect.measures(result))
            if done and _owns(pending, message):
                return decided(Outcome.PROCESSED, message, measures=_positive(counted))
            continue  # another message's call, or completed meanwhile: read again
        call = effect.plan(message, state)
        if isinstance(call, Escalation):
            return decided(
                Outcome.INVALID,
                message,
                deadletter_reason=call.reason,
                description=bound(call.detail),
                measures={**_positive(counted), call.measure: 1},
            )
        if call is None:  # nothing to call: the state takes the version, with the marker
            if await _move(store, inbox, message, partition_key, effect, state, clock.now()):
                return decided(Outcome.PROCESSED, message, measures=_positive(counted))
            continue
        stamped = monotonic()
        pending = _pending(message, call, clock.now(), effect.call_deadline_s)
        begun = await _begin(store, inbox, partition_key, effect, message, state, pending)
        if begun is None:
            continue  # another delivery began or moved it meanwhile: read again
        await _within_window(store, partition_key, effect, begun, monotonic() - stamped)
        result = await _perform(store, partition_key, effect, begun)
        if await complete_call(
            store, inbox, partition_key, effect, begun, pending, result, clock.now()
        ):
            counted.update(effect.measures(result))
            return decided(Outcome.PROCESSED, message, measures=_positive(counted))
    raise TransientStoreError(
        f"{message.message_type} {message.message_id!r}: the state of {partition_key!r} changed "
        f"under {MAX_ROUNDS} attempts"
    )


def _owns(pending: Mapping[str, Any], message: Handled) -> bool:
    return bool(pending.get(CallField.MESSAGE_ID) == message.message_id)


def _positive(counted: Counter[str]) -> dict[str, int]:
    return {name: count for name, count in counted.items() if count > 0}


def _call(pending: Mapping[str, Any]) -> Call:
    return Call(pending[CallField.OPERATION], pending[CallField.KEY], pending[CallField.REQUEST])


def _window(start: datetime, call_deadline_s: float) -> dict[str, str]:
    """An attempt's window from ``start``, the sender's clock read before its record is
    written: its send starts within the deadline of ``start`` or not at all, so it is over on
    our side by twice the deadline after it (module docstring)."""
    deadline = timedelta(seconds=call_deadline_s)
    return {
        CallField.STARTED_AT: document_timestamp(start),
        CallField.OVER_BY: document_timestamp(start + 2 * deadline),
    }


async def _within_window[M](
    store: DocumentStore,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any],
    elapsed_s: float,
) -> None:
    """Before sending: the attempt ``state`` records is still within its send window, or it is
    withdrawn unsent and the delivery decides again. The waiting side's rule rests on this.
    ``elapsed_s``: monotonic time since its window's start was read: the sender measures its
    own window by the time that really passed since (no wall-clock step, and no stand-in's
    manual clock, moves it); the others read its wall-clock ``overBy``, the skew margin covering
    the difference. The send starts right after this check; the adapter's timeout bounds it."""
    pending = state[StateField.PENDING]
    if elapsed_s < effect.call_deadline_s:
        return
    # Unsent, so clearing it is safe; if the state moved meanwhile, its new owner decides.
    await release_call(store, partition_key, effect, state)
    raise TransientStoreError(
        f"call {pending[CallField.KEY]}: its in-progress record was confirmed after its send "
        f"window ({effect.call_deadline_s:g} s, the store answered late): withdrawn unsent"
    )


async def _resume[M](
    store: DocumentStore,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any],
    pending: Mapping[str, Any],
    clock: Clock,
    monotonic: Monotonic,
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The result of a call found in progress, and the state to complete it from: found at the
    other side, or made again when that is safe (module docstring)."""
    call = _call(pending)
    asked_at = clock.now()  # before the lookup: its answer is no older than this
    looked = await effect.look_up(call)
    if isinstance(looked, Found):
        if looked.repeats:
            raise Inconclusive(
                f"call {call.key} ({call.operation}): the other side performed it "
                f"{looked.repeats + 1} times",
                pending,
                park_now=True,
            )
        return looked.result, state
    if effect.honours_keys:
        # The same key: the other side answers the first result, or 409 while it runs. Claimed
        # first: the delivery that recorded the call withdraws it as unsent when its record was
        # confirmed after its window (``_within_window``), which is only true while no other
        # delivery has sent it. The claim moves the revision, so that withdrawal (conditional
        # on the revision it wrote) is refused once this delivery may send.
        claimed = await _claim(
            store,
            partition_key,
            effect,
            state,
            pending,
            f"call {call.key}: the state moved while its call was being resumed",
        )
        return await _perform(store, partition_key, effect, claimed), claimed
    over_here, bound_s = _over_on_our_side(pending, effect)
    if asked_at < over_here:
        # An attempt of ours may still be on its way or running: wait until it is over.
        raise _wait(call, looked, over_here - asked_at)
    if bound_s is not None and asked_at < over_here + timedelta(seconds=bound_s):
        raise _wait(call, looked, over_here + timedelta(seconds=bound_s) - asked_at)
    if isinstance(looked, NotFound) and bound_s is not None:
        # No attempt of ours can still take effect, and the other side has none. Claim the
        # new attempt (a new window, from the revision read): of two deliveries that both
        # found nothing, only one calls; the other finds a fresh attempt and waits for it.
        stamped = monotonic()
        restarted = {**pending, **_window(clock.now(), effect.call_deadline_s)}
        claimed = await _claim(
            store,
            partition_key,
            effect,
            state,
            restarted,
            f"call {call.key}: another delivery is making it again",
        )
        await _within_window(store, partition_key, effect, claimed, monotonic() - stamped)
        return await _perform(store, partition_key, effect, claimed), claimed
    what = "is still in progress" if isinstance(looked, InProgress) else "has no record of it"
    unknown = "" if bound_s is not None else " and no processing bound is configured"
    raise Inconclusive(
        f"call {call.key} ({call.operation} of {pending[CallField.MESSAGE_ID]!r}) may or may "
        f"not have happened: the other side {what}{unknown}",
        pending,
    )


async def _claim[M](
    store: DocumentStore,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any],
    pending: Mapping[str, Any],
    refused: str,
) -> Mapping[str, Any]:
    """The state with ``pending`` claimed by this delivery: written from the revision read (a
    conditional write), so that no earlier reader withdraws or claims it meanwhile; transient,
    saying ``refused``, if the state moved first."""
    revision = _int(state, StateField.REVISION)
    try:
        await store.commit(partition_key, [_pending_set(effect, revision, pending)])
    except WriteRefused:
        raise TransientStoreError(refused) from None
    return {**state, StateField.PENDING: dict(pending), StateField.REVISION: revision + 1}


async def _perform[M](
    store: DocumentStore, partition_key: str, effect: ExternalEffect[M], state: Mapping[str, Any]
) -> Mapping[str, Any]:
    """Make the call ``state`` has pending; one the other side provably did not perform is
    withdrawn (conditional on the revision: if the state moved, its new owner decides)."""
    try:
        return await effect.perform(_call(state[StateField.PENDING]))
    except NotMade as not_made:
        await release_call(store, partition_key, effect, state)
        # Caused by what the other side said (NotMade is only the kit's signal).
        raise not_made.error from not_made.__cause__


def _over_on_our_side[M](
    pending: Mapping[str, Any], effect: ExternalEffect[M]
) -> tuple[datetime, float | None]:
    """When the attempt ``pending`` records is over on our side, by any instance's clock (its
    ``overBy`` plus the clock skew margin), and the processing bound that applies after it. A
    record written before senders enforced their window has no ``overBy``: its sender may have
    sent it at any time, so no bound applies (it is never made again without keys); it is
    waited for as long as a recorded attempt would be, then inconclusive."""
    skew = timedelta(seconds=effect.clock_skew_s)
    if CallField.OVER_BY in pending:
        return _moment(pending, CallField.OVER_BY) + skew, effect.processing_bound_s
    deadline = timedelta(seconds=effect.call_deadline_s)
    return _moment(pending, CallField.STARTED_AT) + 2 * deadline + skew, None


def _wait(call: Call, looked: Looked, remaining: timedelta) -> TransientStoreError:
    return TransientStoreError(
        f"call {call.key}: {type(looked).__name__} at the other side before its last attempt "
        "can be over there",
        retry_after_s=max(0.0, remaining.total_seconds()),
    )


def _moment(pending: Mapping[str, Any], name: str) -> datetime:
    return datetime.fromisoformat(str(pending[name]))


def _pending(
    message: Handled, call: Call, start: datetime, call_deadline_s: float
) -> dict[str, Any]:
    return {
        CallField.MESSAGE_ID: message.message_id,
        CallField.MESSAGE_TYPE: message.message_type,
        CallField.ABOUT: message.order_id,
        CallField.VERSION: message.version,
        CallField.REQUEST_HASH: message.request_hash,
        CallField.HASH_ALGORITHM: message.hash_algorithm,
        CallField.OPERATION: call.operation,
        CallField.KEY: call.key,
        CallField.REQUEST: dict(call.request),
        **_window(start, call_deadline_s),
    }


async def _begin[M](
    store: DocumentStore,
    inbox: Inbox,
    partition_key: str,
    effect: ExternalEffect[M],
    message: M,
    state: Mapping[str, Any] | None,
    pending: Mapping[str, Any],
) -> dict[str, Any] | None:
    """Record the call in progress; the state as it now is, or None if another writer won."""
    if state is None:
        created = {
            StateField.ID: effect.state_id,
            inbox.partition_field: partition_key,
            **effect.new_state(message),
            StateField.VERSION: 0,
            StateField.REVISION: 1,
            StateField.PENDING: dict(pending),
        }
        writes: list[Write] = [Create(created)]
        begun = created
    else:
        revision = _int(state, StateField.REVISION)
        writes = [_pending_set(effect, revision, dict(pending))]
        begun = {**state, StateField.PENDING: dict(pending), StateField.REVISION: revision + 1}
    try:
        await store.commit(partition_key, writes)
    except WriteRefused:
        return None
    return begun


async def complete_call[M](
    store: DocumentStore,
    inbox: Inbox,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any],
    pending: Mapping[str, Any],
    result: Mapping[str, Any],
    now: datetime,
) -> bool:
    """Record the call completed: its message's marker, the state at its version with what the
    call did, and the call's record, in one batch conditional on the revision of ``state``.
    False if another writer moved the state first. The one completion: the kit's deliveries and
    an operator's tool (a call found to have happened) both call it."""
    call = _call(pending)
    owner = _owner(pending)
    operations = [
        *effect.settled(state, call, result),
        set_field(StateField.VERSION, owner.version),
        set_field(StateField.REVISION, _int(state, StateField.REVISION) + 1),
        set_field(StateField.PENDING, None),
    ]
    record = {
        StateField.ID: f"call:{call.key}",
        inbox.partition_field: partition_key,
        StateField.TYPE: "call",
        **{name: pending[name] for name in (CallField.MESSAGE_ID, CallField.VERSION)},
        CallField.OPERATION: call.operation,
        CallField.KEY: call.key,
        CallField.REQUEST: dict(call.request),
        CallField.RESULT: dict(result),
        CallField.STARTED_AT: pending[CallField.STARTED_AT],
        CallField.COMPLETED_AT: document_timestamp(now),
    }
    writes: list[Write] = [
        Create(inbox.marker(owner, partition_key, PROCESSED, now)),
        Patch(effect.state_id, operations, _at(_int(state, StateField.REVISION))),
        Create(record),
    ]
    try:
        await store.commit(partition_key, writes)
    except WriteRefused:
        return False
    return True


async def release_call[M](
    store: DocumentStore, partition_key: str, effect: ExternalEffect[M], state: Mapping[str, Any]
) -> bool:
    """Clear the pending call of ``state``, known not to have happened (its sender withdrew it
    unsent, or an operator established it): its message, redelivered, makes it again under the
    same key. Conditional on the revision read; False if the state moved meanwhile."""
    revision = _int(state, StateField.REVISION)
    try:
        await store.commit(partition_key, [_pending_set(effect, revision, None)])
    except WriteRefused:
        return False
    return True


async def _move[M: Handled](
    store: DocumentStore,
    inbox: Inbox,
    message: M,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any] | None,
    now: datetime,
) -> bool:
    """No call needed: the state takes the message's version, with its marker."""
    marker = Create(inbox.marker(message, partition_key, PROCESSED, now))
    if state is None:
        created = {
            StateField.ID: effect.state_id,
            inbox.partition_field: partition_key,
            **effect.new_state(message),
            StateField.VERSION: message.version,
            StateField.REVISION: 1,
            StateField.PENDING: None,
        }
        writes: list[Write] = [marker, Create(created)]
    else:
        revision = _int(state, StateField.REVISION)
        operations = [
            set_field(StateField.VERSION, message.version),
            set_field(StateField.REVISION, revision + 1),
        ]
        writes = [marker, Patch(effect.state_id, operations, _at(revision))]
    try:
        await store.commit(partition_key, writes)
    except WriteRefused:
        return False  # a duplicate's marker, or the state moved: read again
    return True


async def _park[M: Handled](
    store: DocumentStore,
    message: M,
    partition_key: str,
    effect: ExternalEffect[M],
    inconclusive: Inconclusive,
    parking: Parking,
) -> Decision:
    """Mark the attempt found inconclusive for an operator and dead-letter the message
    NeedsReconciliation. Only that attempt: a call completed, withdrawn or begun anew since is
    decided again on the redelivery. Counted by the delivery that marks it."""
    state = await store.read(partition_key, effect.state_id)
    pending = state.get(StateField.PENDING) if state is not None else None
    if state is None or not pending or not inconclusive.names(pending):
        raise inconclusive  # resolved or moved on meanwhile: the redelivery decides again
    if pending.get(CallField.RECONCILE):
        return _parked(message, pending, str(inconclusive), parking)  # marked and counted
    revision = _int(state, StateField.REVISION)
    marked = {**pending, CallField.RECONCILE: True}
    try:
        await store.commit(partition_key, [_pending_set(effect, revision, marked)])
    except WriteRefused:
        raise inconclusive from None  # it moved: decide again on the redelivery
    return _parked(message, pending, str(inconclusive), parking, marked=True)


def _parked(
    message: Handled,
    pending: Mapping[str, Any],
    why: str,
    parking: Parking,
    *,
    marked: bool = False,
) -> Decision:
    own = _owns(pending, message)
    subject = "" if own else f" behind the call of {pending.get(CallField.MESSAGE_ID)!r}"
    where = f" ({parking.runbook})" if parking.runbook else ""
    return decided(
        Outcome.INVALID,
        message,
        deadletter_reason=NEEDS_RECONCILIATION,
        description=bound(
            f"parked{subject}: call {pending.get(CallField.KEY)} "
            f"({pending.get(CallField.OPERATION)}) needs an operator: {why}{where}"
        ),
        measures={parking.measure: 1} if marked else {},
    )


def _owner(pending: Mapping[str, Any]) -> _PendingMessage:
    return _PendingMessage(
        message_id=str(pending[CallField.MESSAGE_ID]),
        message_type=str(pending[CallField.MESSAGE_TYPE]),
        order_id=str(pending[CallField.ABOUT]),
        version=int(pending[CallField.VERSION]),
        request_hash=str(pending[CallField.REQUEST_HASH]),
        hash_algorithm=str(pending.get(CallField.HASH_ALGORITHM, HASH_ALGORITHM)),
    )


def _pending_set[M](
    effect: ExternalEffect[M], revision: int, pending: Mapping[str, Any] | None
) -> Patch:
    """The state's pending call set (or cleared) from the revision read: the one write that
    begins, claims, marks and withdraws a call."""
    operations = [
        set_field(StateField.PENDING, None if pending is None else dict(pending)),
        set_field(StateField.REVISION, revision + 1),
    ]
    return Patch(effect.state_id, operations, _at(revision))


def _at(revision: int) -> Condition:
    """From the revision read: one writer at a time moves the state."""
    return Condition(equals={StateField.REVISION: revision})


def _int(document: Mapping[str, Any] | None, name: str) -> int:
    value = (document or {}).get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"state {(document or {}).get('id')!r} has no integer {name!r}")
    return value


__all__ = [
    "NEEDS_RECONCILIATION",
    "RECONCILIATION_NEEDED",
    "Call",
    "CallingConsumerDefinition",
    "Escalation",
    "ExternalEffect",
    "Found",
    "InProgress",
    "Inconclusive",
    "Looked",
    "NotFound",
    "NotMade",
    "Parking",
    "apply_with_call",
    "call_key",
    "complete_call",
    "decide_call",
    "release_call",
]
