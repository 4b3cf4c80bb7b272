"""The Cosmos DB adapter of the relay's ``OutboxStore`` port and the watchdog's ``OutboxScanner``
port (azure-cosmos aio).

Applies the two conditional patches of an outbox document that ``shared.relay.outbox`` defines
(dispatched and parked), each on the version read (``OutboxRef``: If-Match on the etag the change
feed or the watchdog's query delivered), so a replayed batch never overwrites a newer state: a
412 means "already changed", not an error.

And the watchdog's query for stuck documents (``stuck``), one query a run, read page by page:

    SELECT * FROM c
    WHERE c.type = @type AND c.status = @status AND c.createdAt <= @cutoff
    ORDER BY c.type, c.status, c.createdAt

Every event type the outbox carries (OrderAccepted, OrderAmended, OrderCancelled) is one
``type: outbox``; orders and inbox markers have types of their own and are never read.

Its plan: the composite index (type, status, createdAt) of infra/orders-indexing.json
serves the two equalities, the one range filter (last) and the order ("Queries with a filter
and ORDER BY": the equality filters first in the ORDER BY, the range filter's property last,
learn.microsoft.com/azure/cosmos-db/index-policy), so the index seeks to the oldest stuck
document and every document loaded is one returned: a page of N costs about N RU (a 1 KB read
is 1 RU, learn.microsoft.com/azure/cosmos-db/request-units) plus the index lookup (about 3 RU
for an index-served query, learn.microsoft.com/azure/cosmos-db/nosql/troubleshoot-query-performance,
whose "Retrieved Document Count" equals the "Output Document Count" only when the index serves
the whole filter). No COUNT, no MIN: the oldest is the first document, the count the pages read
(``shared.relay.watchdog``). A run that stops after n pages has loaded n pages, and one page per
physical partition at most besides: across partitions the SDK reads a page from each range and
merges them in order (azure/cosmos/_execution_context/aio/multi_execution_aggregator.py), and
only a page it does not yet hold is read when asked for. ``createdAt`` is
``shared.clock.document_timestamp``: fixed width, UTC, ``Z``, so its string order is its time
order. Never creates or deletes documents; never touches orders; knows no field name of its own
(``shared.relay.outbox`` owns them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import document_timestamp
from idempotent_consumer.cosmos import OPERATION_TIMEOUT_S

from shared.adapters.cosmos_query import exact_pages
from shared.relay.outbox import (
    OUTBOX_TYPE,
    STATUS_PENDING,
    OutboxField,
    OutboxRef,
    PatchOperation,
    dispatched_patch,
    parked_patch,
)
from shared.relay.watchdog import Page

# WatchdogPolicy.is_stuck, as a query (tests/relay/test_watchdog.py holds the two together). The
# equalities, then the range filter, in the composite index's order; ORDER BY repeats them so
# that the index serves the order too (index-policy, "Queries with a filter and ORDER BY"):
# tests/infra/test_bicep.py holds these paths to the indexing policy.
STUCK_INDEX_PATHS = (OutboxField.TYPE, OutboxField.STATUS, OutboxField.CREATED_AT)
STUCK_QUERY = (
    f"SELECT * FROM c WHERE c.{OutboxField.TYPE} = @type AND c.{OutboxField.STATUS} = @status"
    f" AND c.{OutboxField.CREATED_AT} <= @cutoff"
    f" ORDER BY {', '.join(f'c.{path}' for path in STUCK_INDEX_PATHS)}"
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

    async def stuck(self, created_at_or_before: datetime, page_size: int) -> AsyncIterator[Page]:
        parameters: list[dict[str, Any]] = [
            {"name": "@type", "value": OUTBOX_TYPE},
            {"name": "@status", "value": STATUS_PENDING},
            {"name": "@cutoff", "value": document_timestamp(created_at_or_before)},
        ]
        async for page in exact_pages(self._container, STUCK_QUERY, parameters, page_size):
            yield page

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
