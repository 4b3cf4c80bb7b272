"""PEER MODEL, NOT PRODUCT CODE: a two-phase idempotency record in the style of AWS Lambda
Powertools' idempotency utility, run against the same Cosmos DB server to count its requests.

Per message: create an ``INPROGRESS`` record keyed by the idempotency key (conditional put), run
the business write, then mark the record ``COMPLETED``. A duplicate finds the record (the
conditional create conflicts) and reads it. Powertools on DynamoDB gets the old record back with
the failed conditional put; Cosmos DB has no such option, hence the point read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import ContainerProxy

from shared.cosmos_store import OPERATION_TIMEOUT_S, CosmosOrderStore


class TwoPhaseIdempotency:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container
        self._store = CosmosOrderStore(container)  # the same business write as the consumer's

    async def handle(self, documents: Sequence[Mapping[str, Any]], request_hash: str) -> str:
        order_id = str(documents[0]["orderId"])
        key = f"idempotency:{order_id}"
        record = {"id": key, "orderId": order_id, "status": "INPROGRESS", "hash": request_hash}
        try:
            await self._container.create_item(record, timeout=OPERATION_TIMEOUT_S)
        except cosmos_errors.CosmosResourceExistsError:
            existing = await self._container.read_item(
                key, partition_key=order_id, timeout=OPERATION_TIMEOUT_S
            )
            if existing.get("hash") != request_hash:
                return "mismatch"
            return "duplicate" if existing.get("status") == "COMPLETED" else "in_progress"
        await self._store.create(documents)
        await self._container.replace_item(
            key, {**record, "status": "COMPLETED"}, timeout=OPERATION_TIMEOUT_S
        )
        return "processed"
