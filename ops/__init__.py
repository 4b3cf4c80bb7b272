"""The dead-letter tool (``python -m ops``): list, show, resubmit and purge the orders queue's
dead-letter sub-queue, over one port (``ops.port``) with two adapters: Azure Service Bus
(``ops.servicebus``) and the local broker model (``ops.local_broker``).

It must never lose an order: a dead letter is removed only once its copy is verifiably on the
queue or its order is verifiably stored (``ops.resubmit``). It never changes a MessageId.
"""
