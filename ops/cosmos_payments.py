"""The tool's Cosmos DB adapter over the payments container (``azure-cosmos`` aio: the client the
app's store adapter runs on; partitioned on ``/orderId``): the ``ops.payments.ParkedStates``
query, and the kit's ``DocumentStore`` as the consumer itself writes through it
(``idempotent_consumer.cosmos.CosmosDocumentStore``: a point read, one transactional batch),
so an operator's resolution is the consumer's own write. A key (emulators) or Entra ID
(``DefaultAzureCredential``: a Cosmos DB data reader role for ``parked``, a data contributor
role for ``resolve``).

``parked`` is one cross-partition query: no partition key given, the SDK runs it against every
physical partition (``query_items``, azure/cosmos/aio/_container.py:596-597: "If the partition
key is set to None, it will perform a cross partition query"), each answering from its index
(the payments container keeps the default policy, every path indexed: infra/app/cosmos.bicep),
so its charge is a few RU per physical partition plus the parked states it returns
(learn.microsoft.com/azure/cosmos-db/nosql/how-to-query-container, "Cross-partition query";
learn.microsoft.com/azure/cosmos-db/optimize-cost-reads-writes). Parked calls are rare (a
provider that honours no key and cannot say, after three deliveries) and each raises a
severity-1 alert, so the result is small and the query runs when an operator asks, never on a
hot path. The tool prints its charge from the responses' ``x-ms-request-charge``.

Never deletes a document; writes only through ``ops.payments.resolve``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import CallField, StateField

from ops.payments import ParkedRead
from shared.payments.capture import PAYMENT_TYPE, STATE_ID, PaymentField

_FIELDS = ", ".join(
    f"c.{name}"
    for name in (
        StateField.ID,
        PaymentField.ORDER_ID,
        StateField.VERSION,
        StateField.REVISION,
        StateField.PENDING,
        PaymentField.CAPTURED,
    )
)


class CosmosParkedStates:
    def __init__(self, container: ContainerProxy) -> None:
        self._container = container

    async def parked(self) -> ParkedRead:
        charge = [0.0]

        def count(headers: Mapping[str, Any], *_: Any) -> None:
            charge[0] += float(headers.get("x-ms-request-charge", 0) or 0)

        # A boolean literal, and the names the kit and the instance own (no user input).
        query = (
            f"SELECT {_FIELDS} FROM c WHERE c.{StateField.TYPE} = {json.dumps(PAYMENT_TYPE)} "
            f"AND c.{StateField.ID} = {json.dumps(STATE_ID)} "
            f"AND c.{StateField.PENDING}.{CallField.RECONCILE} = true"
        )
        states = [
            dict(item) async for item in self._container.query_items(query, response_hook=count)
        ]
        return ParkedRead(states, charge[0])
