"""The order lookup over Cosmos DB (``azure-cosmos``, sync client): one point read by id in the
order's own partition. Entra ID (``DefaultAzureCredential``, a Cosmos DB data reader role) or a
key (emulators)."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosResourceNotFoundError


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
        credential: Any = key
        if not key:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        client = CosmosClient(endpoint, credential=credential, connection_verify=verify_tls)
        return cls(client.get_database_client(database).get_container_client(container))

    def stored_order(self, order_id: str) -> dict[str, Any] | None:
        try:
            item: dict[str, Any] = self._container.read_item(order_id, partition_key=order_id)
        except CosmosResourceNotFoundError:
            return None
        return item
