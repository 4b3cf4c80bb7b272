"""The relay's core: every pending outbox document published to the topic at least once, and
never stuck unseen.

- ``outbox``: the outbox document, its one owner (field names, type and statuses, ids,
  building, reading, the dispatched, parked and pending-again patches);
- ``core``: ``OutboxRelay``: which documents to publish, the v1 message each
  becomes, what a failed send means (park the event, or fail the invocation for the host to
  re-run); the ``EventPublisher``, ``OutboxStore`` and ``RelayObserver`` ports;
- ``watchdog``: ``OutboxWatchdog``: the documents still pending after a while, found by query
  and published anyway; the ``OutboxScanner`` and ``WatchdogObserver`` ports.

Imports only ``shared.clock`` and ``shared.consumer.contract`` (the event's shape); never an
adapter, telemetry, config, bootstrap, Azure, OpenTelemetry or aiohttp (``make lint``). Its
ports are implemented by ``shared.adapters.servicebus_out`` (``EventPublisher``),
``shared.adapters.cosmos_outbox`` (``OutboxStore``, ``OutboxScanner``) and
``shared.telemetry.relay`` (the observers).
"""
