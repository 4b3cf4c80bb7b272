"""The tool's Cosmos DB adapter (``azure-cosmos``, sync client), over the orders container:
the order lookup of the dead-letter commands (batched point reads of orders and inbox markers,
each in its order's own partition), the outbox documents of the parked-event commands (an index
query on ``status``, point reads, one etag-conditional patch of ``status``) and an order's
history (one query scoped to its partition). Entra ID (``DefaultAzureCredential``: a
Cosmos DB data reader role for ``show``, ``resubmit`` and ``audit``; a data contributor role to
republish) or a key (emulators). Never creates or deletes a document, never writes an order."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosAccessConditionFailedError, CosmosResourceNotFoundError
from idempotent_consumer import INBOX_TYPE, InboxField

from ops.history import PartitionRead
from shared.config import is_loopback_endpoint
from shared.consumer.lifecycle import PARTITION_FIELD as MARKER_ORDER_ID  # the markers' order id
from shared.consumer.order import ORDER_TYPE, ORDER_VERSION, STATUS
from shared.relay.outbox import (
    OUTBOX_TYPE,
    STATUS_PARKED,
    STATUS_PENDING,
    OutboxField,
    outbox_document_id,
    reference,
    republish_patch,
)


def container_client(
    endpoint: str, database: str, container: str, *, key: str | None, verify_tls: bool = True
) -> ContainerProxy:
    if not verify_tls and not is_loopback_endpoint(endpoint):
        # As the app's COSMOS_VERIFY_TLS (shared/config.py): a self-signed certificate is an
        # emulator's, on this machine; an account's certificate is always checked.
        raise ValueError("--no-verify-tls is for an emulator on a loopback endpoint only")
    credential: Any = key
    if not key:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential()
    client = CosmosClient(endpoint, credential=credential, connection_verify=verify_tls)
    return client.get_database_client(database).get_container_client(container)


def read_many(container: ContainerProxy, keys: Collection[tuple[str, str]]) -> list[dict[str, Any]]:
    """Point reads of (id, partition key) pairs in one call: "a batched point-read operation ...
    more efficient than issuing multiple individual point reads"; items not found "are omitted"
    (``ContainerProxy.read_items``, azure/cosmos/container.py:323-351)."""
    if not keys:
        return []
    return [dict(item) for item in container.read_items(list(keys))]


def _read(container: ContainerProxy, item: str, partition_key: str) -> dict[str, Any] | None:
    found = read_many(container, [(item, partition_key)])
    return found[0] if found else None


class CosmosOrderLookup:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    @classmethod
    def connect(
        cls,
        endpoint: str,
        database: str,
        container: str,
        *,
        key: str | None = None,
        verify_tls: bool = True,
    ) -> CosmosOrderLookup:
        return cls(container_client(endpoint, database, container, key=key, verify_tls=verify_tls))

    def stored_orders(self, order_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        found = read_many(self._container, [(order_id, order_id) for order_id in set(order_ids)])
        return {str(item["id"]): item for item in found if item.get(OutboxField.TYPE) == ORDER_TYPE}

    def documents(self, keys: Collection[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        found = read_many(self._container, set(keys))
        return {(str(item["id"]), str(item.get(OutboxField.ORDER_ID))): item for item in found}


class CosmosOutboxDocuments:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def stuck(self) -> list[dict[str, Any]]:
        # /type and /status are indexed (infra/app/cosmos.bicep): the query reads only the
        # documents it returns, across partitions.
        return list(
            self._container.query_items(
                f"SELECT * FROM c WHERE c.{OutboxField.TYPE} = @type"
                f" AND c.{OutboxField.STATUS} IN (@parked, @pending)",
                parameters=[
                    {"name": "@type", "value": OUTBOX_TYPE},
                    {"name": "@parked", "value": STATUS_PARKED},
                    {"name": "@pending", "value": STATUS_PENDING},
                ],
                enable_cross_partition_query=True,
            )
        )

    def outbox_of(self, order_id: str) -> dict[str, Any] | None:
        return _read(self._container, outbox_document_id(order_id), order_id)

    def order(self, order_id: str) -> dict[str, Any] | None:
        return _read(self._container, order_id, order_id)

    def republish(self, document: dict[str, Any]) -> bool:
        try:
            read = reference(document)
            self._container.patch_item(
                read.document_id,
                partition_key=read.partition_key,
                patch_operations=republish_patch(),
                etag=str(read.etag),
                match_condition=MatchConditions.IfNotModified,
            )
        except (CosmosAccessConditionFailedError, CosmosResourceNotFoundError):
            return False
        return True


class CosmosOrderHistory:
    """``python -m ops history``: every document of one order's partition, in one query.

    ``SELECT * FROM c WHERE c.orderId = @orderId`` with ``partition_key=<orderId>``
    (azure/cosmos/container.py:982-985: a query "targeted" at one partition key value; the
    filter on the partition key path says the same in the query text, which is all the local
    cosmosdb-server reads) is answered by the one physical partition that holds the order and
    loads only that logical partition's documents: the order, this
    consumer's inbox markers (one per handled change, kept for the marker window), the outbox
    events (one per applied version; a dispatched one expires after 7 days). A handful of
    documents of about 1 KB: a few RU (the charge of a query grows with the documents it loads,
    https://learn.microsoft.com/azure/cosmos-db/optimize-cost-reads-writes), printed with the
    history as the responses' ``x-ms-request-charge``. Needs a Cosmos DB data reader role.
    """

    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def read(self, order_id: str) -> PartitionRead:
        charge = [0.0]

        def count(headers: Mapping[str, Any], *_: Any) -> None:
            charge[0] += float(headers.get("x-ms-request-charge", 0) or 0)

        documents = [
            dict(item)
            for item in self._container.query_items(
                f"SELECT * FROM c WHERE c.{OutboxField.ORDER_ID} = @orderId",
                parameters=[{"name": "@orderId", "value": order_id}],
                partition_key=order_id,
                response_hook=count,
            )
        ]
        return PartitionRead(documents, charge[0])


class AuditTooLarge(ValueError):
    """The window holds more documents than the audit is allowed to read."""


class CosmosAuditReader:
    """What ``python -m ops audit`` reads from the orders container, and what it cost.

    For a window ``[since, until)`` on the documents' ``_ts`` (the server's last-write time),
    in this order:

    1. ``orders_written``: the order documents of the window. An order is written at its
       acceptance (or its creation by a change) and again by each change applied to it, so its
       ``_ts`` is its last applied version's. One cross-partition query on indexed paths
       (``/type`` is indexed, infra/app/cosmos.bicep, and "the system properties id and _ts are
       always indexed" when indexing is consistent,
       https://learn.microsoft.com/azure/cosmos-db/how-to-manage-indexing-policy): it loads the
       window's orders, however large the container.
    2. ``outbox_written``: the outbox documents last written in the window, the same query on
       ``type = outbox``. It finds the events of the window that have no order (invariant 3),
       but not every order's event: the relay's dispatch patch (and a park, a republish)
       rewrites an outbox document's ``_ts``, so the event of an order accepted just before
       ``until`` and dispatched after it is not in the window.
    3. ``outbox_of``: those, by id. The outbox event of each version of an order has a
       deterministic id in the order's partition (``shared.relay.outbox.outbox_document_id``),
       so the event of each window order's current version that step 2 did not return is
       read with ``read_items``: the SDK groups the ids by
       partition key range and sends one query per range and 1,000 ids, ``WHERE c.orderId = @pk
       AND c.id IN (...)`` or one point read for a single id (azure/cosmos/_read_items_helper.py,
       _query_builder.py). Each loads only the documents it returns: about one RU per event,
       for the few orders of the window's last seconds (dispatch latency) or whose event was
       parked or republished since, never a scan.
    4. ``stuck_outbox``: every parked or pending outbox document, of any age (``/status`` is
       indexed): it loads only what is stuck.
    5. ``markers_written``: the inbox markers of the window (``type = inbox``; a marker is
       written once), the same query as 1;
    6. ``orders_by_id``: the orders outside the window that an event or a marker points to, by
       batched point reads as in 3.

    Each query projects the fields the invariants read. ``request_charge`` sums the
    ``x-ms-request-charge`` of every response; ``max_documents`` bounds what one audit may read
    (``AuditTooLarge`` beyond it).
    """

    ORDER_FIELDS = ", ".join(
        f"c.{name}"
        for name in (
            "id",
            "orderId",
            "messageId",
            "requestHash",
            "hashAlgorithm",
            "totalMinor",
            "customerId",
            "acceptedAt",
            ORDER_VERSION,
            STATUS,
            "createdBy",
        )
    )
    OUTBOX_FIELDS = ", ".join(
        f"c.{name}"
        for name in (
            OutboxField.ID,
            OutboxField.TYPE,
            OutboxField.ORDER_ID,
            OutboxField.EVENT_ID,
            OutboxField.STATUS,
            OutboxField.CREATED_AT,
            OutboxField.PARKED_REASON,
            OutboxField.PARKED_DESCRIPTION,
            OutboxField.PARKED_AT,
            OutboxField.EVENT_TYPE,
            # The version it announces (``ops.audit.event_version`` reads it at the top).
            f"{OutboxField.PAYLOAD}.{ORDER_VERSION}",
        )
    )
    MARKER_FIELDS = ", ".join(
        f"c.{name}"
        for name in (
            InboxField.ID,
            InboxField.TYPE,
            MARKER_ORDER_ID,
            InboxField.MESSAGE_ID,
            InboxField.MESSAGE_TYPE,
            InboxField.ORDER_VERSION,
            InboxField.OUTCOME,
        )
    )

    def __init__(self, container: ContainerProxy, *, max_documents: int = 200_000) -> None:
        self._container = container
        self.max_documents = max_documents
        self.request_charge = 0.0
        self.documents_read = 0

    def _charge(self, headers: Mapping[str, Any], *_: Any) -> None:
        self.request_charge += float(headers.get("x-ms-request-charge", 0) or 0)

    def _query(self, query: str, parameters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for item in self._container.query_items(
            query,
            parameters=parameters,
            enable_cross_partition_query=True,
            response_hook=self._charge,
        ):
            found.append(dict(item))
            self._count(1)
        return found

    def _count(self, documents: int) -> None:
        self.documents_read += documents
        if self.documents_read > self.max_documents:
            raise AuditTooLarge(
                f"the window holds more than {self.max_documents} documents: narrow --since "
                "or raise --max-documents"
            )

    def _read_many(self, keys: Collection[tuple[str, str]]) -> list[dict[str, Any]]:
        if not keys:
            return []
        found = self._container.read_items(list(keys))
        self._charge(found.get_response_headers())
        self._count(len(found))
        return [dict(item) for item in found]

    def _window(self, kind: str, fields: str, since: datetime, until: datetime) -> list[Any]:
        return self._query(
            f"SELECT {fields} FROM c WHERE c.type = @type AND c._ts >= @since AND c._ts < @until",
            [
                {"name": "@type", "value": kind},
                {"name": "@since", "value": int(since.timestamp())},
                {"name": "@until", "value": math.ceil(until.timestamp())},
            ],
        )

    def orders_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]:
        return self._window(ORDER_TYPE, self.ORDER_FIELDS, since, until)

    def outbox_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]:
        return self._window(OUTBOX_TYPE, self.OUTBOX_FIELDS, since, until)

    def outbox_of(self, versions: Collection[tuple[str, int]]) -> list[dict[str, Any]]:
        """What is stored under these (order id, version)s' outbox ids, in each order's
        partition (the invariants judge what they find there)."""
        return self._read_many(
            [
                (outbox_document_id(order_id, version), order_id)
                for order_id, version in sorted(set(versions))
            ]
        )

    def markers_written(self, since: datetime, until: datetime) -> list[dict[str, Any]]:
        return self._window(INBOX_TYPE, self.MARKER_FIELDS, since, until)

    def stuck_outbox(self) -> list[dict[str, Any]]:
        return self._query(
            f"SELECT {self.OUTBOX_FIELDS} FROM c WHERE c.{OutboxField.TYPE} = @type "
            f"AND c.{OutboxField.STATUS} IN (@parked, @pending)",
            [
                {"name": "@type", "value": OUTBOX_TYPE},
                {"name": "@parked", "value": STATUS_PARKED},
                {"name": "@pending", "value": STATUS_PENDING},
            ],
        )

    def orders_by_id(self, order_ids: Collection[str]) -> dict[str, dict[str, Any]]:
        found = self._read_many([(order_id, order_id) for order_id in sorted(set(order_ids))])
        return {str(item["id"]): item for item in found if item.get(OutboxField.TYPE) == ORDER_TYPE}
