"""A batch conflict is read by the operation that failed: a conflict on the order document is
the duplicate check; a conflict on its outbox event (the order deleted or expired, the event
left behind) is ``OrphanedDocument``: no redelivery can create the order while the event
exists, and no other order is concerned, so the message is dead-lettered at once with that
reason, naming the document (held as systemic, it burned ten deliveries in about ten minutes
and waited in the dead-letter queue as an anonymous ``MaxDeliveryCountExceeded``). The batch
answers come from the transport below the real azure-cosmos SDK, shaped as Cosmos DB sends
them (``local.standins.faults``, ``FaultKind.BATCH_OPERATION``: 207, one result per operation),
to choose which operation fails; the whole path runs on the local server's atomic batch (or the
real emulator) at the end.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import IncomingMessage

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.faults import BATCHES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument
from shared.relay.outbox import outbox_document_id
from tests.conftest import manual_time
from tests.integration.consumer_logs import consumer_records
from tests.orders import message, order_body
from tests.state import documents, settlements


def conflict_on(index: int) -> FaultInjectingTransport:
    """A transport answering every transactional batch 207: operation ``index`` 409, the
    others 424."""
    transport = FaultInjectingTransport(connection_verify=False)
    transport.add(
        FaultRule(FaultKind.BATCH_OPERATION, status=409, failing_index=index, times=None, **BATCHES)
    )
    return transport


def order_documents() -> list[dict[str, Any]]:
    incoming = IncomingMessage("ord-1001", json.dumps(order_body()).encode())
    valid = parse_order(incoming.body, incoming.message_id)
    return build_documents(
        valid, incoming, outbox_enabled=True, accepted_at=datetime(2026, 11, 29, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, OrderAlreadyExists), (1, OrphanedDocument)],
    ids=["conflict on the order", "conflict on the outbox event"],
)
async def test_the_failing_operation_decides_what_a_conflict_means(
    index: int,
    expected: type[Exception],
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    settings = Settings.from_env(app_env)
    transport = conflict_on(index)
    async with create_client(settings, transport=transport) as client:
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        with pytest.raises(expected) as raised:
            await CosmosOrderStore(proxy).create(order_documents())

    assert transport.rules[0].fired == 1
    if expected is OrphanedDocument:
        assert outbox_document_id("ord-1001") in str(raised.value)


async def test_an_orphaned_outbox_event_is_dead_lettered_at_once_with_its_own_reason(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    app_env: dict[str, str],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fails on 223dafd: the delivery was abandoned as systemic (then nine more)."""
    transport = conflict_on(1)
    bootstrap.configure(
        bootstrap.Composition(
            app_env, cosmos_options={"transport": transport}, **manual_time(clock)
        )
    )
    queue.send(message(order_body()))
    started = clock.now()

    with caplog.at_level(logging.INFO, logger="orders.consumer"):
        await host.invoke(queue.receive(1)[0])

    assert settlements(queue) == [("dead_letter", True)]
    assert clock.now() == started  # no retry, no hold: no redelivery can fix it
    [dead] = queue.dead_letters
    assert dead.reason == "OrphanedDocument"
    assert outbox_document_id("ord-1001") in str(dead.description)
    assert "remove the document" in str(dead.description)
    [final] = [r for r in caplog.records if hasattr(r, "outcome")]
    assert final.outcome == "mismatch"
    assert final.deadletter_reason == "OrphanedDocument"  # type: ignore[attr-defined]


async def test_an_orphaned_outbox_event_in_the_container_is_dead_lettered(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
) -> None:
    """An atomic batch (the local server's, as Cosmos DB's): the order was deleted, its event
    remains; the batch conflicts on the event (424 for the order, 409 for the event). The
    records come from the consumer's own logger (``consumer_logs``): ``python -m bench``, run
    by tests/bench, turns the ``orders`` logger's propagation off."""
    [_, outbox] = order_documents()
    await container.create_item(outbox)
    queue.send(message(order_body()))

    with consumer_records() as records:
        await host.invoke(queue.receive(1)[0])

    assert settlements(queue) == [("dead_letter", True)]
    assert [dead.reason for dead in queue.dead_letters] == ["OrphanedDocument"]
    assert [d["id"] for d in await documents(container)] == [outbox["id"]]
    assert any(getattr(r, "deadletter_reason", None) == "OrphanedDocument" for r in records)
