"""The Cosmos DB adapter of the relay's ``OutboxStore`` port and the watchdog's ``OutboxScanner``
port (azure-cosmos aio).

Applies the two conditional patches of an outbox document that ``shared.relay.outbox`` defines
(dispatched and parked), each on the version read (``OutboxRef``: If-Match on the etag the change
feed or the watchdog's query delivered), so a replayed batch never overwrites a newer state: a
412 means "already changed", not an error.

And the watchdog's query for stuck documents (``stuck``): ``type``, ``status`` and ``eventType``
equalities, all three range-indexed (``/type/?``, ``/status/?``, ``/eventType/?``:
infra/app/cosmos.bicep, which indexes nothing else), so the index narrows the query to the
pending outbox documents; ``createdAt`` is not indexed, so only those are loaded to compare it.
Its cost therefore follows the pending documents (normally the few in flight), never the
orders or the dispatched events in the container (README "Outbox watchdog" estimates it).
``createdAt`` is ``shared.clock.document_timestamp``: fixed width, UTC, ``Z``, so its string
order is its time order. Never creates or deletes documents; never touches orders; knows no field
name of its own (``shared.relay.outbox`` owns them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy

from shared.adapters.cosmos_orders import OPERATION_TIMEOUT_S  # the consumer's bound per operation
from shared.clock import document_timestamp
from shared.consumer.contract import ORDER_ACCEPTED_EVENT_TYPE
from shared.relay.outbox import (
    OUTBOX_TYPE,
    STATUS_PENDING,
    OutboxField,
    OutboxRef,
    PatchOperation,
    created_at,
    dispatched_patch,
    parked_patch,
)
from shared.relay.watchdog import StuckOutbox

# WatchdogPolicy.is_stuck, as a query (tests/relay/test_watchdog.py holds the two together).
_STUCK_FILTER = (
    f"FROM c WHERE c.{OutboxField.TYPE} = @type AND c.{OutboxField.STATUS} = @status"
    f" AND c.{OutboxField.EVENT_TYPE} = @eventType AND c.{OutboxField.CREATED_AT} <= @cutoff"
)


class CosmosOutboxStore:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    async def mark_dispatched(
        self, document: OutboxRef, *, dispatched_at: datetime, ttl_s: int
    ) -> bool:
        return await self._patch(document, dispatched_patch(dispatched_at, ttl_s))

    async def park(
        self, document: OutboxRef, *, parked_at: datetime, reason: str, description: str
    ) -> bool:
        return await self._patch(document, parked_patch(parked_at, reason, description))

    async def stuck(self, created_at_or_before: datetime, limit: int) -> StuckOutbox:
        parameters: list[dict[str, Any]] = [
            {"name": "@type", "value": OUTBOX_TYPE},
            {"name": "@status", "value": STATUS_PENDING},
            {"name": "@eventType", "value": ORDER_ACCEPTED_EVENT_TYPE},
            {"name": "@cutoff", "value": document_timestamp(created_at_or_before)},
        ]
        documents: list[dict[str, Any]] = []
        pages = self._container.query_items(
            f"SELECT * {_STUCK_FILTER}",
            parameters=parameters,
            max_item_count=limit,
            timeout=OPERATION_TIMEOUT_S,
        ).by_page()
        async for page in pages:
            documents.extend([document async for document in page])
            if len(documents) >= limit:
                break
        documents = documents[:limit]
        if len(documents) < limit:  # that is all of them
            dates = [d for d in (created_at(document) for document in documents) if d]
            return StuckOutbox(documents, len(documents), min(dates, default=None))
        # More than a page: count them, and find the oldest, from the index alone.
        count = await self._value(f"SELECT VALUE COUNT(1) {_STUCK_FILTER}", parameters)
        oldest = await self._value(
            f"SELECT VALUE MIN(c.{OutboxField.CREATED_AT}) {_STUCK_FILTER}", parameters
        )
        return StuckOutbox(
            documents,
            max(len(documents), int(count or 0)),
            created_at({OutboxField.CREATED_AT: oldest}),
        )

    async def _value(self, query: str, parameters: list[dict[str, Any]]) -> Any:
        # A cross-partition aggregate: the SDK merges the partitions' partial results.
        values = [
            value
            async for value in self._container.query_items(
                query, parameters=parameters, timeout=OPERATION_TIMEOUT_S
            )
        ]
        return values[0] if values else None

    async def _patch(self, document: OutboxRef, operations: list[PatchOperation]) -> bool:
        etag = document.etag
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            await self._container.patch_item(
                document.document_id,
                partition_key=document.partition_key,
                patch_operations=operations,
                timeout=OPERATION_TIMEOUT_S,
                no_response=True,
                **conditions,
            )
        except cosmos_errors.CosmosAccessConditionFailedError:
            return False  # changed since the change feed read it: an earlier run marked it
        except cosmos_errors.CosmosResourceNotFoundError:
            return False  # expired or deleted: nothing left to mark
        return True
