"""Apply one message's effect **outside** the store's transaction exactly once: a call another
system makes (a payment captured, an email sent), which no batch can hold with the marker.

The shape every description of the pattern agrees on, and how this kit makes it safe:

1. **In progress**: before the call, the consumer's state document (one per entity, in the
   entity's partition) records the call it is about to make under ``pending``: the operation,
   its idempotency key (derived from the consumer name, the MessageId and the operation: the same
   on every attempt, ``call_key``) and the request, written from the revision it read (a
   conditional patch), so that two deliveries can never start two different calls for one
   entity. One write.
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
while the first is still running: retried within the delivery). A side that honours **no** key
is called again only when its lookup says it has no such operation and the attempt that may have
been sent is past its deadline (``call_deadline_s``: the client gave up on it by then), and only
by the one delivery that claims the new attempt (a conditional write of its start); a lookup that
says the operation is still in progress after that deadline (the other side is still working on
an attempt our client gave up on) is inconclusive, retried within the delivery and
redelivered, and after ``park_after_deliveries`` deliveries the message is **parked**: dead-lettered
``NeedsReconciliation`` with the pending call marked for an operator, counted
(``RECONCILIATION_NEEDED``) and alerted, never retried blindly. Later messages of the same entity
are parked behind it (the state cannot move past an unknown call) until an operator resolves it
(``python -m ops payments``), and are resubmitted then.

A version at or below the state's is stale, as in ``apply_once``: its marker alone. Results the
other side gives about the request itself (a declined card, a refused refund) are outcomes the
instance records in the state (``settled``) and counts (``measures``), completed, not retried.

Errors: the instance's ``perform`` and ``look_up`` raise the kit's ``TransientStoreError`` for
what a retry can fix (a timeout, a 5xx, a 409 for a call in progress) and ``SystemicStoreError``
for what it cannot (a refused credential, a key reused with another payload); the consumer's
table classifies them as for a store. Pure: no Azure, no I/O beyond the ports it is handed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from shared.clock import document_timestamp
from shared.kit.consumer import classified
from shared.kit.decision import (
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    decided,
    refused,
)
from shared.kit.errors import InvalidMessage, TransientStoreError, WriteRefused, bound
from shared.kit.inbox import PROCESSED, Handled, Inbox
from shared.kit.message import HASH_ALGORITHM
from shared.kit.writes import Condition, Create, Patch, PatchOperation, Write, set_field

NEEDS_RECONCILIATION = "NeedsReconciliation"  # the dead-letter reason of a parked call
RECONCILIATION_NEEDED = "payments.reconciliation_needed"  # its measure
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
    STARTED_AT = "startedAt"
    RECONCILE = "reconcile"
    RESULT = "result"
    COMPLETED_AT = "completedAt"


def call_key(consumer: str, message_id: str, operation: str) -> str:
    """The idempotency key of one operation of one message for one consumer: a UUIDv5 of the
    three (RFC 9562), the same on every attempt, computable by an operator."""
    return str(uuid.uuid5(_KEY_NAMESPACE, f"{consumer}\n{message_id}\n{operation}"))


@dataclass(frozen=True, slots=True)
class Call:
    """One call to make: its ``operation``, its idempotency ``key`` and the JSON ``request``
    the instance makes it from (stored in the in-progress record before the call)."""

    operation: str
    key: str
    request: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Found:
    """The other side's lookup found the call's operation: its result."""

    result: Mapping[str, Any]


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
        """How long after its start an attempt is certainly over on our side (its timeout)."""
        ...

    @property
    def park_after_deliveries(self) -> int:
        """After this many deliveries an inconclusive call is parked for an operator."""
        ...

    def new_state(self, message: M) -> dict[str, Any]:
        """The instance's fields of a state document created by ``message``."""
        ...

    def plan(self, message: M, state: Mapping[str, Any] | None) -> Call | None:
        """The call ``message`` needs given the stored state (None: nothing to call)."""
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
    effect there."""

    name: str
    partition_field: str
    parse: Callable[[IncomingMessage], M]
    partition: Callable[[M], str]
    effect: Callable[[M], ExternalEffect[M]]


async def decide_call[M: Handled](
    definition: CallingConsumerDefinition[M],
    incoming: IncomingMessage,
    store: DocumentStore,
    *,
    marker_ttl_s: int,
    now: datetime,
) -> Decision:
    """Validate, apply through the call once, and classify (``shared.kit.consumer.classified``).
    Never raises for anything a message can cause."""
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
        now=now,
    )
    return await classified(message, work)


class Inconclusive(TransientStoreError):
    """A call that may or may not have happened, which the other side cannot tell yet."""


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
    now: datetime,
) -> Decision:
    """Apply ``message`` through ``effect`` once (module docstring). Raises the store's and the
    effect's transient and systemic errors for the consumer's table; an inconclusive call is
    transient until ``park_after_deliveries``, then parked."""
    try:
        return await _apply(store, inbox, message, partition_key, effect, now)
    except Inconclusive as inconclusive:
        if (incoming.delivery_count or 1) < effect.park_after_deliveries:
            raise
        return await _park(store, message, partition_key, effect, inconclusive)


async def _apply[M: Handled](
    store: DocumentStore,
    inbox: Inbox,
    message: M,
    partition_key: str,
    effect: ExternalEffect[M],
    now: datetime,
) -> Decision:
    # The business counts of the calls this delivery completed, its own and any it finished on
    # another message's behalf: counted once, by the delivery whose completion committed.
    counted: Counter[str] = Counter()
    for _ in range(MAX_ROUNDS):
        state = await store.read(partition_key, effect.state_id)
        pending = state.get(StateField.PENDING) if state is not None else None
        if state is not None and pending:
            # Finish whoever's call is in progress first: nothing waits for it to expire.
            if pending.get(CallField.RECONCILE):
                return _parked(message, pending, "its call is parked for reconciliation")
            result, state = await _resume(store, partition_key, effect, state, pending, now)
            done = await complete_call(
                store, inbox, partition_key, effect, state, pending, result, now
            )
            if done:
                counted.update(effect.measures(result))
            if done and pending[CallField.MESSAGE_ID] == message.message_id:
                return decided(Outcome.PROCESSED, message, measures=_positive(counted))
            continue  # another message's call, or completed meanwhile: read again
        version = _int(state, StateField.VERSION) if state is not None else 0
        if version >= message.version:
            decision = await inbox.record_stale(
                store, message, partition_key, stored_version=version, now=now
            )
            return replace(decision, measures=_positive(counted))
        call = effect.plan(message, state)
        if call is None:  # nothing to call: the state takes the version, with the marker
            if await _move(store, inbox, message, partition_key, effect, state, now):
                return decided(Outcome.PROCESSED, message, measures=_positive(counted))
            continue
        pending = _pending(message, call, now)
        begun = await _begin(store, inbox, partition_key, effect, message, state, pending)
        if begun is None:
            continue  # another delivery began or moved it meanwhile: read again
        result = await effect.perform(_call(pending))
        if await complete_call(store, inbox, partition_key, effect, begun, pending, result, now):
            counted.update(effect.measures(result))
            return decided(Outcome.PROCESSED, message, measures=_positive(counted))
    raise TransientStoreError(
        f"{message.message_type} {message.message_id!r}: the state of {partition_key!r} changed "
        f"under {MAX_ROUNDS} attempts"
    )


def _positive(counted: Counter[str]) -> dict[str, int]:
    return {name: count for name, count in counted.items() if count > 0}


def _call(pending: Mapping[str, Any]) -> Call:
    return Call(pending[CallField.OPERATION], pending[CallField.KEY], pending[CallField.REQUEST])


async def _resume[M](
    store: DocumentStore,
    partition_key: str,
    effect: ExternalEffect[M],
    state: Mapping[str, Any],
    pending: Mapping[str, Any],
    now: datetime,
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The result of a call found in progress, and the state to complete it from: found at the
    other side, or made again when that is safe (module docstring)."""
    call = _call(pending)
    looked = await effect.look_up(call)
    if isinstance(looked, Found):
        return looked.result, state
    if effect.honours_keys:
        # The same key: the other side answers the first result, or 409 while it runs.
        return await effect.perform(call), state
    started = datetime.fromisoformat(str(pending[CallField.STARTED_AT]))
    if isinstance(looked, NotFound) and (now - started).total_seconds() >= effect.call_deadline_s:
        # Its side has no such operation and no attempt of ours can still reach it. Claim the
        # new attempt first (a new start, from the revision read): of two deliveries that both
        # found nothing, only one calls; the other finds a fresh attempt and waits for it.
        revision = _int(state, StateField.REVISION)
        restarted = {**pending, CallField.STARTED_AT: document_timestamp(now)}
        operations = [
            set_field(StateField.PENDING, restarted),
            set_field(StateField.REVISION, revision + 1),
        ]
        try:
            await store.commit(partition_key, [Patch(effect.state_id, operations, _at(revision))])
        except WriteRefused:
            raise TransientStoreError(
                f"call {call.key}: another delivery is making it again"
            ) from None
        claimed = {**state, StateField.PENDING: restarted, StateField.REVISION: revision + 1}
        return await effect.perform(call), claimed
    if (now - started).total_seconds() < effect.call_deadline_s:
        # An attempt of ours may still be on its way or running: wait for its deadline.
        raise TransientStoreError(
            f"call {call.key}: {type(looked).__name__} at the other side within "
            f"{effect.call_deadline_s} s of its last attempt"
        )
    raise Inconclusive(
        f"call {call.key} ({call.operation} of {pending[CallField.MESSAGE_ID]!r}) may or may "
        "not have happened: the other side says it is still in progress"
    )


