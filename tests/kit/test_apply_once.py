"""``apply_once``, the kit's one algorithm, as a consumer's own effect meets it, through the real
azure-cosmos SDK (the kit's document store adapter) against the local Cosmos DB server: what the
decision says of a message the stored state refuses, of a repeat and a stale message behind a
gate (no marker: the stored version is the record), and of a partition that changes under every
attempt. The stock reservation and the order lifecycle reach these paths only on races; here each
is met head on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient
from idempotent_consumer import (
    Again,
    Condition,
    Create,
    Inbox,
    Outcome,
    Patch,
    Read,
    Reject,
    Resolution,
    Retry,
    Settlement,
    Stale,
    TransientStoreError,
    ValidEvent,
    Write,
    WriteRefused,
    apply_once,
    set_field,
)
from idempotent_consumer.cosmos import CosmosDocumentStore

from shared.adapters.cosmos_orders import create_client
from shared.config import Settings

NOW = datetime(2026, 12, 6, 2, tzinfo=UTC)
ACCOUNT = "acct-1"
BALANCE_ID = "balance"
INBOX = Inbox(consumer="tests.balances", partition_field="account", ttl_s=600)


@pytest.fixture
async def accounts(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """A container partitioned on /account, in the test's account."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = await client.create_database_if_not_exists(app_env["COSMOS_DATABASE"])
        name = f"accounts-{uuid.uuid4().hex[:8]}"
        yield await database.create_container(name, partition_key=PartitionKey(path="/account"))
        await database.delete_container(name)


@pytest.fixture
async def store(
    app_env: dict[str, str], accounts: ContainerProxy
) -> AsyncIterator[CosmosDocumentStore]:
    settings = Settings.from_env(app_env)
    async with create_client(settings) as client:
        database = client.get_database_client(settings.cosmos_database)
        yield CosmosDocumentStore(database.get_container_client(accounts.id))


def balance_set(version: int, amount: int, *, message_id: str = "m-1") -> ValidEvent:
    return ValidEvent(message_id, "BalanceSet", ACCOUNT, version, {"amount": amount})


def balance(version: int, amount: int, **fields: Any) -> dict[str, Any]:
    return {"id": BALANCE_ID, "account": ACCOUNT, "version": version, "amount": amount, **fields}


class SetBalance:
    """A versioned state set by versioned events: the common case patches an older balance; a
    missing one is created, a closed account refuses every later event, and a version at or
    below the stored one is stale."""

    def __init__(self) -> None:
        self.resolved = 0

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write]:
        operations = [
            set_field("version", event.version),
            set_field("amount", event.fields["amount"]),
        ]
        # An older balance of an open account (a balance never closed has no ``closed``).
        open_and_older = Condition(
            below={"version": event.version}, equals={"closed": "no"}, defaults={"closed": "no"}
        )
        return [Patch(BALANCE_ID, operations, open_and_older)]

    async def resolve(
        self, event: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        self.resolved += 1
        stored = await read(BALANCE_ID)
        if stored is None:
            return Retry([Create(balance(event.version, event.fields["amount"]))])
        if stored.get("closed") == "yes":
            return Reject(
                "AccountClosed",
                f"version {event.version} follows the account's closing",
                stored["version"],
            )
        if stored["version"] >= event.version:
            return Stale(stored["version"])
        return Again()


class NeverHolds(SetBalance):
    """Every attempt is refused as if another writer had just committed: a storm."""

    async def writes(self, event: ValidEvent, read: Read) -> Sequence[Write]:
        return [Patch(BALANCE_ID, [set_field("amount", 0)], Condition(equals={"epoch": "never"}))]

    async def resolve(
        self, event: ValidEvent, refused: WriteRefused, write: Write, read: Read
    ) -> Resolution:
        self.resolved += 1
        return Again()


async def documents(container: ContainerProxy) -> list[dict[str, Any]]:
    query = "SELECT c.id, c.version, c.amount, c.closed FROM c"
    return sorted(
        [item async for item in container.query_items(query)],
        key=lambda item: str(item["id"]),
    )


async def test_a_message_the_stored_state_refuses_is_dead_lettered_with_the_version_it_met(
    store: CosmosDocumentStore, accounts: ContainerProxy
) -> None:
    await accounts.create_item(balance(3, 700, closed="yes"))
    before = await documents(accounts)

    decision = await apply_once(store, INBOX, balance_set(4, 900), ACCOUNT, SetBalance(), now=NOW)

    assert (decision.outcome, decision.settlement) == (Outcome.INVALID, Settlement.DEADLETTER)
    assert decision.deadletter_reason == "AccountClosed"
    assert decision.description == "version 4 follows the account's closing"
    assert (decision.order_version, decision.stored_version) == (4, 3)
    assert await documents(accounts) == before  # no marker, the balance untouched


async def test_behind_a_gate_the_stored_version_tells_a_repeat_from_a_stale_message(
    store: CosmosDocumentStore, accounts: ContainerProxy
) -> None:
    """No inbox: nothing per message is kept, so the balance's own version decides, and
    neither a repeat nor a stale message writes anything."""
    await accounts.create_item(balance(3, 700))
    before = await documents(accounts)

    repeat = await apply_once(store, None, balance_set(3, 700), ACCOUNT, SetBalance(), now=NOW)
    stale = await apply_once(store, None, balance_set(2, 500), ACCOUNT, SetBalance(), now=NOW)

    assert (repeat.outcome, repeat.order_version, repeat.stored_version) == (
        Outcome.DUPLICATE,
        3,
        3,
    )
    assert (stale.outcome, stale.order_version, stale.stored_version) == (Outcome.STALE, 2, 3)
    assert {repeat.settlement, stale.settlement} == {Settlement.COMPLETE}
    assert await documents(accounts) == before


async def test_a_partition_that_changes_under_every_attempt_is_transient_after_four_rounds(
    store: CosmosDocumentStore, accounts: ContainerProxy
) -> None:
    await accounts.create_item(balance(3, 700))
    before = await documents(accounts)
    storm = NeverHolds()

    with pytest.raises(TransientStoreError) as raised:
        await apply_once(store, INBOX, balance_set(4, 900), ACCOUNT, storm, now=NOW)

    assert str(raised.value) == (
        "BalanceSet 'm-1': what is stored in 'acct-1' changed under 4 attempts"
    )
    assert storm.resolved == 4  # each round one refused commit, decided again
    assert await documents(accounts) == before
