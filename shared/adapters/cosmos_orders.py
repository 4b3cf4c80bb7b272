"""The order consumer's store on Cosmos DB (``shared.consumer.core.OrderStore``): the kit's
``CosmosDocumentStore`` (``idempotent_consumer.cosmos``), and the OrderPlaced path's create, one
commit with the order first, so that a conflict on the order is told from one on another of its
documents; and the app's Cosmos client, built from its settings with the kit's client options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from azure.cosmos.aio import CosmosClient
from idempotent_consumer import Create, DocumentExists
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.cosmos import create_client as create_kit_client

from shared.config import Settings
from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument

if TYPE_CHECKING:
    from azure.core.credentials_async import AsyncTokenCredential


def create_client(
    settings: Settings, *, credential: AsyncTokenCredential | None = None, **overrides: Any
) -> CosmosClient:
    """The app's Cosmos client: with the account key, or else with ``credential``, which the
    caller owns and closes; the app passes the one ``shared.adapters.identity.credential``
    builds from ``settings.cosmos_identity``. ``overrides`` are extra client options (the local
    stand-ins pass a transport)."""
    if settings.cosmos_key:
        key_or_credential: str | AsyncTokenCredential = settings.cosmos_key
    elif credential is not None:
        key_or_credential = credential
    else:
        raise ValueError(
            "COSMOS_KEY is unset: pass a credential (shared.adapters.identity.credential)"
        )
    return create_kit_client(
        settings.cosmos_endpoint,
        key_or_credential,
        connection_verify=settings.cosmos_verify_tls,
        **overrides,
    )


class CosmosOrderStore(CosmosDocumentStore):
    """The order consumer's store: the kit's, and the OrderPlaced path's create (the order
    first, so a conflict on it surfaces at index 0)."""

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        partition_key = documents[0]["orderId"]
        try:
            await self.commit(partition_key, [Create(document) for document in documents])
        except DocumentExists as conflict:
            if conflict.index == 0:
                raise OrderAlreadyExists(partition_key) from conflict
            # A conflict on another document than the order: the order was deleted or expired,
            # its outbox event is left; no create of this order can ever succeed.
            raise OrphanedDocument(partition_key, conflict.document_id) from conflict

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        return await self.read(order_id, order_id)
