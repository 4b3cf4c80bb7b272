"""The kit's contract suite: what every consumer built on it does, whatever its effect. One
abstract suite, run by each consumer (the order consumer, the stock reservation, the payment
capture, docs/your-own-consumer.md's units-sold consumer), over two stores:

- the in-memory document store (held to the Cosmos DB adapter by tests/contracts/), failures
  scripted as the port's errors;
- the app's Cosmos DB adapter through azure-cosmos against the local server's atomic
  transactional batch, failures injected below the SDK (``local.standins.faults``: a status
  answer, a batch answered 207 with one failed operation), so that the SDK's error mapping and
  the adapter's classification run as in production; documents compared with their ``_etag``,
  so a document rewritten unchanged counts as changed.

The suite's subject is a small protocol (``Subject``): how the consumer decides one delivery over
a store, its partition field and a store of each kind. A consumer deciding with the kit's
``decide`` is an ``Instance``; the payment capture, a ``CallingConsumerDefinition`` decided by
``decide_call`` with a provider behind it, is a ``PaymentCapture`` on the provider stand-in
(``local.standins.payment_provider``) through the app's adapter (aiohttp), its ledger the
referee of its own rows.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from idempotent_consumer import (
    NEEDS_RECONCILIATION,
    SETTLEMENT_BY_OUTCOME,
    Decision,
    IncomingMessage,
    Outcome,
    SystemicStoreError,
    TransientStoreError,
    call_key,
    decide_call,
    is_marker,
)
from idempotent_consumer import decide as decide_with_kit
from idempotent_consumer.cosmos import CosmosDocumentStore
from idempotent_consumer.testing import InMemoryDocumentStore

from examples.units_sold import units_sold
from local.standins.broker import ManualClock
from local.standins.cosmos_server import ensure_container
from local.standins.doubles import InMemoryOrderStore
from local.standins.faults import WRITES, FaultInjectingTransport, FaultKind, FaultRule
from local.standins.payment_provider import Fault, PaymentProviderStandIn
from local.standins.payment_provider import FaultRule as ProviderFaultRule
from ops.sample_orders import amended_body, lifecycle_message_id, order_body
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.config import Settings
from shared.consumer.core import decide as decide_order
from shared.payments.consumer import CONSUMER_NAME, payment_capture
from shared.payments.provider import KeyReused, Operation, PaymentRequest, ProviderBusy
from shared.stock.consumer import stock_reservation
from shared.stock.inventory import STOCK_ITEM_ID, reservation, stock_item
from tests.payments.events import payment_event
from tests.stock.events import event_message

NOW = datetime(2026, 11, 30, 9, tzinfo=UTC)
Documents = dict[str, dict[str, Any]]  # the JSON of [partition key, id] -> document
Decide = Callable[[Any, IncomingMessage], Awaitable[Decision]]

# The failure classes of every consumer's table, and how each is caused on either store: the
# port's error in memory; through the SDK, a status the adapter classifies (a 503 is the moment,
# a 403 the system, a 400 nothing it knows: a bug) on every write of the delivery.
FAILURES: dict[Outcome, tuple[Exception, int]] = {
    Outcome.TRANSIENT: (TransientStoreError("503"), 503),
    Outcome.SYSTEMIC: (SystemicStoreError("403"), 403),
    Outcome.UNEXPECTED: (RuntimeError("a bug"), 400),
}
# What the service adds to a stored document besides ``_etag`` (which says it was rewritten).
_SYSTEM_FIELDS = frozenset({"_rid", "_self", "_attachments", "_ts", "_lsn"})


class Subject(Protocol):
    """What the suite needs of a consumer: how it decides one delivery over a store (never
    raising for anything a message can cause), the store's partition field, and a store of each
    kind (in memory; the app's adapter on a container)."""

    @property
    def partition_field(self) -> str: ...

    def decide(self, store: Any, incoming: IncomingMessage) -> Awaitable[Decision]: ...

    def memory_store(self) -> InMemoryDocumentStore: ...

    def cosmos_store(self, container: ContainerProxy) -> Any: ...


@dataclass
class Backend:
    """One store under the suite: the consumer (``subject``), its ``store``, what it holds, and
    its faults."""

    subject: Subject
    store: Any
    seed: Callable[[Iterable[Mapping[str, Any]]], Awaitable[None]]
    documents: Callable[[], Awaitable[Documents]]
    # Every write of the next delivery fails as the outcome says (the order's in-memory store:
    # its next request); the batch variant fails the next commit of several writes, throttled.
    fail_writes: Callable[[Outcome], Exception | None]
    fail_next_batch: Callable[[], None]
    requests: Callable[[], int]
    clear_faults: Callable[[], None]


def memory_backend(subject: Subject) -> Backend:
    store, partition_field = subject.memory_store(), subject.partition_field

    async def seed(documents: Iterable[Mapping[str, Any]]) -> None:
        for document in documents:
            store.documents[(document[partition_field], document["id"])] = dict(document)

    async def documents() -> Documents:
        copied: Documents = json.loads(
            json.dumps({json.dumps(key): value for key, value in store.documents.items()})
        )
        return copied

    def fail_writes(outcome: Outcome) -> Exception:
        failure = FAILURES[outcome][0]
        store.fail_next = [failure]
        return failure

    def fail_next_batch() -> None:
        store.fail_next = [TransientStoreError("throttled")]

    def clear() -> None:
        store.fail_next = []

    return Backend(
        subject,
        store,
        seed,
        documents,
        fail_writes,
        fail_next_batch,
        lambda: len(store.requests),
        clear,
    )


@dataclass(frozen=True)
class Instance:
    """A consumer of the kit's ``decide`` under the suite (a ``Subject``): how it decides, and
    over which stores."""

    decide: Decide
    partition_field: str
    memory_store: Callable[[], InMemoryDocumentStore]
    cosmos_store: Callable[[Any], Any]


class ConsumerContract:
    """Subclasses give their consumer (``instance``, or a ``subject`` fixture of their own when
    it needs more than a store, such as a provider) and its messages; the suite runs each test
    over the in-memory store and through azure-cosmos (the ``backend`` fixture)."""

    instance: Subject

    @pytest.fixture
    def subject(self) -> Subject:
        return self.instance

    def seed(self) -> list[dict[str, Any]]:
        """Documents the consumer expects before its messages (stock items ...)."""
        return []

    async def prepare(self, backend: Backend) -> None:
        """What happened before the messages, delivered through the consumer itself (an order
        already paid ...), after ``seed``."""

    def message(self) -> IncomingMessage:
        raise NotImplementedError

    def other_content(self) -> IncomingMessage:
        """The same MessageId as ``message``, other content."""
        raise NotImplementedError

    def invalid(self) -> IncomingMessage:
        raise NotImplementedError

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage] | None:
        """Two versions of one thing, the newer first; None for a consumer without versions."""
        return None

    @pytest.fixture(params=["memory", "cosmos"])
    async def backend(
        self, request: pytest.FixtureRequest, subject: Subject
    ) -> AsyncIterator[Backend]:
        if request.param == "memory":
            backend = memory_backend(subject)
            await backend.seed(self.seed())
            await self.prepare(backend)
            yield backend
            return
        app_env: dict[str, str] = request.getfixturevalue("app_env")
        async with cosmos_backend(app_env, subject) as backend:
            await backend.seed(self.seed())
            await self.prepare(backend)
            yield backend

    async def decide(self, backend: Backend, message: IncomingMessage) -> Decision:
        return await backend.subject.decide(backend.store, message)

    async def test_a_redelivery_is_completed_and_changes_no_document(
        self, backend: Backend
    ) -> None:
        first = await self.decide(backend, self.message())
        before = await backend.documents()

        again = await self.decide(backend, self.message())

        assert first.outcome is Outcome.PROCESSED
        assert again.outcome is Outcome.DUPLICATE
        assert SETTLEMENT_BY_OUTCOME[again.outcome].value == "complete"
        assert await backend.documents() == before

    async def test_the_same_message_id_with_other_content_is_a_mismatch_and_writes_nothing(
        self, backend: Backend
    ) -> None:
        await self.decide(backend, self.message())
        before = await backend.documents()

        decision = await self.decide(backend, self.other_content())

        assert (decision.outcome, decision.deadletter_reason) == (Outcome.MISMATCH, "HashMismatch")
        assert decision.settlement.value == "deadletter"
        assert await backend.documents() == before

    async def test_a_stale_version_changes_nothing_but_its_marker(self, backend: Backend) -> None:
        pair = self.newer_then_older()
        if pair is None:
            pytest.skip("this consumer keeps no versions: its effect is a pure increment")
        newer, older = pair
        await self.decide(backend, newer)
        before = {
            key: doc for key, doc in (await backend.documents()).items() if not is_marker(doc)
        }

        decision = await self.decide(backend, older)

        assert decision.outcome is Outcome.STALE
        assert decision.settlement.value == "complete"
        after = {key: doc for key, doc in (await backend.documents()).items() if not is_marker(doc)}
        assert after == before
        assert (await self.decide(backend, older)).outcome is Outcome.DUPLICATE

    async def test_a_failed_batch_writes_nothing_and_the_redelivery_processes(
        self, backend: Backend
    ) -> None:
        before = await backend.documents()
        backend.fail_next_batch()

        failed = await self.decide(backend, self.message())

        assert failed.outcome is Outcome.TRANSIENT
        assert await backend.documents() == before
        assert (await self.decide(backend, self.message())).outcome is Outcome.PROCESSED

    async def test_an_invalid_message_writes_nothing_and_is_dead_lettered(
        self, backend: Backend
    ) -> None:
        before, requests = await backend.documents(), backend.requests()

        decision = await self.decide(backend, self.invalid())

        assert decision.outcome is Outcome.INVALID
        assert decision.settlement.value == "deadletter"
        assert decision.deadletter_reason
        assert await backend.documents() == before
        assert backend.requests() == requests  # not even a read

    @pytest.mark.parametrize(
        ("outcome", "settlement"),
        [
            (Outcome.TRANSIENT, "abandon"),
            (Outcome.SYSTEMIC, "abandon"),
            (Outcome.UNEXPECTED, "abandon"),
        ],
    )
    async def test_each_failure_class_settles_as_the_table_says(
        self, backend: Backend, outcome: Outcome, settlement: str
    ) -> None:
        before = await backend.documents()
        failure = backend.fail_writes(outcome)

        decision = await self.decide(backend, self.message())
        backend.clear_faults()

        assert (decision.outcome, decision.settlement.value) == (outcome, settlement)
        if failure is not None:  # in memory: the very error; through the SDK, its translation
            assert decision.error is failure
        assert await backend.documents() == before
        assert (await self.decide(backend, self.message())).outcome is Outcome.PROCESSED


