"""The operator tool (``python -m ops``): the orders queue's dead-letter sub-queue (list, show,
resubmit, purge: ``ops.resubmit`` over the ``ops.port`` ports), the relay's parked outbox events
(``ops.parked``) and an audit of the flow's invariants (``ops.audit``). Adapters: Azure Service
Bus (``ops.servicebus``; the local broker reaches it through the same SDK,
``local.assembly.dead_letter_queue``)
and Cosmos DB (``ops.cosmos``). Installed from requirements-ops.txt alone.

It must never lose an order: a dead letter is removed only once its copy is verifiably on the
queue or its order is verifiably stored, and only what the broker confirmed is reported removed.
It never changes a MessageId or an eventId, and never publishes an event itself.
"""
