"""A consumer as a user writes one: its name, its contract, the partitions a message changes and
its effect in each; the kit decides the rest (``decide``).

    units_sold = ConsumerDefinition(
        name="analytics.units-sold",       # part of every marker key, forever
        partition_field="sku",              # the container's partition key
        parse=parse_units_sold,             # IncomingMessage -> valid message, or InvalidMessage
        partitions=lambda sold: sold.skus,  # the partitions one message changes
        effect=lambda sold, sku: CountUnits(sold, sku),  # its writes in one partition
    )

Without a gate, for each partition a message changes, the effect's writes are committed once
with the message's inbox marker (``_apply.apply_once``: one atomic commit, one
request when the common case holds); partitions are independent, so a stop after two of five
leaves two complete, consistent partitions and the redelivery finishes the other three without
touching the two (their markers make them duplicates). The message's outcome is the
partitions' together: processed if any partition applied it, a duplicate if every one had,
stale if none applied it and some were stale. Partitions are visited in sorted order and a
mismatch or an invalid outcome of one stops there and is the message's (it is dead-lettered).
A marker per message per partition is history: such a partition grows with the messages it
receives for as long as markers are kept (``Settings.inbox_marker_ttl_s``), which is fine for a
partition of one order and not for one every order shares (a SKU): give that consumer a gate.

**The gate.** A consumer whose partitions depend on what is stored (an amendment must also
release the SKUs only an earlier version of the order had) has one: an effect in a partition of
its own (the order's index), committed first with the message's marker. It carries the version
check and the MessageId check for the whole message: a stale or mismatched message stops there
and writes nothing anywhere else; then ``Gate.partitions`` says which partitions it changes
(those the gate has seen for this order), and a later version always visits every partition an
earlier one could have written, because it passes the gate after it and sets each to what it
wants from what is stored. Behind the gate a partition keeps **no marker**: the effect's stored
version tells a repeat (``apply_once`` with no inbox), so a partition every order shares holds
only what its effects keep, never one record per message.

What keeps an older version from writing after a later one (the trap of a partition without
markers): a later version may *remove* what an older one would find (a released reservation
leaves), and a delivery of the older version still running, or redelivered, would then see
nothing and write its own version again, for good. Two guards, each enforced where it is made:

- **A redelivery goes on past the gate only while the gate is still at its message** (its
  marker says the gate applied it, ``Gate.partitions`` finds the gate at its version, and its
  first commit behind the gate is preceded by ``Gate.still_at``'s commit, refused once a later
  message has passed: a write, because another instance's write may not be visible to a read
  yet: Cosmos DB's session consistency promises a client its own writes, not another's, learn.
  microsoft.com/azure/cosmos-db/consistency-levels). Once a later message passed, it takes over
  every partition, and the redelivery is a duplicate that writes nothing more.
- **A delivery starts no commit behind the gate later than ``WRITE_WINDOW_S`` after it passed
  the gate**, counted on this process's monotonic clock from a moment taken *before* its gate
  request left (so never later than the gate's commit) and checked before every commit
  (``_BehindGate``); past it the attempt fails as transient and its retry passes the gate
  again. A commit started inside the window lands within ``LANDING_S`` (the adapters'
  operation deadline). So what an effect leaves for older deliveries (a released reservation
  kept as a zero tombstone) is safe once it outlives ``OUTLIVES_DELIVERIES_S`` counted from its
  own write: any delivery that could still write passed the gate before the write that left it.
  The effect sets that as its document's ``ttl`` (plus the store's own rounding), and the
  partition returns to what its effects keep once the tombstones expire. No clock is compared
  across machines: the window is a duration on this process's monotonic clock, the ttl one on
  the store's, so a skew between clocks does not matter and a drift between their rates is
  far inside the effect's margin (its ttl is several times ``OUTLIVES_DELIVERIES_S``).

The limit of markers kept per partition (no gate): the same MessageId with other content is
told apart in the partitions the two contents share (the first of them stops the message before
any later one is written); content whose partitions all differ from the first's is applied as a
new message, and partitions before the first shared one may be written. For messages whose
MessageId is derived from what they are (a producer's deterministic event id: one event, one id,
on every send) two contents never share one. With a gate every message meets the gate's marker
first.

A failure is classified by what a redelivery can fix, as for every consumer of
the kit: transient and systemic are retried within the delivery, anything else held, then
abandoned (``_service.Consumer``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from idempotent_consumer._apply import Effect, Read, apply_once
from idempotent_consumer._decision import (
    AboutMessage,
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    failed,
    refused,
)
from idempotent_consumer._errors import (
    InvalidMessage,
    SystemicStoreError,
    TransientStoreError,
    WriteRefused,
)
from idempotent_consumer._inbox import PROCESSED, Handled, Inbox
from idempotent_consumer._writes import Write

# Seconds after a delivery passed the gate during which it may start a commit behind it: a
# delivery's attempt takes well under a second when the store answers (the lock is 60 s); past it
# the attempt fails as transient and its retry passes the gate again (module docstring).
WRITE_WINDOW_S = 60.0
# Seconds a commit started inside the window may take to land: the adapters cancel an operation
# after their deadline (the Cosmos DB store's operation deadline, ``OPERATION_TIMEOUT_S``, 20 s,
# below this), and Cosmos DB runs a transactional batch within 5 s or fails it (learn.microsoft.
# com/azure/cosmos-db/nosql/transactional-batch, "Limitations").
LANDING_S = 30.0
# What a record left for older deliveries must outlive, counted from its own write.
OUTLIVES_DELIVERIES_S = WRITE_WINDOW_S + LANDING_S
# A monotonic clock in seconds (time.monotonic): windows, never document times.
Monotonic = Callable[[], float]

# When partitions disagree, the one that decides the message: the first of these found.
_DECIDING = (Outcome.PROCESSED, Outcome.STALE)
# A partition's outcome that decides the message at once (it is dead-lettered).
_STOPPING = frozenset({Outcome.MISMATCH, Outcome.INVALID})


class Gate[M](Effect[M], Protocol):
    """An effect in one partition of its own, committed first (module docstring)."""

    @property
    def partition_key(self) -> str: ...

    async def partitions(self, message: M, read: Read, *, again: bool) -> Sequence[str] | None:
        """Once the gate has this message, the partitions it changes besides the definition's
        own; ``read`` reads the gate's partition. ``again``: a redelivery (the gate applied
        this message on an earlier delivery, not now): None when a later message has passed
        the gate since, which then takes over every partition."""
        ...

    def still_at(self, message: M) -> Sequence[Write]:
        """Writes to the gate's partition that commit only while the gate is still at
        ``message`` and change nothing it holds (the same values set again): a redelivery's
        proof, by the store, that no later message has passed the gate."""
        ...


@runtime_checkable
class Measured(Protocol):
    """An effect that counts business facts of what it committed (units short of stock ...):
    summed over the partitions that applied the message, into ``Decision.measures``."""

    @property
    def measures(self) -> Mapping[str, int]: ...


@runtime_checkable
class Blind(Protocol):
    """An effect that commits before it reads when what it assumes is the common case (a first
    arrival: nothing stored yet). Behind a gate, a redelivery tells it to read first: what it
    would create is likely there, and a read that finds it costs less than a refused commit and
    leaves a completed message's redelivery writing nothing at all."""

    def read_first(self) -> None: ...