class cosmos_backend:  # noqa: N801 - an async context manager used like a function
    """A fresh container of the instance's partition key on the session's Cosmos account; the
    consumer's store is the app's adapter on the app's client settings with a fault transport;
    the documents are read back through the test's own client."""

    def __init__(self, app_env: dict[str, str], instance: Subject) -> None:
        self._env, self._instance = app_env, instance
        self._name = f"kit-{uuid.uuid4().hex[:12]}"

    async def __aenter__(self) -> Backend:
        env, instance = self._env, self._instance
        self._admin = CosmosClient(
            env["COSMOS_ENDPOINT"], credential=env["COSMOS_KEY"], connection_verify=False
        )
        self._container: ContainerProxy = await ensure_container(
            self._admin, env["COSMOS_DATABASE"], self._name, f"/{instance.partition_field}"
        )
        transport = FaultInjectingTransport()
        settings = Settings.from_env(env)
        self._client = create_client(settings, transport=transport)
        proxy = self._client.get_database_client(settings.cosmos_database).get_container_client(
            self._name
        )
        store = instance.cosmos_store(proxy)
        container = self._container

        async def seed(documents: Iterable[Mapping[str, Any]]) -> None:
            for document in documents:
                await container.create_item(dict(document))

        async def documents() -> Documents:
            return {
                json.dumps((item[instance.partition_field], item["id"])): {
                    name: value for name, value in item.items() if name not in _SYSTEM_FIELDS
                }
                async for item in container.query_items("SELECT * FROM c")
            }

        def fail_writes(outcome: Outcome) -> None:
            transport.add(
                FaultRule(FaultKind.STATUS, **WRITES, status=FAILURES[outcome][1], times=None)
            )

        def fail_next_batch() -> None:
            # The 207 of a throttled batch: the last operation 429, the others 424.
            transport.add(
                FaultRule(
                    FaultKind.BATCH_OPERATION,
                    **WRITES,
                    status=429,
                    failing_index=-1,
                    retry_after_ms=10,
                )
            )

        return Backend(
            instance,
            store,
            seed,
            documents,
            fail_writes,
            fail_next_batch,
            lambda: transport.requests_sent,
            transport.clear,
        )

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()
        await self._admin.get_database_client(self._env["COSMOS_DATABASE"]).delete_container(
            self._name
        )
        await self._admin.close()


