"""Cosmos DB (NoSQL API) for the kit: ``CosmosDocumentStore``, the ``DocumentStore`` port on one
container (each commit one create or one transactional batch, each read a point read, every
failure classified by what a redelivery can fix), and ``create_client`` with the client options
that keep every operation inside a message lock.

Imports azure-cosmos (and aiohttp, its transport): import it where a store is built, never from
the kit's core.
"""

from __future__ import annotations

from idempotent_consumer.cosmos._store import (
    CLIENT_OPTIONS,
    OPERATION_TIMEOUT_S,
    BatchFailure,
    CosmosDocumentStore,
    RequestChargeSink,
    batch_failure,
    batch_operation,
    classify_error,
    classify_status,
    create_client,
    filter_predicate,
    refused_write,
)

__all__ = [
    "CLIENT_OPTIONS",
    "OPERATION_TIMEOUT_S",
    "BatchFailure",
    "CosmosDocumentStore",
    "RequestChargeSink",
    "batch_failure",
    "batch_operation",
    "classify_error",
    "classify_status",
    "create_client",
    "filter_predicate",
    "refused_write",
]