@runtime_checkable
class Foreseeing(Protocol):
    """An effect behind a gate that takes what its partition holds from what the gate read (an
    order's index that keeps what the order's last version wanted in each SKU), so that it
    commits before it reads: one request where a read and a commit would be two. The gate's
    read only saves the effect's: every write it makes is conditional on what it assumes, and a
    refused one makes it read (its ``resolve``). A redelivery's ``Blind.read_first`` wins."""

    def foresee(self, gate: object) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsumerDefinition[M: Handled]:
    """What a consumer supplies; see the module docstring."""

    name: str
    partition_field: str
    parse: Callable[[IncomingMessage], M]
    partitions: Callable[[M], Sequence[str]]
    effect: Callable[[M, str], Effect[M]]
    gate: Callable[[M], Gate[M]] | None = None

    def inbox(self, marker_ttl_s: int) -> Inbox:
        return Inbox(self.name, self.partition_field, marker_ttl_s)


async def decide[M: Handled](
    definition: ConsumerDefinition[M],
    incoming: IncomingMessage,
    store: DocumentStore,
    *,
    marker_ttl_s: int,
    now: datetime,
    clock: Monotonic = time.monotonic,
) -> Decision:
    """Validate, apply in every partition once, and classify. Never raises for anything a
    message can cause. ``clock``: the monotonic clock of the write window behind a gate."""
    try:
        message = definition.parse(incoming)
    except InvalidMessage as invalid:
        return refused(incoming, invalid, incoming.subject)
    inbox = definition.inbox(marker_ttl_s)
    work = _apply_everywhere(definition, message, store, inbox, now, clock)
    return await classified(message, work)


async def classified(message: AboutMessage, work: Awaitable[Decision]) -> Decision:
    """The decision ``work`` reaches about a valid message, or its failure classified by what
    a redelivery can fix: the one table of every consumer of the kit."""
    try:
        return await work
    except TransientStoreError as error:
        return failed(Outcome.TRANSIENT, message, error)
    except SystemicStoreError as error:
        return failed(Outcome.SYSTEMIC, message, error)
    except Exception as error:  # noqa: BLE001 - anything else: held, then abandoned
        return failed(Outcome.UNEXPECTED, message, error)


