"""The Cosmos DB adapter of the relay's ``OutboxStore`` port (azure-cosmos aio).

Owns the two conditional patches of an outbox document: dispatched (``status``, ``dispatchedAt``,
``ttl``) and parked (``status``, ``parkedAt``, ``parkedReason``, ``parkedDescription``). Each is
conditional on the etag the change feed delivered (If-Match), so a replayed batch never
overwrites a newer state: a 412 means "already changed", not an error. Never creates or deletes
documents; never touches orders.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy

from shared.core import document_timestamp
from shared.cosmos_store import OPERATION_TIMEOUT_S  # the consumer's bound per operation
from shared.relay import STATUS_DISPATCHED, STATUS_PARKED, OutboundEvent


class CosmosOutboxStore:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    async def mark_dispatched(
        self, event: OutboundEvent, *, dispatched_at: datetime, ttl_s: int
    ) -> bool:
        return await self._patch(
            event.document_id,
            event.order_id,
            event.etag,
            [
                {"op": "set", "path": "/status", "value": STATUS_DISPATCHED},
                {"op": "set", "path": "/dispatchedAt", "value": document_timestamp(dispatched_at)},
                {"op": "set", "path": "/ttl", "value": ttl_s},
            ],
        )

    async def park(
        self,
        document: Mapping[str, Any],
        *,
        parked_at: datetime,
        reason: str,
        description: str,
    ) -> bool:
        return await self._patch(
            str(document.get("id")),
            str(document.get("orderId")),
            document.get("_etag"),
            [
                {"op": "set", "path": "/status", "value": STATUS_PARKED},
                {"op": "set", "path": "/parkedAt", "value": document_timestamp(parked_at)},
                {"op": "set", "path": "/parkedReason", "value": reason},
                {"op": "set", "path": "/parkedDescription", "value": description},
            ],
        )

    async def _patch(
        self,
        document_id: str,
        partition_key: str,
        etag: str | None,
        operations: list[dict[str, Any]],
    ) -> bool:
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            await self._container.patch_item(
                document_id,
                partition_key=partition_key,
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
