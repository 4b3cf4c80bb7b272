"""The Cosmos DB adapter of the request completer's ``UnsentRequests`` port (azure-cosmos aio):
the one query over the ``requests`` container, read page by page.

    SELECT * FROM c
    WHERE c.type = @type AND c.sent = @sent AND c.startedAt <= @cutoff
    ORDER BY c.type, c.sent, c.startedAt

Request records only (``type: edge-request``; the orders' heads have a type of their own and no
``sent``), not yet sent, started at or before the cutoff, oldest first, across partitions.

Its plan, as the outbox watchdog's (``shared.adapters.cosmos_outbox``): the composite index
(type, sent, startedAt) of infra/requests-indexing.json serves the two equalities, the one range
filter (last) and the order ("Queries with a filter and ORDER BY": the equality filters first
in the ORDER BY, the range filter's property last, learn.microsoft.com/azure/cosmos-db/
index-policy; and "Queries that have an ORDER BY clause with two or more properties require a
composite index", same page), so the index seeks to the oldest unsent record and every
document loaded is one returned. No COUNT, no MIN: the oldest is the first document, the count
the pages read. ``startedAt`` is ``shared.clock.document_timestamp``: fixed width, UTC, ``Z``,
so its string order is its time order. Reads only: the marks are the edge's store's
(``CosmosDocumentStore``); knows no field name of its own (``shared.edge.requests`` owns them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import document_timestamp

from shared.adapters.cosmos_query import exact_pages
from shared.edge.completer import Page
from shared.edge.requests import REQUEST_TYPE, RequestField

# CompleterPolicy.is_unsent, as a query (tests/edge/test_completer.py holds the two together):
# the equalities, then the range filter, in the composite index's order; ORDER BY repeats them so
# that the index serves the order too. tests/infra/test_completer_bicep.py holds these paths to
# the indexing policy.
UNSENT_INDEX_PATHS = (RequestField.TYPE, RequestField.SENT, RequestField.STARTED_AT)
UNSENT_QUERY = (
    f"SELECT * FROM c WHERE c.{RequestField.TYPE} = @type AND c.{RequestField.SENT} = @sent"
    f" AND c.{RequestField.STARTED_AT} <= @cutoff"
    f" ORDER BY {', '.join(f'c.{path}' for path in UNSENT_INDEX_PATHS)}"
)


class CosmosUnsentRequests:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    async def unsent(self, started_at_or_before: datetime, page_size: int) -> AsyncIterator[Page]:
        parameters: list[dict[str, Any]] = [
            {"name": "@type", "value": REQUEST_TYPE},
            {"name": "@sent", "value": False},
            {"name": "@cutoff", "value": document_timestamp(started_at_or_before)},
        ]
        async for page in exact_pages(self._container, UNSENT_QUERY, parameters, page_size):
            yield page
