"""The runs of ``python -m local``: ``demo`` (``make demo``) and ``chaos`` (``make chaos``), a
scenario per concern, each with its table of invariants, composed by a short runner.

- ``demo``: the runner: the world, the phases in order, each scenario's table, the exit status;
- ``options``: their options, defined once (each field is a command-line flag), ``CHAOS``;
- ``orders``: the seeded producer's plan and its trouble, the orders' figures and table;
- ``relay``: the relay run to idle through its trouble, the watchdog's and the parked events'
  phases, each with its claim;
- ``inventory``: the stock seeded for the run's SKUs, ``reserve_stock`` on the order events, its
  stock table and invariants;
- ``payments``: ``capture_payment`` on the order events at the provider stand-in (its faults, a
  declined card), its ledger table and invariants;
- ``lifecycle``: amendments and cancellations out of order, a scenario on a world of its own (and
  the convergence ``make chaos`` checks over the lifecycles it mixes in);
- ``api``: the orders API through the HTTP host, a seeded client retrying each
  Idempotency-Key through lost answers, 409s and 503s, on a world of its own, and its table;
- ``chaos``: the faults below the Cosmos SDK;
- ``deliveries``: the trouble a delivery gets and the consumers' outcome logs, counted;
- ``invariants``: the orders' table of invariants, each defined once (``ops.audit``'s, plus what
  only the demo can know because it sent every message);
- ``tables``: how a table of figures or invariants looks;
- ``tool_runs``: ``python -m ops`` over the demo's own data, one command at a time, with the
  adapters the tool builds in Azure.

Imports ``local.assembly``, ``local.standins``, ``ops`` and ``shared``; never ``bench``. A new
invariant goes into ``ops`` (``ops.audit``, ``ops.stock``) when an operator can check it on a
live deployment, and into a scenario only when it needs what only the demo knows. A new concern
is a module of its own with its table, added to the runner's phases.
"""
