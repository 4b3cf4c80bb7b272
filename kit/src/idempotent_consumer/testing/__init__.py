"""The kit's contract suites, for a user's tests: ``DocumentStoreContract`` holds any
``DocumentStore`` (the Cosmos DB adapter on a real account or emulator, a user's own store, an
in-memory double) to what the kit relies on. Subclass it and provide the ``document_store``
fixture; it needs pytest and pytest-asyncio (``pip install idempotent-consumer-azure[testing]``).
"""

from __future__ import annotations

from idempotent_consumer.testing._document_store import (
    PARTITION,
    DocumentStoreContract,
    StoreUnderTest,
    without_system_fields,
)

__all__ = ["PARTITION", "DocumentStoreContract", "StoreUnderTest", "without_system_fields"]
