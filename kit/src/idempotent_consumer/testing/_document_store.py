"""The ``DocumentStore`` contract: what the kit relies on from any store, as one abstract pytest
suite that every store (the Cosmos DB adapter, a user's own, an in-memory double) subclasses,
so that a double can never drift from the real thing.

What the kit relies on: a commit is atomic in its partition (every write or none); a create that
meets its id is ``DocumentExists`` at its index; a patch whose document is missing is
``DocumentMissing``, one whose condition does not hold for what is stored ``ConditionFailed``,
each at its index and writing nothing of its commit; a condition says exactly what
``Condition.holds_for`` says, a missing field and its default included; a point read returns
the stored document or None.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from idempotent_consumer import (
    Condition,
    ConditionFailed,
    Create,
    DocumentExists,
    DocumentMissing,
    DocumentStore,
    Patch,
    Room,
    WriteRefused,
    set_field,
)

Document = dict[str, Any]
PARTITION = "p-1001"
SUBJECT_ID = "doc-1"


@dataclass
class StoreUnderTest:
    """The store, its container's partition key field, and a way around the store to set up
    and inspect the stored state (a test's own client, or the double's dictionary)."""

    store: DocumentStore
    partition_field: str
    put: Callable[[Document], Awaitable[None]]  # store a document as it is
    stored_ids: Callable[[str], Awaitable[set[str]]]  # the ids of one partition


def without_system_fields(document: Mapping[str, Any]) -> Document:
    """A document as written: Cosmos DB's ``_rid``, ``_etag``, ``_ts`` ... left out."""
    return {name: value for name, value in document.items() if not name.startswith("_")}


