"""The order consumer, an instance of the kit (``shared.kit``): order messages in (OrderPlaced,
OrderAmended, OrderCancelled), the order document and its events out.

- ``contract``: the order messages' contracts (validation, the canonical fingerprints) and the
  v1 events' shapes (OrderAccepted, OrderAmended, OrderCancelled);
- ``core``: ``decide``, the ``OrderStore`` port, the OrderPlaced path (the order document is
  its own marker: a new order is one write);
- ``lifecycle``: the lifecycle's effect on the kit (``OrderChange``: a change applied once, in
  any order of arrival, converging on the highest version);
- ``order``: the order document, its one owner;
- ``errors``: the order consumer's own errors;
- ``service``: ``OrderConsumer``, the kit's ``Consumer`` deciding with ``core.decide``.

Imports the kit, ``shared.clock``, ``shared.relay.outbox`` (the change's outbox event goes into
the same batch) and pydantic; never an adapter, telemetry, config, bootstrap, Azure,
OpenTelemetry or aiohttp (``make lint``). Its ports are implemented by
``shared.adapters.cosmos_orders`` (``OrderStore``), ``shared.adapters.servicebus_in``
(settlement) and ``shared.telemetry.consumer`` (``ConsumerObserver``).
"""