# ---- the order consumer ----------------------------------------------------------------------


def order_message(body: dict[str, Any], message_id: str, subject: str | None) -> IncomingMessage:
    return IncomingMessage(message_id, json.dumps(body).encode(), "c", 1, subject=subject)


async def decide_orders(store: Any, incoming: IncomingMessage) -> Decision:
    return await decide_order(incoming, store)


ORDERS = Instance(decide_orders, "orderId", InMemoryOrderStore, CosmosOrderStore)


class TestOrderPlaced(ConsumerContract):
    instance = ORDERS

    def message(self) -> IncomingMessage:
        return order_message(order_body("ord-1"), "ord-1", None)

    def other_content(self) -> IncomingMessage:
        return order_message(order_body("ord-1", currency="USD"), "ord-1", None)

    def invalid(self) -> IncomingMessage:
        return order_message(order_body("ord-1"), "ord-2", None)  # MessageId != orderId


class TestOrderAmended(ConsumerContract):
    instance = ORDERS

    def message(self) -> IncomingMessage:
        return order_message(
            amended_body("ord-1", 2), lifecycle_message_id("ord-1", 2), "OrderAmended"
        )

    def other_content(self) -> IncomingMessage:
        body = amended_body("ord-1", 2, currency="USD")
        return order_message(body, lifecycle_message_id("ord-1", 2), "OrderAmended")

    def invalid(self) -> IncomingMessage:
        return order_message(amended_body("ord-1", 1), "m-1", "OrderAmended")  # version 1

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage]:
        newer = order_message(amended_body("ord-1", 3), "m-3", "OrderAmended")
        return newer, self.message()


