"""The contract suites: one abstract suite per port, run by every adapter and every double.

As pyeventsourcing's ``tests/persistence.py`` does, each module holds a base class of tests
written against the port only (``OrderStoreContract``, ``OutboxStoreContract``,
``EventPublisherContract``, ``MessageActionsContract``, ``DeadLetterQueueContract``), whose
implementation comes from an abstract fixture, and one concrete ``Test...`` subclass per
adapter and per double that provides it. A double that drifts from the port fails the same
test as the adapter would: the in-memory order store answered an outbox event left without its
order with ``OrderAlreadyExists`` (a duplicate: complete) where the port says
``OrphanedDocument`` (dead-letter at once); ``test_order_store`` catches it.

A suite asserts what the port promises and what the core relies on (read from the port's
docstrings and the code that calls it), never how an implementation does it. The Cosmos DB
adapters run on the session's Cosmos account (cosmosdb-server, or the emulator when
``COSMOS_EMULATOR_ENDPOINT`` is set: ``tests.conftest``); a case the local server cannot show
would be marked ``emulator`` in that adapter's subclass, saying why (none today: its batches are
atomic, ``local/standins/cosmos_batch.js``).

Never imports product internals beyond the ports, their data types and the adapters' public
constructors.
"""
