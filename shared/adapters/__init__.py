"""The adapters: one module per outside system and direction, each translating between an SDK
and a core's port, and the SDK's errors into the core's classes.

- ``cosmos_orders``: Cosmos DB, the order store (``shared.consumer.core.OrderStore``: the create
  or transactional batch, the point read) and the kit's ``DocumentStore`` on any container
  (``CosmosDocumentStore``: inventory, payments), with the request's deadline and error table;
- ``cosmos_outbox``: Cosmos DB, the outbox (``shared.relay.core.OutboxStore``: the conditional
  patches; ``shared.relay.watchdog.OutboxScanner``: the query for stuck documents);
- ``servicebus_in``: Service Bus in: a received message read into an ``IncomingMessage`` and
  its settlement over the host's gRPC, on a thread pool of its own;
- ``servicebus_out``: Service Bus out: the relay's ``EventPublisher`` on the topic sender, and
  the public edge's ``MessageSender`` on the ``orders`` queue sender;
- ``http_in``: HTTP in: the orders API's ``func.HttpRequest`` read for the edge, its
  ``EdgeResponse`` written back (the client id decision and its limit);
- ``payment_provider``: the payment provider over HTTP (aiohttp): the
  ``shared.payments.provider.PaymentProvider`` port, the Idempotency-Key header;
- ``identity``: the Entra ID credential of each client, the Functions host's own rule.

Imports the cores, ``shared.config``, ``shared.clock``, ``shared.message_body`` and the Azure
SDKs; never ``shared.telemetry`` or ``shared.bootstrap`` (``make lint``). An adapter decides
nothing (what to retry, park or dead-letter is the cores'), and is built only in
``shared.bootstrap``. A new outside system is a new module here and a port in a core.
"""
