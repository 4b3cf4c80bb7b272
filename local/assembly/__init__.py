"""The local stand-in assembled once, for the tests, ``make demo``, ``make chaos`` and the
benchmark: the same world everywhere.

- ``world``: ``local_world``: a Cosmos DB API server (or a given account), the broker and topic
  models on one clock, the settlement server, Microsoft's worker started on the app directory,
  and the host's triggers; the app's adapters are chosen through ``shared.bootstrap``'s
  ``Composition`` only;
- ``dead_letter_queue``: the operator tool's dead-letter port over the local broker, through
  the tool's own Service Bus adapter (``ops.servicebus``) on the real SDK.

Imports ``local.standins``, ``ops`` and ``shared``; never ``local.scenarios`` or ``bench``. A
new piece of the world is added to ``local_world`` here, not in a test or a scenario.
"""