# ---- the stock reservation -------------------------------------------------------------------


async def decide_stock(store: Any, incoming: IncomingMessage) -> Decision:
    return await decide_with_kit(stock_reservation, incoming, store, marker_ttl_s=600, now=NOW)


STOCK = Instance(decide_stock, "sku", InMemoryDocumentStore, CosmosDocumentStore)


class TestStockReservation(ConsumerContract):
    """An acceptance reaching two stocked SKUs, one short of stock (a shortfall is a business
    outcome: processed); a cancellation before it makes it stale."""

    instance = STOCK

    def seed(self) -> list[dict[str, Any]]:
        return [stock_item("A", 10), stock_item("B", 1)]

    def message(self) -> IncomingMessage:
        return event_message("o-1", 1, {"A": 2, "B": 3})

    def other_content(self) -> IncomingMessage:
        changed = event_message("o-1", 1, {"A": 5, "B": 3})
        assert changed.message_id == self.message().message_id
        return changed

    def invalid(self) -> IncomingMessage:
        # The consumer's own reason: an OrderAccepted published before the lines existed.
        body = json.loads(self.message().body)
        del body["payload"]["lines"]
        return IncomingMessage(body["eventId"], json.dumps(body).encode(), subject="OrderAccepted")

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage]:
        return event_message("o-1", 2, cancelled=True), self.message()

    async def test_its_own_reason_for_an_event_without_lines_is_missing_lines(
        self, backend: Backend
    ) -> None:
        assert (await self.decide(backend, self.invalid())).deadletter_reason == "MissingLines"

    async def test_a_shortfall_is_processed_and_counted_never_an_error(
        self, backend: Backend
    ) -> None:
        decision = await self.decide(backend, self.message())

        assert (decision.outcome, decision.settlement.value) == (Outcome.PROCESSED, "complete")
        assert decision.measures == {"stock.shortfall": 2}
        stored = await backend.documents()
        assert stored[json.dumps(("B", STOCK_ITEM_ID))]["reserved"] == 1

    async def test_a_stock_item_edited_below_what_is_reserved_holds_the_event(
        self, backend: Backend
    ) -> None:
        """A release that would drive ``reserved`` below zero is the system's fault (a hand
        edit): systemic, abandoned and redelivered, nothing written, and its description names
        the SKU."""
        # Order o-2 holds 4 of C by its reservation, but the stock item says 1 is reserved.
        await backend.seed([stock_item("C", 10, reserved=1), reservation("C", "o-2", 1, 4, 4)])
        index = {
            "id": "orderIndex",
            "sku": "order:o-2",
            "type": "orderIndex",
            "orderId": "o-2",
            "orderVersion": 1,
            "skus": ["C"],
        }
        await backend.seed([index])
        before = await backend.documents()

        decision = await self.decide(backend, event_message("o-2", 2, cancelled=True))

        assert (decision.outcome, decision.settlement.value) == (Outcome.SYSTEMIC, "abandon")
        assert "'C'" in (decision.description or "")
        after = await backend.documents()
        assert {k: v for k, v in after.items() if "order:" not in k} == {
            k: v for k, v in before.items() if "order:" not in k
        }


