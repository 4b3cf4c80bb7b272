"""The tool's Cosmos DB adapter (``azure-cosmos``, sync client), over the orders container:
the order lookup of the dead-letter commands (one point read by id in the order's own
partition) and the outbox documents of the parked-event commands (an index query on ``status``,
point reads, one etag-conditional patch of ``status``). Entra ID (``DefaultAzureCredential``: a
Cosmos DB data reader role for ``show``, ``resubmit`` and ``audit``; a data contributor role to
republish) or a key (emulators). Never creates or deletes a document, never writes an order."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosAccessConditionFailedError, CosmosResourceNotFoundError

from shared.core import outbox_document_id
from shared.relay import OUTBOX_TYPE, STATUS_PARKED, STATUS_PENDING


def container_client(
    endpoint: str, database: str, container: str, *, key: str | None, verify_tls: bool = True
) -> ContainerProxy:
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
        return {str(item["id"]): item for item in found if item.get("type") == "order"}


class CosmosOutboxDocuments:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def stuck(self) -> list[dict[str, Any]]:
        # /type and /status are indexed (infra/app/cosmos.bicep): the query reads only the
        # documents it returns, across partitions.
        return list(
            self._container.query_items(
                "SELECT * FROM c WHERE c.type = @type AND c.status IN (@parked, @pending)",
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
            self._container.patch_item(
                str(document["id"]),
                partition_key=str(document["orderId"]),
                patch_operations=[{"op": "set", "path": "/status", "value": STATUS_PENDING}],
                etag=str(document["_etag"]),
                match_condition=MatchConditions.IfNotModified,
            )
        except (CosmosAccessConditionFailedError, CosmosResourceNotFoundError):
            return False
        return True
