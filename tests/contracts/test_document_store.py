"""The kit's shipped double, ``idempotent_consumer.testing.InMemoryDocumentStore``, held to the
kit's shipped ``DocumentStoreContract`` on its own (the order store's suite holds its subclass,
and the Cosmos DB adapter, to the same): a double a user's tests run their consumer over
(``ConsumerContract``) must not drift from the real store."""

from __future__ import annotations

from typing import Any

import pytest
from idempotent_consumer.testing import (
    DocumentStoreContract,
    InMemoryDocumentStore,
    StoreUnderTest,
)


class TestInMemoryDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def document_store(self) -> StoreUnderTest:
        store = InMemoryDocumentStore()

        async def put(document: dict[str, Any]) -> None:
            store.documents[(document["sku"], document["id"])] = dict(document)

        async def stored_ids(partition_key: str) -> set[str]:
            return {key[1] for key in store.documents if key[0] == partition_key}

        return StoreUnderTest(store, "sku", put, stored_ids)
