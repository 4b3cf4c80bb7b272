"""The writes a consumer asks its store for, as plain data: what to create, what to patch and on
which condition. One ``Sequence[Write]`` is one atomic commit in one partition (on Cosmos DB, one
transactional batch: ``idempotent_consumer.cosmos``), so the inbox marker, the change and its
outbox event are written together or not at all.

The condition is a conjunction of comparisons on the stored document's top-level fields, never a
store's query text: the adapter renders it (a Cosmos DB filter predicate), the in-memory double
evaluates it, and both are held to the same contract suite (``idempotent_consumer.testing``).

Pure data: no Azure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PatchOperation = dict[str, Any]  # {"op": "set", "path": "/field", "value": ...}


@dataclass(frozen=True, slots=True)
class Room:
    """The stored integer ``counter`` plus ``amount`` stays at most the stored integer ``limit``
    (``reserved + 3 <= onHand``): a counter that concurrent writers move can never pass
    another field, because the store checks it in the commit."""

    counter: str
    amount: int
    limit: str


@dataclass(frozen=True, slots=True)
class Condition:
    """Every stored field in ``below`` is an integer lower than its value, every field in
    ``at_least`` an integer at least its value, every field in ``equals`` equals its value, and
    every ``room`` holds. A missing field counts as its value in ``defaults``, and without one
    fails the condition."""

    below: Mapping[str, int] = field(default_factory=dict)
    equals: Mapping[str, str | int] = field(default_factory=dict)
    defaults: Mapping[str, str | int] = field(default_factory=dict)
    at_least: Mapping[str, int] = field(default_factory=dict)
    room: Sequence[Room] = ()

    def holds_for(self, document: Mapping[str, Any]) -> bool:
        """The reference semantics (the double evaluates this; the adapter's rendering is held
        to it by the contract suite)."""

        def stored(name: str) -> Any:
            return document[name] if name in document else self.defaults.get(name)

        def integer(name: str) -> int | None:
            value = stored(name)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        for name, limit in self.below.items():
            value = integer(name)
            if value is None or not value < limit:
                return False
        for name, floor in self.at_least.items():
            value = integer(name)
            if value is None or not value >= floor:
                return False
        for room in self.room:
            counter, ceiling = integer(room.counter), integer(room.limit)
            if counter is None or ceiling is None or not counter + room.amount <= ceiling:
                return False
        return all(stored(name) == value for name, value in self.equals.items())


@dataclass(frozen=True, slots=True)
class Create:
    """Create ``document``; refused with ``DocumentExists`` when its id exists in the partition."""

    document: Mapping[str, Any]

    @property
    def document_id(self) -> str:
        return str(self.document["id"])


@dataclass(frozen=True, slots=True)
class Patch:
    """Apply ``operations`` to the stored document ``document_id`` if ``condition`` holds for it:
    ``DocumentMissing`` when it does not exist, ``ConditionFailed`` when the condition does not
    hold (nothing of the commit is then written)."""

    document_id: str
    operations: Sequence[PatchOperation]
    condition: Condition | None = None


Write = Create | Patch


def set_field(name: str, value: Any) -> PatchOperation:
    """The patch operation that sets the top-level field ``name``."""
    return {"op": "set", "path": f"/{name}", "value": value}


def increment(name: str, amount: int) -> PatchOperation:
    """The patch operation that adds ``amount`` (negative: subtracts) to the top-level integer
    field ``name``, in the store, whatever concurrent writers did (Cosmos DB's ``incr``)."""
    return {"op": "incr", "path": f"/{name}", "value": amount}
