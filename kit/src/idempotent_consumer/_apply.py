"""Apply one message's effect in one partition exactly once: the kit's one algorithm.

A consumer's effect in a partition is a few plain writes (``_writes``) that assume the
common case (the state exists and is older, say); an effect whose writes depend on what is
stored (a difference to apply) reads it first (``writes`` is given ``read``), and an effect that
needs nothing stored reads nothing. The kit commits them with the message's inbox
marker first, in one atomic commit: **one request** when the assumption holds, the floor. When
what is stored refuses a write, nothing was written and the commit says which write:

- the marker (index 0): this consumer handled this MessageId before: a duplicate, or a mismatch
  when the content differs (``Inbox.compare``);
- one of the effect's: the effect reads what it needs and ``resolve`` s: other writes to try
  (``Retry``: the order does not exist yet, so create it), the same writes again (``Again``: it
  changed under us), ``Stale`` (a version at or below the stored one: its marker alone is
  written, so its redelivery is a duplicate), or ``Reject`` (dead-letter with the consumer's
  reason, nothing written). It may also raise a store error the consumer classifies.

A partition behind a gate (``_consumer``) keeps **no marker** (``inbox`` None): the
gate's marker already tells this MessageId's repeat and its mismatch, and the effect's own
stored version tells a repeat in the partition: ``Stale`` at the message's own version is a
duplicate, above it stale, and nothing is written for either. Such a partition holds what the
effect keeps and nothing per message, so it never grows with the count of messages received.

Every step is one atomic commit or a read, so a stop anywhere leaves either nothing or the whole
effect with its marker (or its version); the redelivery then meets it or does the work. Racing
deliveries
are settled by the store: a commit whose condition no longer holds is refused whole and decided
again from what is stored, at most ``MAX_ROUNDS`` times (each round means another writer
committed, or an effect's assumption of what is stored missed; more is a storm, retried as
transient).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from idempotent_consumer._decision import Decision, DocumentStore, Outcome, decided
from idempotent_consumer._errors import DocumentExists, TransientStoreError, WriteRefused
from idempotent_consumer._inbox import PROCESSED, Handled, Inbox
from idempotent_consumer._writes import Create, Write

# A missed assumption (an effect that writes before it reads: ``_consumer.Blind``,
# ``_consumer.Foreseeing``), a shortfall's second batch, and one writer overtaking it.
MAX_ROUNDS = 4

Read = Callable[[str], Awaitable[Mapping[str, Any] | None]]  # a document of the partition, by id


@dataclass(frozen=True, slots=True)
class Retry:
    """Commit these writes instead (with the marker)."""

    writes: Sequence[Write]


@dataclass(frozen=True, slots=True)
class Again:
    """What was stored changed meanwhile: commit the effect's first writes again."""


@dataclass(frozen=True, slots=True)
class Stale:
    """A version at or below ``stored_version``: nothing to apply."""

    stored_version: int


@dataclass(frozen=True, slots=True)
class Reject:
    """The message contradicts what is stored (a change after a cancellation): dead-letter it
    with the consumer's ``reason``, nothing written."""

    reason: str
    description: str
    stored_version: int | None = None


Resolution = Retry | Again | Stale | Reject
M_contra = TypeVar("M_contra", contravariant=True)


class Effect(Protocol[M_contra]):
    """A consumer's effect in one partition."""

    async def writes(self, message: M_contra, read: Read) -> Sequence[Write] | Stale:
        """The writes of the common case, committed after the marker; ``read`` reads a document
        of the partition, for an effect whose writes depend on what is stored, and what it read
        may already say the message is ``Stale`` (its marker is then written alone, after the
        kit checked it is not a redelivery: a duplicate stays a duplicate)."""
        ...

    async def resolve(
        self, message: M_contra, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        """What to do now that ``write`` (one of the effect's) was refused as ``refused`` says
        (``DocumentExists``, ``DocumentMissing``, ``ConditionFailed``); ``read`` reads a document
        of the partition."""
        ...


async def apply_once[M: Handled](
    store: DocumentStore,
    inbox: Inbox | None,
    message: M,
    partition_key: str,
    effect: Effect[M],
    *,
    now: datetime,
) -> Decision:
    """Apply ``effect`` of ``message`` in ``partition_key`` once; the decision says how it went
    (processed, duplicate, mismatch, stale, or invalid with the effect's reason). ``inbox``
    None: a partition without markers, the effect's version telling a repeat (module
    docstring). Raises the store's transient and systemic errors for the consumer's table."""

    async def read(document_id: str) -> Mapping[str, Any] | None:
        return await store.read(partition_key, document_id)

    plan = await effect.writes(message, read)
    for _ in range(MAX_ROUNDS):
        if isinstance(plan, Stale):
            resolution: Resolution = plan  # what the effect read already decides
        else:
            writes = plan
            marked = [] if inbox is None else [inbox.marker(message, partition_key, PROCESSED, now)]
            try:
                await store.commit(partition_key, [*map(Create, marked), *writes])
                return decided(Outcome.PROCESSED, message)
            except WriteRefused as refused:
                if inbox is not None and refused.index == 0 and isinstance(refused, DocumentExists):
                    return await inbox.compare(store, message, partition_key)
                # The marker, if any, comes first; the effect's writes follow it.
                failed_write = writes[refused.index - len(marked)]
                resolution = await effect.resolve(message, refused, failed_write, read)
        match resolution:
            case Retry(writes=retried):
                plan = retried
            case Again():
                plan = await effect.writes(message, read)
            case Stale(stored_version=version):
                if inbox is None:
                    # The effect's own version is the record: nothing to write either way.
                    outcome = Outcome.DUPLICATE if version == message.version else Outcome.STALE
                    return decided(outcome, message, stored_version=version)
                return await inbox.record_stale(
                    store, message, partition_key, stored_version=version, now=now
                )
            case Reject(reason=reason, description=description, stored_version=version):
                return decided(
                    Outcome.INVALID,
                    message,
                    deadletter_reason=reason,
                    description=description,
                    stored_version=version,
                )
    raise TransientStoreError(
        f"{message.message_type} {message.message_id!r}: what is stored in {partition_key!r} "
        f"changed under {MAX_ROUNDS} attempts"
    )
