"""The order store's failure branches through the real SDK (faults at the azure-core transport,
below it): what a failed batch, a conflicting create and a failed conflict read become, and the
request charge each one reports, as the consumer's telemetry exports it
(``orders.cosmos.request_charge`` by ``operation``: what the workbook's RU panel sums).

A failed transactional batch is the service's 207 Multi-Status (``local.standins.faults`` says
where each field comes from), which the SDK raises as ``CosmosBatchOperationError``; a
conflicting create is a 409 (``CosmosResourceExistsError``). The SDK calls a response hook on
success only, so an error's charge is the adapter's to read from the error's headers: with it
dropped, a duplicate or an outage would cost RU the dashboard never shows.

Each test fails with one of ``CosmosOrderStore.create``'s, ``commit``'s or ``read_order``'s
error branches mutated (``make mutation``): the batch failure not classified (or classified as a
read), the orphan's order id lost, a refusal given to the wrong write (a patch's 409, a create's
412) or lost to a ``TypeError``, a charge dropped, given to the wrong operation or read from
nothing, a commit of two writes sent as one create.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.cosmos.exceptions import CosmosBatchOperationError, CosmosHttpResponseError
from idempotent_consumer import (
    Condition,
    ConditionFailed,
    Create,
    DocumentExists,
    DocumentMissing,
    Patch,
    SystemicStoreError,
    TransientStoreError,
    Write,
    WriteRefused,
    set_field,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from local.standins.faults import (
    BATCHES,
    POINT_READS,
    WRITES,
    FaultInjectingTransport,
    FaultKind,
    FaultRule,
)
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument
from shared.consumer.order import applies_over
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.names import METRIC_REQUEST_CHARGE
from tests.state import documents

# local.standins.faults: the failing operation's charge, the whole batch's header
BATCH_CHARGE = 1.24


@dataclass
class Store:
    orders: CosmosOrderStore
    transport: FaultInjectingTransport
    reader: InMemoryMetricReader

    def charges(self) -> dict[str, tuple[int, float]]:
        """operation -> (points, sum) of the exported request-charge histogram."""
        found: dict[str, tuple[int, float]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != METRIC_REQUEST_CHARGE:
                        continue
                    for point in metric.data.data_points:
                        assert isinstance(point, HistogramDataPoint)
                        operation = str(dict(point.attributes or {})["operation"])
                        found[operation] = (point.count, round(point.sum, 6))
        return found


@pytest.fixture
async def store(app_env: dict[str, str], container: ContainerProxy) -> AsyncIterator[Store]:
    """The adapter on the test's container, its charges recorded as the consumer's."""
    reader = InMemoryMetricReader()
    telemetry = ConsumerTelemetry("orders", meter_provider=MeterProvider([reader]))
    transport = FaultInjectingTransport(connection_verify=False)
    async with create_client(Settings.from_env(app_env), transport=transport) as client:
        proxy = client.get_database_client(app_env["COSMOS_DATABASE"]).get_container_client(
            app_env["COSMOS_CONTAINER"]
        )
        yield Store(
            CosmosOrderStore(proxy, on_request_charge=telemetry.record_request_charge),
            transport,
            reader,
        )


def order_and_event(order_id: str) -> list[dict[str, Any]]:
    return [
        {"id": order_id, "orderId": order_id, "type": "order"},
        {"id": f"{order_id}:OrderAccepted", "orderId": order_id, "type": "outbox"},
    ]


async def test_a_batch_conflict_on_the_order_is_its_existence_and_is_charged(
    store: Store, container: ContainerProxy
) -> None:
    store.transport.add(FaultRule(FaultKind.BATCH_OPERATION, status=409, **BATCHES))

    with pytest.raises(OrderAlreadyExists):
        await store.orders.create(order_and_event("ord-c1"))

    assert store.charges() == {"batch": (1, BATCH_CHARGE)}
    assert await documents(container) == []


async def test_a_batch_conflict_on_the_outbox_document_is_an_orphan_naming_both(
    store: Store,
) -> None:
    store.transport.add(
        FaultRule(FaultKind.BATCH_OPERATION, status=409, failing_index=1, **BATCHES)
    )

    with pytest.raises(OrphanedDocument) as raised:
        await store.orders.create(order_and_event("ord-c2"))

    # What the dead-letter description and the operator read: which order, which document.
    assert str(raised.value).startswith(
        "order ord-c2 cannot be created: its document 'ord-c2:OrderAccepted' already exists"
    )
    assert store.charges() == {"batch": (1, BATCH_CHARGE)}


@pytest.mark.parametrize("failing", [0, 1])
@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (429, TransientStoreError),
        (503, TransientStoreError),
        (408, TransientStoreError),
        (403, SystemicStoreError),
        # A 404 of a write: the container is gone (a read's 404 is "no such order").
        (404, SystemicStoreError),
        (400, CosmosBatchOperationError),  # nobody classified it: re-raised as the SDK's
    ],
)
async def test_a_batch_that_failed_otherwise_is_classified_whichever_operation_failed(
    store: Store,
    container: ContainerProxy,
    failing: int,
    status: int,
    expected: type[Exception],
) -> None:
    store.transport.add(
        FaultRule(FaultKind.BATCH_OPERATION, status=status, failing_index=failing, **BATCHES)
    )

    with pytest.raises(expected) as raised:
        await store.orders.create(order_and_event(f"ord-f{status}-{failing}"))

    assert not isinstance(raised.value, OrderAlreadyExists | OrphanedDocument)
    assert store.charges() == {"batch": (1, BATCH_CHARGE)}
    assert await documents(container) == []


async def test_a_conflicting_create_is_the_order_s_existence_and_is_charged(
    store: Store, container: ContainerProxy
) -> None:
    [document] = order_and_event("ord-c3")[:1]
    await container.create_item(document)

    with pytest.raises(OrderAlreadyExists):
        await store.orders.create([document])

    # The local server charges 1 for everything; the charge came from the 409's headers.
    assert store.charges() == {"create": (1, 1.0)}


async def test_a_create_that_failed_is_classified_and_charged(store: Store) -> None:
    store.transport.add(
        FaultRule(FaultKind.STATUS, status=403, headers={"x-ms-request-charge": "2.5"}, **WRITES)
    )

    with pytest.raises(SystemicStoreError):
        await store.orders.create(order_and_event("ord-c4")[:1])

    assert store.charges() == {"create": (1, 2.5)}


async def test_a_create_throttled_past_the_sdk_s_retries_carries_the_service_s_retry_after(
    store: Store,
) -> None:
    """The consumer waits what the 429 asked (``x-ms-retry-after-ms``), not its own backoff."""
    store.transport.add(
        FaultRule(
            FaultKind.STATUS,
            status=429,
            headers={"x-ms-retry-after-ms": "20", "x-ms-request-charge": "0.5"},
            times=None,
            **WRITES,
        )
    )

    with pytest.raises(TransientStoreError) as raised:
        await store.orders.create(order_and_event("ord-c7")[:1])

    assert raised.value.retry_after_s == 0.02


async def test_a_conflict_read_that_finds_nothing_is_charged_as_a_read(store: Store) -> None:
    store.transport.add(
        FaultRule(
            FaultKind.STATUS, status=404, headers={"x-ms-request-charge": "1.5"}, **POINT_READS
        )
    )

    assert await store.orders.read_order("ord-c5") is None
    assert store.charges() == {"read": (1, 1.5)}


async def test_a_conflict_read_that_failed_is_classified_and_charged_as_a_read(
    store: Store,
) -> None:
    store.transport.add(
        FaultRule(
            FaultKind.STATUS, status=403, headers={"x-ms-request-charge": "1.75"}, **POINT_READS
        )
    )

    with pytest.raises(SystemicStoreError):
        await store.orders.read_order("ord-c6")

    assert store.charges() == {"read": (1, 1.75)}


# ---- the lifecycle's atomic commit (``CosmosOrderStore.commit``) ------------------------------


def accepted_order(order_id: str) -> dict[str, Any]:
    return {
        "id": order_id,
        "orderId": order_id,
        "type": "order",
        "status": "accepted",
        "orderVersion": 1,
    }


def change(order_id: str) -> list[Write]:
    """A change as the lifecycle commits it with the outbox off: its inbox marker, then the
    order's conditional patch to version 2."""
    return [
        Create({"id": f"{order_id}:m-2", "orderId": order_id, "type": "inbox"}),
        Patch(order_id, [set_field("orderVersion", 2)], applies_over(2)),
    ]


