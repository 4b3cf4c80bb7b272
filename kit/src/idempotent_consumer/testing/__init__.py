"""The kit's contract suites, for a user's tests: ``DocumentStoreContract`` holds any
``DocumentStore`` (the Cosmos DB adapter on a real account or emulator, a user's own store, an
in-memory double) to what the kit relies on: subclass it and provide the ``document_store``
fixture. ``ConsumerContract`` holds a user's ``ConsumerDefinition`` to the kit's guarantees
(once per message whatever the redeliveries, concurrent duplicates or a stop between
partitions) over ``InMemoryDocumentStore``, a double held to the store suite. They need pytest
and pytest-asyncio (``pip install idempotent-consumer-azure[testing]``).
"""

from __future__ import annotations

from idempotent_consumer.testing._consumer import ConsumerContract
from idempotent_consumer.testing._document_store import (
    PARTITION,
    DocumentStoreContract,
    StoreUnderTest,
    without_system_fields,
)
from idempotent_consumer.testing._memory import InMemoryDocumentStore

__all__ = [
    "PARTITION",
    "ConsumerContract",
    "DocumentStoreContract",
    "InMemoryDocumentStore",
    "StoreUnderTest",
    "without_system_fields",
]
