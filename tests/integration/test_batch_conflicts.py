"""A batch conflict is read by the operation that failed: a conflict on the order document is
the duplicate check; a conflict on its outbox event (the order deleted or expired, the event
left behind) is ``OrphanedDocument``, systemic: no redelivery can create the order while the
event exists, and reading it as "the order exists" cycled the message to the broker's
dead-letter queue as transient. The batch answers come from the transport below the real
azure-cosmos SDK, shaped as Cosmos DB sends them (207, one status per operation), because
cosmosdb-server's batches are not atomic; the whole path runs on the real emulator at the end.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest
from azure.cosmos.aio import ContainerProxy

from local.broker import ManualClock, PeekLockQueue
from local.faults import FaultInjectingTransport, SyntheticResponse
from local.host import LocalFunctionsHost
from shared import runtime
from shared.config import Settings
from shared.contract import parse_order
from shared.core import IncomingMessage, build_documents, outbox_document_id
from shared.cosmos_store import CosmosOrderStore, create_client
from shared.errors import OrderAlreadyExists, OrphanedDocument
from tests.conftest import manual_time
from tests.orders import message, order_body
from tests.state import documents, settlements


class BatchAnswers(FaultInjectingTransport):
    """Answers every transactional batch with the given per-operation statuses (HTTP 207)."""

    def __init__(self, statuses: list[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.statuses = statuses
        self.batches = 0

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        if request.headers.get("x-ms-cosmos-is-batch-request", "").lower() != "true":
            return await super().send(request, **kwargs)
        self.batches += 1
        response = SyntheticResponse(request, 207, None, {})
        response._body = json.dumps(
            [{"statusCode": status, "requestCharge": 1.0} for status in self.statuses]
        ).encode()
        return response


def order_documents() -> list[dict[str, Any]]:
    incoming = IncomingMessage("ord-1001", json.dumps(order_body()).encode())
    valid = parse_order(incoming.body, incoming.message_id)
    return build_documents(
        valid, incoming, outbox_enabled=True, accepted_at=datetime(2026, 11, 29, tzinfo=UTC)
    )


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [([409, 424], OrderAlreadyExists), ([424, 409], OrphanedDocument)],
    ids=["conflict on the order", "conflict on the outbox event"],
)
async def test_the_failing_operation_decides_what_a_conflict_means(
    statuses: list[int],
    expected: type[Exception],
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    settings = Settings.from_env(app_env)
    transport = BatchAnswers(statuses, connection_verify=False)
    async with create_client(settings, transport=transport) as client:
        proxy = client.get_database_client(settings.cosmos_database).get_container_client(
            settings.cosmos_container
        )
        with pytest.raises(expected) as raised:
            await CosmosOrderStore(proxy).create(order_documents())

    assert transport.batches == 1
    if expected is OrphanedDocument:
        assert outbox_document_id("ord-1001") in str(raised.value)


async def test_an_orphaned_outbox_event_is_systemic_and_never_dead_lettered(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    app_env: dict[str, str],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = BatchAnswers([424, 409], connection_verify=False)
    runtime.configure(app_env, cosmos_options={"transport": transport}, **manual_time(clock))
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    assert settlements(queue) == [("abandon", True)]
    assert queue.dead_letters == []
    [final] = [r for r in caplog.records if hasattr(r, "outcome")]
    assert final.outcome == "systemic"
    assert "OrphanedDocument" in str(final.description)  # type: ignore[attr-defined]


@pytest.mark.emulator
async def test_an_orphaned_outbox_event_on_the_real_emulator_is_systemic(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Real atomic batches: the order was deleted, its event remains; every create conflicts
    # on the event (424 for the order, 409 for the event).
    [_, outbox] = order_documents()
    await container.create_item(outbox)
    queue.send(message(order_body()))

    await host.invoke(queue.receive(1)[0])

    assert settlements(queue) == [("abandon", True)]
    assert queue.dead_letters == []
    assert [d["id"] for d in await documents(container)] == [outbox["id"]]
    assert any("OrphanedDocument" in str(getattr(r, "description", "")) for r in caplog.records)
