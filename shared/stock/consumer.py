"""The stock reservation consumer, as the kit takes it: its name, its contract, its partitions
and its effects. Everything else (the marker, the retry, the classification, the settlement,
the telemetry) is the kit's (``shared.kit``).

For any arrival order, duplicates and stops, each SKU's ``reserved`` is the sum over orders of
what their highest versions reserve, never below zero and never above ``onHand``
(tests/stock). No Azure imports.
"""

from __future__ import annotations

from idempotent_consumer import ConsumerDefinition, ValidEvent

from shared.stock.contract import parse_event, wanted
from shared.stock.effects import OrderIndex, Reserve
from shared.stock.inventory import PARTITION_FIELD

# Part of every marker's key: never rename it (every retained or replayed event would be
# reserved again as new).
CONSUMER_NAME = "stock-reservation"


def _own_skus(event: ValidEvent) -> list[str]:
    return list(wanted(event))


stock_reservation: ConsumerDefinition[ValidEvent] = ConsumerDefinition(
    name=CONSUMER_NAME,
    partition_field=PARTITION_FIELD,
    parse=parse_event,
    partitions=_own_skus,
    effect=Reserve,
    gate=OrderIndex,
)
