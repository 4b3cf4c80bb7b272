"""Service Bus, as the kit meets it in an Azure Functions app: a received message read into an
``IncomingMessage`` (``to_incoming``, with the one reading of an AMQP body, ``read_body``), and
the kit's decision settled exactly once through the trigger's message actions (``Settler``: its
own bounded thread pool, a bounded wait, hung calls reported); ``handle_delivery`` is one
delivery through a kit consumer, the configuration-error hold included.

Imports no Azure library: it reads the received message's attributes and calls the message
actions' three methods (``MessageActions``), whatever object carries them.
"""

from __future__ import annotations

from idempotent_consumer.servicebus._body import (
    MAX_REPR_CHARS,
    BodyKind,
    MessageBody,
    property_text,
    read_body,
)
from idempotent_consumer.servicebus._delivery import handle_delivery
from idempotent_consumer.servicebus._host import (
    DEFAULT_MAX_CONCURRENT_CALLS,
    app_host_json,
    max_concurrent_calls,
)
from idempotent_consumer.servicebus._incoming import to_incoming
from idempotent_consumer.servicebus._settlement import (
    MAX_POOLS,
    SETTLEMENT_TIMEOUT_S,
    HungSettlements,
    MessageActions,
    SettlementWatcher,
    Settler,
)

__all__ = [
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "MAX_POOLS",
    "MAX_REPR_CHARS",
    "SETTLEMENT_TIMEOUT_S",
    "BodyKind",
    "HungSettlements",
    "MessageActions",
    "MessageBody",
    "SettlementWatcher",
    "Settler",
    "app_host_json",
    "handle_delivery",
    "max_concurrent_calls",
    "property_text",
    "read_body",
    "to_incoming",
]
