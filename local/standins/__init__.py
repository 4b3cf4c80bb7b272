"""The stand-ins: each reproduces one piece of Azure this machine cannot run, offers only what
the real service offers, cites its source for each behaviour, and lists what it does not do.

- ``broker``: the peek-lock queue (locks, delivery count, dead-letter sub-queue, duplicate
  detection); ``topic``: the ``order-events`` topic and its subscriptions; both read
  infra/messaging.json (``ops.messaging``);
- ``servicebus_link``: the real ``azure-servicebus`` client over those models, at its AMQP
  handler boundary;
- ``settlement_server``: the Functions host's gRPC settlement service;
- ``host``, ``change_feed``, ``timer``: the host's Service Bus, Cosmos DB and timer triggers;
  ``host_binding``: the bytes the host hands the worker for a message;
- ``worker``: Microsoft's Python worker (``azure_functions_runtime``) driven in-process;
  ``protos/``: the host-worker protocol it speaks;
- ``cosmos_server``: runs ``@vercel/cosmosdb-server``; ``faults``: fault injection below the
  real Cosmos SDK (an azure-core transport);
- ``ingestion``: Application Insights' ingestion endpoint, for the real exporter;
- ``payment_provider``: a payment provider over HTTP following the Idempotency-Key draft, its
  ledger the referee of the payment tests (not Azure: an outside system the app calls);
- ``doubles``: one test double per port of the cores, held to the port by the same contract
  suite as the real adapter (tests/contracts/).

Imports ``shared`` and ``ops.messaging`` only, and each other; never ``local.assembly``,
``local.scenarios`` or ``bench``. A stand-in that needs the app comes through the worker, as
the host does; a new Azure behaviour is modelled here, with its source.
"""