# ---- the payment capture: an effect outside the transaction ---------------------------------

CALL_TIMEOUT_S = 1.0  # the provider client's timeout: the call's deadline
# The provider's stated processing bound and the clock skew margin: short, like the timeout.
PROCESSING_BOUND_S = 0.1
CLOCK_SKEW_S = 0.1
DECLINED_CUSTOMER = "customer-declined"


class PaymentCapture:
    """The payment capture as the suite's ``Subject``: ``decide_call`` over the store, the
    provider reached through the app's adapter; its clock moves past the call's deadline
    between deliveries (what a redelivery after a lock expiry sees)."""

    partition_field = "orderId"

    def __init__(self, client: HttpPaymentProvider) -> None:
        self.client = client
        self.definition = payment_capture(
            client,
            call_deadline_s=CALL_TIMEOUT_S,
            processing_bound_s=PROCESSING_BOUND_S,
            clock_skew_s=CLOCK_SKEW_S,
        )
        self.clock = ManualClock(NOW)

    def decide(self, store: Any, incoming: IncomingMessage) -> Awaitable[Decision]:
        self.clock.advance(timedelta(seconds=CALL_TIMEOUT_S + 1))
        return decide_call(self.definition, incoming, store, marker_ttl_s=600, clock=self.clock)

    def memory_store(self) -> InMemoryDocumentStore:
        return InMemoryDocumentStore()

    def cosmos_store(self, container: ContainerProxy) -> CosmosDocumentStore:
        return CosmosDocumentStore(container)