async def test_a_commit_of_two_writes_is_one_batch_that_writes_both(
    store: Store, container: ContainerProxy
) -> None:
    """Two writes whose first is a create are a batch, never ``create_item`` of the first."""
    await container.create_item(accepted_order("ord-k1"))

    await store.orders.commit("ord-k1", change("ord-k1"))

    stored = {document["id"]: document for document in await documents(container)}
    assert set(stored) == {"ord-k1", "ord-k1:m-2"}
    assert stored["ord-k1"]["orderVersion"] == 2
    assert store.charges() == {"batch": (1, 1.0)}  # one request, charged once


async def test_a_commit_of_one_create_is_a_create_and_is_charged_as_one(
    store: Store, container: ContainerProxy
) -> None:
    [marker, _patch] = change("ord-k4")

    await store.orders.commit("ord-k4", [marker])

    assert [document["id"] for document in await documents(container)] == ["ord-k4:m-2"]
    assert store.charges() == {"create": (1, 1.0)}  # the local server charges 1


async def test_a_commit_of_one_create_that_meets_its_id_is_document_exists_charged_as_a_create(
    store: Store, container: ContainerProxy
) -> None:
    [marker, _patch] = change("ord-k2")
    assert isinstance(marker, Create)
    await container.create_item(dict(marker.document))

    with pytest.raises(DocumentExists) as raised:
        await store.orders.commit("ord-k2", [marker])

    assert (raised.value.index, raised.value.document_id) == (0, "ord-k2:m-2")
    # The local server charges 1 for everything; the charge came from the 409's headers.
    assert store.charges() == {"create": (1, 1.0)}


