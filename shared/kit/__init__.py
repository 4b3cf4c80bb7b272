"""The consumer kit: the machinery every idempotent consumer shares, and nothing of any one.

A consumer is its contract, its effect and its outcome table on top of it; the kit owns the
rest:

- ``decision``: the delivery as a consumer sees it (``IncomingMessage``), the outcome and its
  settlement (one total table), the ``Decision``, and the ``DocumentStore`` port (atomic commits
  in one partition, point reads);
- ``writes``: what a consumer asks the store for, as data (create; patch on a condition);
- ``inbox``: the marker of a handled message, keyed by (consumer name, MessageId);
- ``errors``: every failure, classified by what a redelivery can fix;
- ``retry``: how one delivery rides out a failure while it holds its lock.

Imports only ``shared.clock``; never a consumer built on it (``shared.consumer``), the relay, an
adapter, telemetry, config, Azure or OpenTelemetry (``make lint``: import-linter).
"""
