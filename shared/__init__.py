"""The idempotent order consumer: everything the Functions app runs, and all of it that ships
(`.funcignore`). Layers, each importing only those below it (``make lint``: the contracts of
``[tool.importlinter]`` in pyproject.toml, docs/architecture.md "Layout"):

- ``bootstrap``: the composition root, the one place that builds adapters from app settings
  and wires them into the cores (``function_app.py`` calls only this);
- ``telemetry/``: OpenTelemetry, the observer ports of the cores implemented;
- ``adapters/``: one module per outside system and direction (Cosmos DB orders and the kit's
  document store, Cosmos DB outbox, Service Bus in, Service Bus out, the payment provider, the
  Entra ID credential);
- ``config``: app settings and host.json, read once and validated;
- ``consumer/`` and ``relay/``: the order consumer and its outbox relay (they share the order
  events' contract and the outbox document, so they may import each other); ``stock/`` (the
  stock reservation) and ``payments/`` (the payment capture and its provider's port): the other
  consumers, each importing no other; pure: no adapter, telemetry, config, Azure,
  OpenTelemetry or aiohttp;
- ``kit/``: the consumer machinery every consumer is an instance of (imports no consumer);
- ``clock`` and ``message_body``: time and the reading of a message body, below everything.

It never imports ``ops``, ``local``, ``bench`` or ``tools``: they use it, never the reverse.
Where to change what: a rule of the flow in ``consumer/core.py`` or ``relay/core.py``; a field
of the message in ``consumer/contract.py``; the outbox document in ``relay/outbox.py``; a call
to Azure in ``adapters/``; a setting in ``config.py``; a name operators query in
``telemetry/names.py`` (with infra/); what is built with what in ``bootstrap.py``.
"""