@pytest.mark.parametrize(
    ("failing", "status", "expected"),
    [
        (0, 409, DocumentExists),  # the marker exists: a duplicate of the change
        (1, 412, ConditionFailed),  # the order's version or status refuses the change
        (1, 404, DocumentMissing),  # no order yet: the change arrived before it
        # A status that refuses one kind of write only: for the other, nobody classified it.
        (1, 409, CosmosBatchOperationError),
        (0, 412, CosmosBatchOperationError),
        (0, 404, SystemicStoreError),  # a create's 404: the container is gone
        (0, 429, TransientStoreError),
        (1, 429, TransientStoreError),
        (1, 503, TransientStoreError),
        (1, 403, SystemicStoreError),
        (1, 400, CosmosBatchOperationError),
    ],
)
async def test_a_commit_batch_that_failed_is_refused_at_its_write_or_classified(
    store: Store,
    container: ContainerProxy,
    failing: int,
    status: int,
    expected: type[Exception],
) -> None:
    order_id = f"ord-k{status}-{failing}"
    writes = change(order_id)
    store.transport.add(
        FaultRule(FaultKind.BATCH_OPERATION, status=status, failing_index=failing, **BATCHES)
    )

    with pytest.raises(expected) as raised:
        await store.orders.commit(order_id, writes)

    if isinstance(raised.value, WriteRefused):
        assert raised.value.index == failing
        assert raised.value.document_id == writes[failing].document_id
    else:
        assert not isinstance(raised.value, WriteRefused)
    assert store.charges() == {"batch": (1, BATCH_CHARGE)}
    assert await documents(container) == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [(403, SystemicStoreError), (404, SystemicStoreError), (400, CosmosHttpResponseError)],
)
async def test_a_commit_s_create_that_failed_is_classified_as_a_write_and_charged(
    store: Store, status: int, expected: type[Exception]
) -> None:
    """A create's 404 is the container gone (systemic), never "no such document"."""
    [marker, _patch] = change(f"ord-k{status}")
    store.transport.add(
        FaultRule(FaultKind.STATUS, status=status, headers={"x-ms-request-charge": "2.5"}, **WRITES)
    )

    with pytest.raises(expected):
        await store.orders.commit(f"ord-k{status}", [marker])

    assert store.charges() == {"create": (1, 2.5)}


async def test_a_condition_on_no_field_name_is_refused_before_any_request_naming_it(
    store: Store, container: ContainerProxy
) -> None:
    """A name the predicate could not quote safely (``c.a-b`` reads as a subtraction) is a bug of
    the caller: it fails loudly, before anything is sent, and says which name."""
    await container.create_item(accepted_order("ord-k3"))
    patch = Patch("ord-k3", [set_field("orderVersion", 2)], Condition(below={"order-version": 2}))

    with pytest.raises(ValueError, match=r"not a field name .*'order-version'"):
        await store.orders.commit("ord-k3", [patch])

    assert store.charges() == {}
    [stored] = await documents(container)
    assert stored["orderVersion"] == 1