class TestPaymentCapture(ConsumerContract):
    """Order o-1 accepted and captured (4200) before each test; the message is its amendment to
    5000, a capture of the difference, whose first write is the in-progress record from the
    state's revision (a batch through the SDK). A cancellation after it makes it stale."""

    @pytest.fixture
    def provider(self) -> Iterator[PaymentProviderStandIn]:
        with PaymentProviderStandIn(declined_customers={DECLINED_CUSTOMER}) as stand_in:
            yield stand_in

    @pytest.fixture
    async def subject(self, provider: PaymentProviderStandIn) -> AsyncIterator[Subject]:
        """The consumer on the provider's client, closed after the test."""
        async with HttpPaymentProvider(
            provider.url, provider.api_key, timeout_s=CALL_TIMEOUT_S
        ) as client:
            yield PaymentCapture(client)

    async def prepare(self, backend: Backend) -> None:
        accepted = await self.decide(backend, payment_event("o-1", 1, 4200))
        assert accepted.outcome is Outcome.PROCESSED

    def message(self) -> IncomingMessage:
        return payment_event("o-1", 2, 5000)

    def other_content(self) -> IncomingMessage:
        changed = payment_event("o-1", 2, 6000)
        assert changed.message_id == self.message().message_id
        return changed

    def invalid(self) -> IncomingMessage:
        body = json.loads(self.message().body)
        del body["payload"]["totalMinor"]
        return replace(self.message(), body=json.dumps(body).encode())

    def newer_then_older(self) -> tuple[IncomingMessage, IncomingMessage]:
        return payment_event("o-1", 3, None), self.message()

    async def test_the_ledger_moves_once_whatever_the_redeliveries(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        for _ in range(3):
            await self.decide(backend, self.message())

        assert provider.net_captured("o-1") == 5000
        assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]

    async def test_a_failed_in_progress_record_writes_nothing_and_makes_no_call(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        """The suite's failed write, made to hit the in-progress record itself: in memory the
        state's read passes and the record's commit fails; through the SDK the record is the
        delivery's first batch."""
        if isinstance(backend.store, InMemoryDocumentStore):
            backend.store.fail_next = [None, TransientStoreError("throttled")]
        else:
            backend.fail_next_batch()
        before, calls = await backend.documents(), provider.requests_received

        failed = await self.decide(backend, self.message())

        assert failed.outcome is Outcome.TRANSIENT
        assert await backend.documents() == before
        assert provider.requests_received == calls
        assert (await self.decide(backend, self.message())).outcome is Outcome.PROCESSED
        assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]

    async def test_a_declined_card_is_processed_and_counted_never_retried(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        # Another order: an amendment of o-1 naming another customer would be PayerChanged.
        declined = payment_event("o-2", 1, 5000, customer_id=DECLINED_CUSTOMER)

        decision = await self.decide(backend, declined)

        assert (decision.outcome, decision.settlement.value) == (Outcome.PROCESSED, "complete")
        assert decision.measures == {"payments.declined": 1}
        state = (await backend.documents())[json.dumps(("o-2", "payment"))]
        assert (state["lastOutcome"], state["capturedMinor"], state["pending"]) == (
            "declined",
            0,
            None,
        )
        assert (await self.decide(backend, declined)).outcome is Outcome.DUPLICATE
        assert [entry.amount_minor for entry in provider.ledger] == [4200]

    async def test_a_provider_409_for_the_key_in_progress_is_transient_and_captures_once(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        """The lock expired while the provider was processing the call: the second delivery
        finds the in-progress record, repeats the call with its key and gets 409: retried
        (transient, abandoned after the in-delivery retries), and its redelivery is a
        duplicate once the first completed."""
        provider.inject(ProviderFaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=CALL_TIMEOUT_S / 2))
        first = asyncio.create_task(self.decide(backend, self.message()))
        for _ in range(200):  # the acceptance's capture, then this one's, in progress
            if provider.requests_received["POST /v1/captures"] > 1:
                break
            await asyncio.sleep(0.01)

        second = await self.decide(backend, replace(self.message(), delivery_count=2))

        assert (second.outcome, second.settlement.value) == (Outcome.TRANSIENT, "abandon")
        assert isinstance(second.error.__cause__ if second.error else None, ProviderBusy)
        assert (await first).outcome is Outcome.PROCESSED
        assert (await self.decide(backend, self.message())).outcome is Outcome.DUPLICATE
        assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]

    async def test_a_key_reused_with_another_payload_is_systemic_never_dead_lettered(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        """The provider already holds this call's key for another amount (a bug of ours, or a
        state edited by hand): no redelivery fixes it. Held and alerted, the in-progress record
        left for an operator, nothing moved."""
        message_id = self.message().message_id or ""
        key = call_key(CONSUMER_NAME, message_id, Operation.CAPTURE)
        subject = backend.subject
        assert isinstance(subject, PaymentCapture)
        await subject.client.perform(
            PaymentRequest(Operation.CAPTURE, "o-1", key, key, "customer-1", 1, "EUR")
        )

        decision = await self.decide(backend, self.message())

        assert (decision.outcome, decision.settlement.value) == (Outcome.SYSTEMIC, "abandon")
        assert isinstance(decision.error.__cause__ if decision.error else None, KeyReused)
        assert [entry.amount_minor for entry in provider.ledger] == [4200, 1]

    async def test_an_inconclusive_call_is_parked_needing_reconciliation_never_retried(
        self, backend: Backend, provider: PaymentProviderStandIn
    ) -> None:
        """A provider that honours no key and is still processing the call long after our
        client gave up: after its deliveries the event is dead-lettered NeedsReconciliation,
        counted, and the next version waits behind it; nothing is called again."""
        provider.honour_keys = False
        subject = backend.subject
        assert isinstance(subject, PaymentCapture)
        subject.client.honours_idempotency_keys = False
        provider.inject(ProviderFaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=4 * CALL_TIMEOUT_S))
        decisions = [
            await self.decide(backend, replace(self.message(), delivery_count=count))
            for count in (1, 2, 3)
        ]

        assert [d.outcome for d in decisions] == [Outcome.TRANSIENT] * 2 + [Outcome.INVALID]
        parked = decisions[-1]
        assert (parked.settlement.value, parked.deadletter_reason) == (
            "deadletter",
            NEEDS_RECONCILIATION,
        )
        assert parked.measures == {"payments.reconciliation_needed": 1}
        behind = await self.decide(backend, payment_event("o-1", 3, None))
        assert behind.deadletter_reason == NEEDS_RECONCILIATION
        assert provider.requests_received["POST /v1/captures"] == 2  # the acceptance's, this one


# ---- docs/your-own-consumer.md's consumer: units sold per SKU per day ----------------------------


def accepted_event(order_id: str, message_id: str, **payload: Any) -> IncomingMessage:
    body = {"payload": {"orderId": order_id, **order_body(order_id), **payload}}
    return IncomingMessage(message_id, json.dumps(body).encode(), subject="OrderAccepted")


async def decide_units_sold(store: Any, incoming: IncomingMessage) -> Decision:
    return await decide_with_kit(units_sold, incoming, store, marker_ttl_s=600, now=NOW)


class TestUnitsSold(ConsumerContract):
    instance = Instance(decide_units_sold, "sku", InMemoryDocumentStore, CosmosDocumentStore)

    def message(self) -> IncomingMessage:
        return accepted_event("ord-1", "event-1")

    def other_content(self) -> IncomingMessage:
        lines = [{"sku": line["sku"], "quantity": 9} for line in order_body("ord-1")["lines"]]
        return accepted_event("ord-1", "event-1", lines=lines)

    def invalid(self) -> IncomingMessage:
        return accepted_event("ord-1", "event-1", lines="none")
