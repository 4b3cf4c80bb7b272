"""The consumer kit: the machinery every idempotent consumer shares, and nothing of any one.

A consumer is its contract, its effect and its outcome table on top of it; the kit owns the
rest:

- ``decision``: the delivery as a consumer sees it (``IncomingMessage``), the outcome and its
  settlement (one total table), the ``Decision``, and the ``DocumentStore`` port (atomic commits
  in one partition, point reads);
- ``writes``: what a consumer asks the store for, as data (create; patch on a condition);
- ``inbox``: the marker of a handled message, keyed by (consumer name, MessageId);
- ``errors``: every failure, classified by what a redelivery can fix;
- ``retry``: how one delivery rides out a failure while it holds its lock;
- ``message``: the checks every JSON message shares, the canonical fingerprint, ``ValidEvent``;
- ``apply``: an effect in one partition committed once with its marker, or behind a gate with
  its version alone (``apply_once``);
- ``consumer``: a consumer as a user writes one (``ConsumerDefinition``: its partitions, its
  effect in each, an optional gate) and ``decide`` over its partitions, behind a gate within
  its write window;
- ``external``: an effect outside the transaction (a payment): the in-progress record, the call
  with its idempotency key, the completed record (``CallingConsumerDefinition``, ``decide_call``);
- ``service``: the delivery decided, retried, settled once and reported (``Consumer``).

Three instances: the orders (``shared.consumer``), the stock reservation (``shared.stock``) and
the payment capture (``shared.payments``); ``examples/units_sold.py`` is
docs/your-own-consumer.md's fourth.

Imports only ``shared.clock``; never a consumer built on it, the relay, an adapter, telemetry,
config, Azure or OpenTelemetry (``make lint``: import-linter).
"""
