"""A consumer as a user writes one: its name, its contract, the partitions a message changes and
its effect in each; the kit decides the rest (``decide``).

    units_sold = ConsumerDefinition(
        name="analytics.units-sold",       # part of every marker key, forever
        partition_field="sku",              # the container's partition key
        parse=parse_units_sold,             # IncomingMessage -> valid message, or InvalidMessage
        partitions=lambda sold: sold.skus,  # the partitions one message changes
        effect=lambda sold, sku: CountUnits(sold, sku),  # its writes in one partition
    )

A consumer whose partitions depend on what is stored (an amendment must also release the SKUs
only an earlier version of the order had) has a ``gate``: an effect in one partition of its own
(the order's index), committed first with the message's marker. It carries the version check
for the whole message: a stale message stops there and writes nothing in any other partition;
then ``Gate.partitions`` says which partitions it changes (those the gate has seen for this
order), and a later version always visits every partition an earlier one could have written,
because it passes the gate after it. A redelivery goes on past the gate only if the gate applied
the message the first time (its marker there says so): one the gate found stale is done.

For each partition a message changes, the effect's writes are committed once with the
message's inbox marker (``shared.kit.apply.apply_once``: one atomic commit, one request when the
common case holds); partitions are independent, so a stop after two of five leaves two complete,
consistent partitions and the redelivery finishes the other three without touching the two
(their markers make them duplicates). The message's outcome is the partitions' together:
processed if any partition applied it, a duplicate if every one had, stale if none applied it
and some were stale. Partitions are visited in sorted order and a mismatch or an invalid outcome
of one stops there and is the message's (it is dead-lettered).

The limit of markers kept per partition: the same MessageId with other content is told apart in
the partitions the two contents share (the first of them stops the message before any later
one is written); content whose partitions all differ from the first's is applied as a new
message, and partitions before the first shared one may be written. For events whose MessageId
is their eventId (derived from what they are: docs/events.md) two contents never share one.

A failure is classified by what a redelivery can fix, as for every consumer of
the kit: transient and systemic are retried within the delivery, anything else held, then
abandoned (``shared.kit.service.Consumer``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from shared.kit.apply import Effect, Read, apply_once
from shared.kit.decision import (
    AboutMessage,
    Decision,
    DocumentStore,
    IncomingMessage,
    Outcome,
    failed,
    refused,
)
from shared.kit.errors import InvalidMessage, SystemicStoreError, TransientStoreError
from shared.kit.inbox import PROCESSED, Handled, Inbox

# When partitions disagree, the one that decides the message: the first of these found.
_DECIDING = (Outcome.PROCESSED, Outcome.STALE)
# A partition's outcome that decides the message at once (it is dead-lettered).
_STOPPING = frozenset({Outcome.MISMATCH, Outcome.INVALID})


class Gate[M](Effect[M], Protocol):
    """An effect in one partition of its own, committed first (module docstring)."""

    @property
    def partition_key(self) -> str: ...

    async def partitions(self, message: M, read: Read) -> Sequence[str]:
        """Once the gate has this message (committed now, or before: a redelivery), the
        partitions it changes besides the definition's own; ``read`` reads the gate's
        partition."""
        ...


@runtime_checkable
class Measured(Protocol):
    """An effect that counts business facts of what it committed (units short of stock ...):
    summed over the partitions that applied the message, into ``Decision.measures``."""

    @property
    def measures(self) -> Mapping[str, int]: ...


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
) -> Decision:
    """Validate, apply in every partition once, and classify. Never raises for anything a
    message can cause."""
    try:
        message = definition.parse(incoming)
    except InvalidMessage as invalid:
        return refused(incoming, invalid, incoming.subject)
    inbox = definition.inbox(marker_ttl_s)
    return await classified(message, _apply_everywhere(definition, message, store, inbox, now))


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
) -> Decision:
    decisions: list[Decision] = []
    measures: Counter[str] = Counter()
    partitions = set(definition.partitions(message))
    if definition.gate is not None:
        gate = definition.gate(message)
        decision = await apply_once(store, inbox, message, gate.partition_key, gate, now=now)
        if decision.outcome in _STOPPING or decision.outcome is Outcome.STALE:
            return decision  # the gate decides for the whole message: nothing else written
        if decision.outcome is Outcome.DUPLICATE:
            # A redelivery: go on only if the gate applied it; one found stale stays so (a
            # newer version passed the gate and did not count on this one's partitions).
            first = await inbox.handled_as(store, message, gate.partition_key)
            if first != PROCESSED:
                return decision
        decisions.append(decision)
        partitions.update(await gate.partitions(message, _reader(store, gate.partition_key)))
    # In a fixed order, so that two deliveries of one message meet its partitions alike; a
    # mismatch or an invalid outcome stops there: no later partition is written.
    for partition in sorted(partitions):
        effect = definition.effect(message, partition)
        decision = await apply_once(store, inbox, message, partition, effect, now=now)
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


def _reader(store: DocumentStore, partition_key: str) -> Read:
    async def read(document_id: str) -> Mapping[str, Any] | None:
        return await store.read(partition_key, document_id)

    return read
