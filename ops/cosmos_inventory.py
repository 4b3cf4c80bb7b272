"""The tool's Cosmos DB adapter over the inventory container (``azure-cosmos``, sync client;
partitioned on ``/sku``): the ``ops.stock.Inventory`` port. A key (emulators) or Entra ID
(``DefaultAzureCredential``: a Cosmos DB data reader role for ``show`` and ``audit``, a data
contributor role for ``set`` and ``seed``).

Requests, each in one SKU's partition unless said:

- ``stock_item``: a point read (1 RU for a document under 1 KB,
  learn.microsoft.com/azure/cosmos-db/request-units);
- ``create_stock_item``: one create; 409 when the SKU has one (``CosmosResourceExistsError``);
- ``set_on_hand``: one partial document update of ``/onHand`` with a filter predicate
  (``ContainerProxy.patch_item(filter_predicate=...)``, azure/cosmos/container.py:1473-1507):
  "the operation fails if the precondition specified in the predicate isn't satisfied"
  (learn.microsoft.com/azure/cosmos-db/partial-document-update), 412, raised as
  ``CosmosAccessConditionFailedError`` (azure/cosmos/_synchronized_request.py:306). The store
  checks the predicate against the item as stored when it applies the patch, so an increment
  of ``reserved`` the consumer commits in between is never overwritten and never passes the
  new ``onHand``: the same mechanics as the consumer's conditional increments
  (``idempotent_consumer.cosmos.filter_predicate``);
- ``partition``: one query with ``partition_key=<sku>`` (a query targeted at one partition key
  value, container.py ``query_items``) returning the stock item and the SKU's reservations,
  their fields projected. Its charge grows with the SKU's reservations (one per order holding
  stock there, and the tombstones of the last minutes' releases: shared.stock.inventory), as
  the charge of a query grows with the documents it loads
  (learn.microsoft.com/azure/cosmos-db/optimize-cost-reads-writes); the tool prints it from
  the responses' ``x-ms-request-charge``;
- ``stocked_skus``: one cross-partition query on ``type`` (indexed), one small document per
  stocked SKU.

Never deletes a document, never writes ``reserved`` or a reservation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import (
    CosmosAccessConditionFailedError,
    CosmosResourceExistsError,
    CosmosResourceNotFoundError,
)

from ops.stock import Patched, StockPartition
from shared.stock.inventory import RESERVATION_TYPE, STOCK_ITEM_ID, STOCK_ITEM_TYPE, Field

_PARTITION_FIELDS = ", ".join(
    f"c.{name}"
    for name in (
        Field.ID,
        Field.TYPE,
        Field.ORDER_ID,
        Field.ON_HAND,
        Field.RESERVED,
        Field.REQUESTED,
        Field.BACKORDERED,
    )
)


class CosmosInventory:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    def stock_item(self, sku: str) -> dict[str, Any] | None:
        try:
            return dict(self._container.read_item(STOCK_ITEM_ID, partition_key=sku))
        except CosmosResourceNotFoundError:
            return None

    def create_stock_item(self, document: Mapping[str, Any]) -> bool:
        try:
            self._container.create_item(dict(document))
        except CosmosResourceExistsError:
            return False
        return True

    def set_on_hand(self, sku: str, on_hand: int) -> Patched:
        # Cosmos DB's string literals take JSON's double quotes (learn.microsoft.com/azure/
        # cosmos-db/nosql/query/constants); the integer is the tool's own, validated.
        predicate = (
            f"FROM c WHERE c.{Field.TYPE} = {json.dumps(STOCK_ITEM_TYPE)} "
            f"AND c.{Field.RESERVED} <= {int(on_hand)}"
        )
        try:
            self._container.patch_item(
                STOCK_ITEM_ID,
                partition_key=sku,
                patch_operations=[{"op": "set", "path": f"/{Field.ON_HAND}", "value": on_hand}],
                filter_predicate=predicate,
            )
        except CosmosAccessConditionFailedError:
            return Patched.REFUSED
        except CosmosResourceNotFoundError:
            return Patched.MISSING
        return Patched.APPLIED

    def partition(self, sku: str) -> StockPartition:
        charge = [0.0]

        def count(headers: Mapping[str, Any], *_: Any) -> None:
            charge[0] += float(headers.get("x-ms-request-charge", 0) or 0)

        documents = [
            dict(item)
            for item in self._container.query_items(
                f"SELECT {_PARTITION_FIELDS} FROM c WHERE c.{Field.SKU} = @sku "
                f"AND c.{Field.TYPE} IN (@stock, @reservation)",
                parameters=[
                    {"name": "@sku", "value": sku},
                    {"name": "@stock", "value": STOCK_ITEM_TYPE},
                    {"name": "@reservation", "value": RESERVATION_TYPE},
                ],
                partition_key=sku,
                response_hook=count,
            )
        ]
        return StockPartition(documents, charge[0])

    def stocked_skus(self) -> list[str]:
        return [
            str(sku)
            for sku in self._container.query_items(
                f"SELECT VALUE c.{Field.SKU} FROM c WHERE c.{Field.TYPE} = @type "
                f"AND c.{Field.ID} = @id",
                parameters=[
                    {"name": "@type", "value": STOCK_ITEM_TYPE},
                    {"name": "@id", "value": STOCK_ITEM_ID},
                ],
                enable_cross_partition_query=True,
            )
        ]
