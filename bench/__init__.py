"""Benchmarks of the idempotent order consumer: ``python -m bench`` (``make bench``).

Twelve targets, each a verdict of one run on one machine, written to ``bench/results.json`` and
``docs/benchmarks.md``:

1. Cosmos DB requests per outcome, OrderPlaced's and the order lifecycle's (an applied message
   1, the floor; duplicate, mismatch, a change before its order, InvalidTransition 2; stale 3;
   invalid 0), counted at the azure-core transport (``bench.request_counts``).
2. The consumer's own CPU per message (``decide``, no I/O) ≤ 10% of the SDK's CPU for one
   ``create_item`` in the same run (``bench.cpu``).
3. Consumer throughput ≥ 0.93 × the platform floor (``bench.floor_app``) at concurrency 16
   (``bench.throughput``).
4. Cold start: importing ``function_app`` ≤ 10% over its third-party imports, and a fresh
   interpreter to the first message settled through the worker ≤ 1.25 × the platform floor's
   (``bench.coldstart``, ``bench.first_message``).
5. Flat resident memory over many messages (``bench.memory``).
6. The relay on one lease with marks in flight: events/s ≥ the tiers' per-lease need, its CPU per
   event ≤ the consumer's per order in the same run, round trips modelled (``bench.relay``,
   ``bench.latency``).
7. Log Analytics: no row per healthy order outside the sampled traces, through the real exporter
   (``bench.ingestion``, ``bench.ingestion_scenario``).
8. One outbox watchdog run over a backlog (10,000 stuck events): the documents its queries load,
   counted at the transport, ≤ 1.1 × those it publishes plus a page, no aggregate, the run
   within its schedule's period; its drain capacity against the tiers (``bench.watchdog``).
9. The stock reservation consumer: Cosmos DB requests per event and per SKU for each path
   (accepted, amendment, cancellation, shortfall, duplicate, stale) against the floor of one
   batch per SKU touched plus the order's index, counted at the transport; the kit's CPU per
   event ≤ 10% of the SDK's CPU for the event's floor requests (``bench.stock``).
10. The payment capture consumer: Cosmos DB requests and provider calls per event for each path
    (accepted; an amendment's capture and refund; a cancellation's refund; a cancellation before
    any capture; duplicate; stale; a call resumed after a stop before its completed record, with
    the provider honouring keys and ignoring them) against the floor of two writes and one call,
    the provider's ledger the referee; the kit's CPU per event (``decide_call``) beside the order
    consumer's, ≤ 10% of the SDK's CPU for its two floor writes (``bench.payments``).
11. One SKU's logical partition in steady state (orders with amendments and cancellations, the
    stock sold out): the bytes it keeps within its stock item and ``onHand`` reservations
    halfway and at the end, no marker, and its steady state at the most orders per second one
    partition takes within its bound and below 20 GB: never full, at every tier
    (``bench.storage``).
12. The orders API (the public edge) through the HTTP host and the worker: Cosmos DB requests
    by kind and queue sends per place, amendment and cancellation, and per replay (same key and
    body), against the floor of two writes and one send (a change one read more; a replay one
    read, no send), with the optimistic place (commit first) beside it; a replay that sends
    stops the run; a place's latency p50/p99 through the host against ``consume_order``'s for
    the same message, in the same run (``bench.edge``).

They run on the one local stand-in, ``local.assembly.world.local_world`` (through
``bench.standin``): every function invocation goes through Microsoft's worker,
``azure_functions_runtime``. Nothing here is product code, and nothing ships (``.funcignore``).

``bench`` is the top layer: it may import ``local``, ``ops`` and ``shared``, and nothing imports
it (``make lint``). A new target is a module here, with its verdict in ``bench.report``.
"""
