"""The public edge: the orders API's core, pure. A client's request (place, amend, cancel, each
under an Idempotency-Key) becomes one recorded intent and one message on the ``orders`` queue,
with one identity from the client's first click to every consumer's record.

- ``core``: ``OrdersEdge``, the application service (its docstring: each step and why);
- ``requests``: the ``requests`` container's documents, their one owner (the order's head, the
  request records), the key's format, fingerprint, expiry and scope;
- ``responses``: ``EdgeResponse`` and the RFC 9457 problem documents;
- ``observer``: the ``EdgeObserver`` port each answered request is reported to, its ``Route``
  and ``RequestOutcome`` vocabularies (``shared.telemetry.edge`` implements it);
- ``sender``: the ``MessageSender`` port to the ``orders`` queue;
- ``view``: ``GET /orders/<orderId>``, the order as the consumer recorded it.

Imports the kit (its ``DocumentStore`` port and writes), the order contract
(``shared.consumer.contract``) and ``shared.clock``; never an adapter, telemetry, config,
Azure, OpenTelemetry or aiohttp (``make lint``). Its store port is implemented by
``idempotent_consumer.cosmos.CosmosDocumentStore``, its sender's by
``shared.adapters.servicebus_out.ServiceBusOrderSender``; the HTTP functions translate through
``shared.adapters.http_in``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.edge.core import OrdersEdge
    from shared.edge.observer import EdgeObserver, RequestOutcome, Route
    from shared.edge.requests import CONTAINER_NAME, KEY_EXPIRY, PARTITION_KEY_PATH
    from shared.edge.responses import EdgeResponse
    from shared.edge.sender import MessageSender, SendFailed

# Each public name's module, imported on first use (PEP 562): ``function_app`` reads the request
# completer's schedule from ``shared.edge.completer`` at indexing, and a cold start for an order
# must not load the whole orders API with it (docs/benchmarks.md, target 4).
_MODULES = {
    "CONTAINER_NAME": "requests",
    "KEY_EXPIRY": "requests",
    "PARTITION_KEY_PATH": "requests",
    "EdgeObserver": "observer",
    "EdgeResponse": "responses",
    "MessageSender": "sender",
    "OrdersEdge": "core",
    "RequestOutcome": "observer",
    "Route": "observer",
    "SendFailed": "sender",
}
__all__ = [
    "CONTAINER_NAME",
    "KEY_EXPIRY",
    "PARTITION_KEY_PATH",
    "EdgeObserver",
    "EdgeResponse",
    "MessageSender",
    "OrdersEdge",
    "RequestOutcome",
    "Route",
    "SendFailed",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
