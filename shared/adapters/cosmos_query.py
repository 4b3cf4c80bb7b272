"""A Cosmos DB query read in pages of an exact size: what the outbox watchdog and the request
completer scan their stragglers with (``shared.adapters.cosmos_outbox``,
``shared.adapters.cosmos_requests``). Reads only; never writes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer.cosmos import OPERATION_TIMEOUT_S


async def exact_pages(
    container: ContainerProxy, query: str, parameters: list[dict[str, Any]], page_size: int
) -> AsyncIterator[list[dict[str, Any]]]:
    """The query's documents in pages of exactly ``page_size``, the last one shorter. A query
    execution may return fewer items than MaxItemCount (throttled, too large, too long), even
    none (learn.microsoft.com/azure/cosmos-db/nosql/query/pagination): the pages are made here."""
    responses = container.query_items(
        query, parameters=parameters, max_item_count=page_size, timeout=OPERATION_TIMEOUT_S
    ).by_page()
    page: list[dict[str, Any]] = []
    async for response in responses:
        async for document in response:
            page.append(document)
            if len(page) == page_size:
                yield page
                page = []
    if page:
        yield page