def _pending(message: Handled, call: Call, now: datetime) -> dict[str, Any]:
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
        CallField.STARTED_AT: document_timestamp(now),
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
        operations = [
            set_field(StateField.PENDING, dict(pending)),
            set_field(StateField.REVISION, revision + 1),
        ]
        writes = [Patch(effect.state_id, operations, _at(revision))]
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
    an operator's ``python -m ops payments resolve --happened`` both call it."""
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
    """Clear the pending call of ``state`` (an operator established that it did not happen):
    its message, redelivered, makes it again under the same key. Conditional on the revision
    read; False if the state moved meanwhile."""
    revision = _int(state, StateField.REVISION)
    operations = [
        set_field(StateField.PENDING, None),
        set_field(StateField.REVISION, revision + 1),
    ]
    try:
        await store.commit(partition_key, [Patch(effect.state_id, operations, _at(revision))])
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
) -> Decision:
    """Mark the pending call for an operator and dead-letter the message NeedsReconciliation."""
    state = await store.read(partition_key, effect.state_id)
    pending = state.get(StateField.PENDING) if state is not None else None
    if state is None or not pending:
        raise inconclusive  # resolved meanwhile: the redelivery goes on
    if not pending.get(CallField.RECONCILE):
        revision = _int(state, StateField.REVISION)
        marked = {**pending, CallField.RECONCILE: True}
        operations = [
            set_field(StateField.PENDING, marked),
            set_field(StateField.REVISION, revision + 1),
        ]
        try:
            await store.commit(partition_key, [Patch(effect.state_id, operations, _at(revision))])
        except WriteRefused:
            raise inconclusive from None  # it moved: decide again on the redelivery
    return _parked(message, pending, str(inconclusive))


def _parked(message: Handled, pending: Mapping[str, Any], why: str) -> Decision:
    own = pending.get(CallField.MESSAGE_ID) == message.message_id
    subject = "" if own else f" behind the call of {pending.get(CallField.MESSAGE_ID)!r}"
    return decided(
        Outcome.INVALID,
        message,
        deadletter_reason=NEEDS_RECONCILIATION,
        description=bound(
            f"parked{subject}: call {pending.get(CallField.KEY)} "
            f"({pending.get(CallField.OPERATION)}) needs an operator: {why} "
            "(docs/operations.md, Payments needing reconciliation)"
        ),
        measures={RECONCILIATION_NEEDED: 1} if own else {},
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
    "ExternalEffect",
    "Found",
    "InProgress",
    "Inconclusive",
    "Looked",
    "NotFound",
    "apply_with_call",
    "call_key",
    "complete_call",
    "decide_call",
    "release_call",
]
