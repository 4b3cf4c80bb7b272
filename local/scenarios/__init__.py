"""The runs of ``python -m local``: ``demo`` (``make demo``) and ``chaos`` (``make chaos``).

- ``options``: their options, defined once (each field is a command-line flag), ``CHAOS``;
- ``demo``: the seeded producer and its trouble, the run on ``local.assembly.world``, the
  rendering of its tables and its exit status;
- ``invariants``: the table of invariants the demo checks, each defined once (``ops.audit``'s,
  plus what only the demo can know because it sent every message);
- ``tool_runs``: ``python -m ops`` over the demo's own data, one command at a time, with the
  adapters the tool builds in Azure.

Imports ``local.assembly``, ``local.standins``, ``ops`` and ``shared``; never ``bench``. A new
invariant goes into ``ops.audit`` when an operator can check it on a live deployment, and into
``invariants`` only when it needs what only the demo knows.
"""