async def _apply_everywhere[M: Handled](
    definition: ConsumerDefinition[M],
    message: M,
    store: DocumentStore,
    inbox: Inbox,
    now: datetime,
    clock: Monotonic,
) -> Decision:
    decisions: list[Decision] = []
    measures: Counter[str] = Counter()
    partitions = set(definition.partitions(message))
    marked: Inbox | None = inbox
    again = False  # a redelivery the gate applied before
    passed: Gate[M] | None = None  # the gate, once passed: what it read, for ``Foreseeing``
    if definition.gate is not None:
        gate = definition.gate(message)
        # Taken before the gate's first request leaves: never later than its commit.
        passed_at: float | None = clock()
        decision = await apply_once(store, inbox, message, gate.partition_key, gate, now=now)
        if decision.outcome in _STOPPING or decision.outcome is Outcome.STALE:
            return decision  # the gate decides for the whole message: nothing else written
        again = decision.outcome is Outcome.DUPLICATE
        if again:
            # A redelivery: go on only if the gate applied it; one found stale stays so (a
            # newer version passed the gate and did not count on this one's partitions).
            first = await inbox.handled_as(store, message, gate.partition_key)
            if first is None:
                # Refused as existing, then not found: a replica behind (or it just expired).
                raise TransientStoreError(
                    f"the gate's marker of {message.message_id!r} conflicted but could not be read"
                )
            if first != PROCESSED:
                return decision
            passed_at = None  # its window opens at its proof that the gate is still at it
        found = await gate.partitions(message, _reader(store, gate.partition_key), again=again)
        if found is None:
            return decision  # a later message passed the gate: it takes over every partition
        decisions.append(decision)
        partitions.update(found)
        store = _BehindGate(store, gate, message, passed_at, clock)
        passed = gate
        marked = None  # behind the gate, the effects' versions tell a repeat
    # In a fixed order, so that two deliveries of one message meet its partitions alike; a
    # mismatch or an invalid outcome stops there: no later partition is written.
    for partition in sorted(partitions):
        effect = definition.effect(message, partition)
        if passed is not None and isinstance(effect, Foreseeing):
            effect.foresee(passed)
        if again and isinstance(effect, Blind):
            effect.read_first()
        try:
            decision = await apply_once(store, marked, message, partition, effect, now=now)
        except _Superseded:
            return decisions[0]  # the gate's duplicate: a later message took over
        decisions.append(decision)
        if decision.outcome in _STOPPING:
            return decision
        if decision.outcome is Outcome.PROCESSED and isinstance(effect, Measured):
            measures.update(effect.measures)
    counted = {name: count for name, count in measures.items() if count}
    for outcome in _DECIDING:
        for decision in decisions:
            if decision.outcome is outcome:
                return replace(decision, measures=counted)
    return decisions[0] if decisions else Decision(Outcome.PROCESSED, order_id=message.order_id)


class _Superseded(Exception):
    """A redelivery's ``Gate.still_at`` was refused: a later message has passed the gate."""


class _BehindGate[M: Handled]:
    """The store as the partitions behind a gate see it (module docstring): every commit starts
    within ``WRITE_WINDOW_S`` of the moment this delivery passed the gate, and a redelivery's
    first commit is preceded by its proof that the gate is still at its message. Reads pass
    through: they write nothing, and every commit is conditional on what they saw."""

    def __init__(
        self,
        store: DocumentStore,
        gate: Gate[M],
        message: M,
        passed_at: float | None,
        clock: Monotonic,
    ) -> None:
        self._store = store
        self._gate = gate
        self._message = message
        self._passed_at = passed_at  # None: a redelivery that has not proved it yet
        self._clock = clock

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        if self._passed_at is None:
            proving = self._clock()  # before the proof leaves: never later than its commit
            try:
                await self._store.commit(
                    self._gate.partition_key, self._gate.still_at(self._message)
                )
            except WriteRefused as refused:
                raise _Superseded from refused
            self._passed_at = proving
        elapsed = self._clock() - self._passed_at
        if elapsed >= WRITE_WINDOW_S:
            raise TransientStoreError(
                f"{elapsed:.0f} s since this delivery passed the gate, past the "
                f"{WRITE_WINDOW_S:g} s window in which it may write behind it: its retry passes "
                "the gate again"
            )
        await self._store.commit(partition_key, writes)


def _reader(store: DocumentStore, partition_key: str) -> Read:
    async def read(document_id: str) -> Mapping[str, Any] | None:
        return await store.read(partition_key, document_id)

    return read