class DocumentStoreContract:
    """What every ``DocumentStore`` must do. Subclasses provide the ``document_store`` fixture
    (a ``StoreUnderTest`` on an empty partition ``PARTITION``). The tests are coroutines: run
    them with pytest-asyncio in ``asyncio_mode = "auto"``."""

    @pytest.fixture
    def document_store(self) -> StoreUnderTest:
        raise NotImplementedError

    async def test_a_commit_of_creates_and_a_conditional_patch_writes_them_all(
        self, document_store: StoreUnderTest
    ) -> None:
        subject = document_store
        await subject.put(_document(subject, version=1))

        await subject.store.commit(
            PARTITION,
            [
                Create(_marker(subject, "m-2")),
                Patch(SUBJECT_ID, [set_field("version", 2)], Condition(below={"version": 2})),
                Create(_event(subject, 2)),
            ],
        )

        assert await subject.stored_ids(PARTITION) == {SUBJECT_ID, "m-2", "ev-2"}
        stored = await subject.store.read(PARTITION, SUBJECT_ID)
        assert stored is not None and stored["version"] == 2
        marker = await subject.store.read(PARTITION, "m-2")
        assert without_system_fields(marker or {}) == _marker(subject, "m-2")

    @pytest.mark.parametrize(
        ("stored", "refusal"),
        [
            ({"version": 2}, ConditionFailed),  # the same version applied
            ({"version": 3}, ConditionFailed),  # a newer one
            (None, DocumentMissing),  # no document yet
        ],
        ids=["same-version", "newer-version", "missing"],
    )
    async def test_a_patch_refused_for_what_is_stored_writes_nothing_of_its_commit(
        self,
        document_store: StoreUnderTest,
        stored: dict[str, Any] | None,
        refusal: type[WriteRefused],
    ) -> None:
        """Fails on a store that writes operation by operation: the marker at index 0 would
        stay written."""
        subject = document_store
        if stored is not None:
            await subject.put({**_document(subject, version=1), **stored})

        with pytest.raises(refusal) as raised:
            await subject.store.commit(
                PARTITION,
                [
                    Create(_marker(subject, "m-2")),
                    Patch(SUBJECT_ID, [set_field("version", 2)], Condition(below={"version": 2})),
                    Create(_event(subject, 2)),
                ],
            )

        assert (raised.value.index, raised.value.document_id) == (1, SUBJECT_ID)
        expected = {SUBJECT_ID} if stored is not None else set()
        assert await subject.stored_ids(PARTITION) == expected
        if stored is not None:
            after = await subject.store.read(PARTITION, SUBJECT_ID)
            assert after is not None and after["version"] == stored["version"]

    async def test_a_create_that_meets_its_id_is_document_exists_at_its_index(
        self, document_store: StoreUnderTest
    ) -> None:
        subject = document_store
        await subject.put(_document(subject, version=1))
        await subject.put(_marker(subject, "m-2"))

        with pytest.raises(DocumentExists) as raised:
            await subject.store.commit(
                PARTITION,
                [
                    Create(_marker(subject, "m-2")),
                    Patch(SUBJECT_ID, [set_field("version", 2)], Condition(below={"version": 2})),
                ],
            )
        single = None
        try:
            await subject.store.commit(PARTITION, [Create(_marker(subject, "m-2"))])
        except DocumentExists as refused:
            single = refused

        assert (raised.value.index, raised.value.document_id) == (0, "m-2")
        assert single is not None and (single.index, single.document_id) == (0, "m-2")
        stored = await subject.store.read(PARTITION, SUBJECT_ID)
        assert stored is not None and stored["version"] == 1

    async def test_a_create_in_a_later_position_that_meets_its_id_is_refused_there(
        self, document_store: StoreUnderTest
    ) -> None:
        """The index tells which write was refused: a consumer tells its own document's
        conflict from another's by it (the order consumer: its order or an orphaned event)."""
        subject = document_store
        await subject.put(_event(subject, 2))

        with pytest.raises(DocumentExists) as raised:
            await subject.store.commit(
                PARTITION, [Create(_document(subject, version=2)), Create(_event(subject, 2))]
            )

        assert (raised.value.index, raised.value.document_id) == (1, "ev-2")
        assert await subject.stored_ids(PARTITION) == {"ev-2"}

    @pytest.mark.parametrize(
        ("condition", "stored", "holds"),
        [
            # No default: a missing field fails the comparison.
            (Condition(below={"version": 3}), {"version": 2}, True),
            (Condition(below={"version": 3}), {}, False),
            # A default below the limit: a missing field holds.
            (Condition(below={"version": 2}, defaults={"version": 1}), {}, True),
            # A default not below the limit: a missing field fails too.
            (Condition(below={"version": 1}, defaults={"version": 1}), {}, False),
            # A default equal to the value: a missing field holds; another stored value fails.
            (Condition(equals={"status": "accepted"}, defaults={"status": "accepted"}), {}, True),
            (
                Condition(equals={"status": "accepted"}, defaults={"status": "accepted"}),
                {"status": "cancelled"},
                False,
            ),
            (Condition(equals={"status": "accepted"}, defaults={"status": "placed"}), {}, False),
            (Condition(), {}, True),  # nothing asked: the patch applies
            # A counter moved within another field (reserved + n <= onHand), both stored.
            (Condition(room=(Room("reserved", 3, "onHand"),)), {"reserved": 2, "onHand": 5}, True),
            (Condition(room=(Room("reserved", 4, "onHand"),)), {"reserved": 2, "onHand": 5}, False),
            (Condition(room=(Room("reserved", -2, "onHand"),)), {"reserved": 7, "onHand": 5}, True),
            (Condition(room=(Room("reserved", 1, "onHand"),)), {"reserved": 0}, False),
            (Condition(at_least={"reserved": 2}), {"reserved": 2}, True),
            (Condition(at_least={"reserved": 3}), {"reserved": 2}, False),
            (Condition(at_least={"reserved": 0}), {}, False),
            # A stored boolean is no number: Cosmos DB compares across types as undefined, and
            # undefined is not true (learn.microsoft.com/azure/cosmos-db/nosql/query/
            # equality-comparison-operators), though Python counts True as 1.
            (Condition(below={"version": 3}), {"version": True}, False),
            (Condition(at_least={"reserved": 0}), {"reserved": False}, False),
        ],
        ids=[
            "below-stored",
            "below-missing-no-default",
            "below-missing-default-below",
            "below-missing-default-at-limit",
            "equals-missing-default-equal",
            "equals-stored-other",
            "equals-missing-default-other",
            "empty",
            "room-fits",
            "room-exceeds",
            "room-negative-amount",
            "room-limit-missing",
            "at-least-equal",
            "at-least-below",
            "at-least-missing",
            "below-stored-boolean",
            "at-least-stored-boolean",
        ],
    )
    async def test_a_patch_is_applied_exactly_when_its_condition_holds_for_what_is_stored(
        self,
        document_store: StoreUnderTest,
        condition: Condition,
        stored: dict[str, Any],
        holds: bool,
    ) -> None:
        """A store renders a ``Condition`` in its own terms (Cosmos DB: a filter predicate); it
        must say what ``Condition.holds_for`` says, a missing field and its default included."""
        subject = document_store
        document = {"id": SUBJECT_ID, subject.partition_field: PARTITION, **stored}
        assert condition.holds_for(document) is holds
        await subject.put(document)
        patch = Patch(SUBJECT_ID, [set_field("note", "changed")], condition)

        if holds:
            await subject.store.commit(PARTITION, [patch])
        else:
            with pytest.raises(ConditionFailed):
                await subject.store.commit(PARTITION, [patch])

        after = await subject.store.read(PARTITION, SUBJECT_ID)
        assert after is not None and after.get("note") == ("changed" if holds else None)

    async def test_a_document_never_stored_reads_as_none(
        self, document_store: StoreUnderTest
    ) -> None:
        assert await document_store.store.read(PARTITION, "m-404") is None


def _document(subject: StoreUnderTest, *, version: int) -> Document:
    return {
        "id": SUBJECT_ID,
        subject.partition_field: PARTITION,
        "type": "subject",
        "status": "accepted",
        "version": version,
    }


def _marker(subject: StoreUnderTest, document_id: str) -> Document:
    return {"id": document_id, subject.partition_field: PARTITION, "type": "inbox", "ttl": 600}


def _event(subject: StoreUnderTest, version: int) -> Document:
    return {"id": f"ev-{version}", subject.partition_field: PARTITION, "type": "outbox"}
