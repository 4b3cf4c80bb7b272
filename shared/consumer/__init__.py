"""The consumer's core: one delivered OrderPlaced message in, one outcome and its settlement
out, settled exactly once and recorded.

- ``contract``: the OrderPlaced v1 contract (validation, the canonical request fingerprint)
  and the v1 events' shapes (OrderAccepted, OrderAmended, OrderCancelled);
- ``errors``: every error the core understands, classified by what a redelivery can fix;
- ``core``: ``decide``, the ``OrderStore`` port, the message, outcome, settlement and retry
  policy types, and the order document;
- ``service``: ``OrderConsumer``, the application service: decide, settle through the bound
  ``Settle`` callable, report to the ``ConsumerObserver`` port.

Imports only ``shared.clock``, ``shared.relay.outbox`` (the order's outbox document goes into
the same batch) and pydantic; never an adapter, telemetry, config, bootstrap, Azure,
OpenTelemetry or aiohttp (``make lint``). Its ports are implemented by
``shared.adapters.cosmos_orders`` (``OrderStore``), ``shared.adapters.servicebus_in``
(settlement) and ``shared.telemetry.consumer`` (``ConsumerObserver``).
"""
