"""A consumer without a gate, as ``idempotent_consumer.decide`` runs it over the kit's in-memory
store: what its effects are told, and the outcome of a message that changes no partition. The
gate's own rules are the stock reservation's tests (tests/stock)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from idempotent_consumer import (
    Again,
    ConsumerDefinition,
    Create,
    Decision,
    IncomingMessage,
    Outcome,
    Read,
    Resolution,
    Settlement,
    ValidEvent,
    Write,
    WriteRefused,
    decide,
)
from idempotent_consumer.testing import InMemoryDocumentStore

NOW = datetime(2026, 12, 6, 9, tzinfo=UTC)


class Noted:
    """An effect that creates one note per message in its partition and remembers what the kit
    told it: it is ``Blind`` and ``Foreseeing`` by its methods, as the stock reservation's SKU
    effect is, though no gate stands before it."""

    def __init__(self, partition: str, told: list[str]) -> None:
        self.partition, self.told = partition, told

    async def writes(self, message: ValidEvent, read: Read) -> Sequence[Write]:
        return [Create({"id": f"note:{message.message_id}", "key": self.partition})]

    async def resolve(
        self, message: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        return Again()

    def read_first(self) -> None:
        self.told.append(f"{self.partition}: read first")

    def foresee(self, gate: object) -> None:
        self.told.append(f"{self.partition}: foresee {gate!r}")


def notes(told: list[str]) -> ConsumerDefinition[ValidEvent]:
    """A consumer noting each message in the partitions its body lists."""

    def parse(message: IncomingMessage) -> ValidEvent:
        fields = json.loads(message.body)
        return ValidEvent(str(message.message_id), "Noted", fields["order"], 1, fields)

    return ConsumerDefinition(
        name="tests.notes",
        partition_field="key",
        parse=parse,
        partitions=lambda message: message.fields["partitions"],
        effect=lambda message, partition: Noted(partition, told),
    )


def message(message_id: str, partitions: list[str]) -> IncomingMessage:
    body = json.dumps({"order": "o-1", "partitions": partitions}).encode()
    return IncomingMessage(message_id, body)


async def deliver(
    definition: ConsumerDefinition[ValidEvent], store: InMemoryDocumentStore, sent: IncomingMessage
) -> Decision:
    return await decide(definition, sent, store, marker_ttl_s=600, now=NOW)


async def test_without_a_gate_an_effect_is_never_told_to_read_first_or_to_foresee() -> None:
    # Reading first is what a redelivery behind a gate asks of a blind effect, foreseeing what
    # the gate read: a consumer without one commits each effect as written, first delivery and
    # redelivery alike (the redelivery meets its markers), one request per partition.
    told: list[str] = []
    store = InMemoryDocumentStore()
    noted = notes(told)
    sent = message("m-1", ["a", "b"])

    first = await deliver(noted, store, sent)
    requests_of_the_first = list(store.requests)
    again = await deliver(noted, store, sent)

    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert told == []
    assert requests_of_the_first == ["batch", "batch"]
    assert {key for key in store.documents if key[1].startswith("note:")} == {
        ("a", "note:m-1"),
        ("b", "note:m-1"),
    }


async def test_a_message_that_changes_no_partition_is_processed_about_its_order() -> None:
    # Nothing to change is nothing wrong: the message is processed and completed, its decision
    # names its order as every other does, and nothing is written or read.
    store = InMemoryDocumentStore()

    decision = await deliver(notes([]), store, message("m-2", []))

    assert decision.outcome is Outcome.PROCESSED
    assert decision.settlement is Settlement.COMPLETE
    assert decision.order_id == "o-1"
    assert store.requests == [] and store.documents == {}
