"""Benchmarks of the idempotent order consumer: ``python -m bench`` (``make bench``).

Five targets, measured in one run on one machine and written to ``bench/results.json`` and
``docs/benchmarks.md``:

1. Cosmos DB requests per outcome, counted at the azure-core transport (``bench.transport``).
2. CPU of the consumer core per message, no I/O (``bench.cpu``).
3. End-to-end throughput through the local stand-in against a bare ``create_item`` loop
   (``bench.throughput``), and against the platform floor: a function that does only what the
   platform requires, decoding, the same write and settlement (``bench.floor_app``).
4. Cold start: importing ``function_app`` against importing its third-party dependencies alone
   (``bench.coldstart``).
5. Resident memory over many messages (``bench.memory``).

``bench.optimisations`` measures what the individual design choices are worth. Nothing here is
product code: the two-phase idempotency record in ``bench.peer`` is a peer model for contrast.
"""
