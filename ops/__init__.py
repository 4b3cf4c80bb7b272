"""The operator tool (``python -m ops``), for the people on call and for a deployment's first
steps. Installed from requirements-ops.txt alone; it never ships with the app (``.funcignore``).

- ``cli`` (``__main__``): the command line: arguments, adapters built (or injected), output;
  ``audit_cli``, ``parked_cli``: the audit's and the parked events' commands;
- ``resubmit``: the dead-letter decisions (resubmit, hold, refuse, purge; a ``HashMismatch``'s
  diff), pure over ``port``'s ports;
- ``parked``: parked and long-pending outbox events, and republishing them;
- ``history``: one order's document, inbox markers and outbox events, by version;
- ``audit``: the flow's invariants as pure functions (the demo's too);
- ``stock`` (``stock_cli``): the stock reservation's stock items: set and seed ``onHand``,
  show and audit per SKU;
- ``payments`` (``payments_cli``): the payment capture's calls parked for reconciliation,
  listed with the provider's lookup and resolved on the operator's word, checked against it;
- adapters: ``servicebus`` (the dead-letter port over Azure Service Bus; the local broker
  reaches it through the same SDK, ``local.assembly.dead_letter_queue``), ``cosmos``
  (orders and outbox documents), ``cosmos_inventory`` (the inventory's stock items) and
  ``cosmos_payments`` (the parked payment states; their writes go through the app's own store
  adapter, and the provider's lookup through the app's provider adapter);
- ``send`` (sample orders to a real queue) and ``init_cosmos`` (database and containers), for
  a deployment's smoke test; ``sample_orders``: the one sample-order factory;
- ``durations`` (the one duration parser), ``messaging`` (the one reader of
  infra/messaging.json), ``window`` (the duplicate-detection window to wait out).

Imports ``shared`` only, never ``local`` or ``bench`` (``make lint``): the stored shapes are
``shared``'s (``shared.relay.outbox``, ``shared.consumer.contract``), never copied here.

It must never lose an order: a dead letter is removed only once its copy is verifiably on the
queue or its order is verifiably stored, and only what the broker confirmed is reported removed.
It never changes a MessageId or an eventId, and never publishes an event itself. Of the
inventory it writes a stock item's creation and its ``onHand`` only, never ``reserved``. Of the
payments it writes only an operator's resolution of a parked call, by the kit's own completion
(or a cleared ``pending``), and it never calls the provider to move money.
"""
