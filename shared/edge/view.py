"""An order as the API shows it (``GET /orders/<orderId>``): the order the consumer recorded in
the ``orders`` container, to the client that placed it.

The answer is the consumer's document, not the edge's head: what the system did with the
messages, its ``status`` (``accepted`` or ``cancelled``), ``orderVersion`` and state, with
``ETag: "<orderVersion>"`` (the tag a change's If-Match names; RFC 9110, section 8.8.3). It
follows the edge's 201/200 asynchronously: until the consumer has applied a version the answer
shows the one before, and until it has applied the first it is 404, as for an order that does
not exist. An order is shown only to its client (the edge's head names it): another client's
order is 404, as the changes answer (``shared.edge.core``, step 4).

Only the fields below are shown: the order's identity and state, never the consumer's
bookkeeping (``requestHash``, ``messageId``, markers, ``correlationId``).

Imports the kit's store port, the order document's names and the edge's own modules; never
Azure. A store error is answered 503 with Retry-After, as the core answers it.
"""

from __future__ import annotations

import re
from typing import Any

from idempotent_consumer import DocumentStore, StoreError

from shared.consumer.order import ORDER_TYPE, stored_version
from shared.edge import responses
from shared.edge.observer import RequestOutcome
from shared.edge.requests import HEAD_ID, read_head
from shared.edge.responses import JSON, EdgeResponse, etag

# The order document's fields a client sees (shared.consumer.order).
SHOWN_FIELDS = (
    "orderId",
    "orderVersion",
    "status",
    "customerId",
    "currency",
    "lines",
    "totalMinor",
    "placedAt",
    "amendedAt",
    "cancelledAt",
    "cancellationReason",
)
RETRY_AFTER_S = 1
_ORDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")  # the contract's orderId


async def order_view(
    requests: DocumentStore, orders: DocumentStore, client_id: str, order_id: str
) -> EdgeResponse:
    """200 with the order and its ETag; 404 when it is not this client's or not recorded yet."""
    if _ORDER_ID.fullmatch(order_id) is None:
        return responses.not_found()  # no order can have this id
    try:
        head = await requests.read(order_id, HEAD_ID)
        if head is None or read_head(head).client_id != client_id:
            return responses.not_found()
        order = await orders.read(order_id, order_id)
    except StoreError:
        return responses.unavailable(RETRY_AFTER_S)
    if order is None or order.get("type", ORDER_TYPE) != ORDER_TYPE:
        return responses.not_found()
    body: dict[str, Any] = {name: order[name] for name in SHOWN_FIELDS if name in order}
    version = stored_version(order)
    body["orderVersion"] = version
    return EdgeResponse(
        200, {"Content-Type": JSON, "ETag": etag(version)}, body, outcome=RequestOutcome.FOUND
    )
