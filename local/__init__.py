"""What this machine lacks, stood in for around the real app, and what runs on it: ``python -m
local demo|chaos`` (``make demo``, ``make chaos``), the tests' and the benchmark's world.

- ``standins/``: one module per missing piece of Azure (queue, topic, settlement server,
  Functions host and triggers, Microsoft's worker driven in-process, change feed, Cosmos DB API
  server, ingestion endpoint, faults below the real SDKs), and the one double per port;
- ``assembly/``: the stand-ins and the real app put together once (``world.local_world``), and
  the dead-letter port over the local broker;
- ``scenarios/``: the demo and chaos runs: options, driving, the invariants' table, and the
  operator tool run over the demo's own data.

Dependencies: ``local`` may import ``ops`` and ``shared``, never ``bench`` (``make lint``);
inside it, ``scenarios`` -> ``assembly`` -> ``standins``, never back. Nothing in ``shared`` or
``ops`` knows it exists: it injects through ``shared.bootstrap`` and through the real SDKs'
own boundaries (an azure-core transport, the Service Bus client's AMQP handlers), never
through a hook in product code. Nothing here ships (``.funcignore``).
"""
