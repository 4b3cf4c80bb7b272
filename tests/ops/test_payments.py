"""``python -m ops payments``: the payment capture's calls parked for reconciliation, listed and
resolved through the tool as an operator runs it (its own clients built from the app settings:
azure-cosmos aio and the app's provider adapter), against the local Cosmos DB server and the
provider stand-in, around the consumer's own deliveries (the kit through the app's store
adapter on the same container). What an operator checks: what the tool printed and its exit
status, the payment as stored, and the provider's ledger (the money that moved).

A call is parked as in Azure: a provider that honours no Idempotency-Key and keeps processing
an attempt the client gave up on, its lookup saying "in progress" on three deliveries."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy, CosmosClient
from azure.cosmos.exceptions import CosmosResourceNotFoundError
from idempotent_consumer import (
    NEEDS_RECONCILIATION,
    Decision,
    IncomingMessage,
    Outcome,
    call_key,
    decide_call,
    marker_id,
)
from idempotent_consumer.cosmos import CosmosDocumentStore

from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.cosmos_server import ensure_container
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from local.standins.topic import RETAINED_SUBSCRIPTION, OrderEventsTopic
from ops.cli import main
from ops.cosmos import CosmosOrderLookup
from ops.servicebus import ServiceBusDeadLetterQueue
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.payments.consumer import CONSUMER_NAME, payment_capture
from tests.payments.events import payment_event

CLIENT_TIMEOUT_S = 0.3
# The provider's stated processing bound and the clock skew margin: short, like the timeout.
PROCESSING_BOUND_S = 0.1
CLOCK_SKEW_S = 0.1
ACCEPTED = payment_event("o-1", 1, 4200)
AMENDED = payment_event("o-1", 2, 5000)
KEY = call_key(CONSUMER_NAME, str(ACCEPTED.message_id), "capture")


@pytest.fixture
async def payments(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    """A fresh payments container (``/orderId``), as the consumer reaches it."""
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        name = f"payments-{uuid.uuid4().hex[:8]}"
        container = await ensure_container(client, app_env["COSMOS_DATABASE"], name, "/orderId")
        yield container
        await client.get_database_client(app_env["COSMOS_DATABASE"]).delete_container(name)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[PaymentProviderStandIn]:
    """A provider that honours no key (only its lookup tells), as the app's settings name it."""
    with PaymentProviderStandIn(honour_keys=False) as stand_in:
        monkeypatch.setenv("PAYMENT_PROVIDER_API_KEY", stand_in.api_key)
        monkeypatch.setenv("PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", "ignored")
        yield stand_in


class Consumer:
    """The payment consumer on the container, a second between deliveries (past its deadline)."""

    def __init__(self, container: ContainerProxy, client: HttpPaymentProvider) -> None:
        self.definition = payment_capture(
            client,
            call_deadline_s=CLIENT_TIMEOUT_S,
            processing_bound_s=PROCESSING_BOUND_S,
            clock_skew_s=CLOCK_SKEW_S,
        )
        self.store = CosmosDocumentStore(container)
        self.clock = ManualClock(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))

    async def deliver(self, message: IncomingMessage) -> Decision:
        self.clock.advance(timedelta(seconds=1))
        return await decide_call(
            self.definition, message, self.store, marker_ttl_s=600, clock=self.clock
        )


def consumer_client(provider: PaymentProviderStandIn) -> HttpPaymentProvider:
    return HttpPaymentProvider(
        provider.url, provider.api_key, honours_idempotency_keys=False, timeout_s=CLIENT_TIMEOUT_S
    )


async def park(
    consumer: Consumer, provider: PaymentProviderStandIn, slow_s: float
) -> tuple[Decision, Decision]:
    """The acceptance's capture parked, and the amendment dead-lettered behind it: the two
    decisions (the function dead-letters each with its reason and description)."""
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=slow_s))
    assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.TRANSIENT  # the client gave up
    second = await consumer.deliver(replace(ACCEPTED, delivery_count=2))
    assert second.outcome is Outcome.TRANSIENT  # the provider says "in progress"
    parked = await consumer.deliver(replace(ACCEPTED, delivery_count=3))
    assert (parked.outcome, parked.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    behind = await consumer.deliver(AMENDED)
    assert (behind.outcome, behind.deadletter_reason) == (Outcome.INVALID, NEEDS_RECONCILIATION)
    return parked, behind


async def tool(
    container: ContainerProxy, provider: PaymentProviderStandIn, *argv: str
) -> tuple[int, str]:
    """``python -m ops --no-verify-tls payments ... <argv>``, with the app's settings (its own
    event loop, as from a shell)."""
    out = io.StringIO()
    args = [
        "--no-verify-tls",
        "payments",
        "--payments-container",
        container.id,
        "--provider-url",
        provider.url,
        *argv,
    ]
    code = await asyncio.to_thread(main, args, out=out)
    return code, out.getvalue()


async def listed(container: ContainerProxy, provider: PaymentProviderStandIn) -> list[Any]:
    code, out = await tool(container, provider, "parked", "--json")
    assert code == 0, out
    parked: list[Any] = json.loads(out)["parked"]
    return parked


async def read(container: ContainerProxy, document_id: str) -> dict[str, Any] | None:
    """A document of order o-1 as stored (its ``_etag`` too: a write changes it)."""
    try:
        return dict(await container.read_item(document_id, partition_key="o-1"))
    except CosmosResourceNotFoundError:
        return None


async def committed(provider: PaymentProviderStandIn) -> None:
    for _ in range(100):
        if provider.ledger:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the provider never committed the slow capture")


async def test_a_parked_call_is_listed_refused_against_the_lookup_then_completed_as_happened(
    payments: ContainerProxy, provider: PaymentProviderStandIn
) -> None:
    async with consumer_client(provider) as client:
        consumer = Consumer(payments, client)
        await park(consumer, provider, slow_s=2.0)

        # Listed while the provider still processes the attempt the client gave up on.
        [row] = await listed(payments, provider)
        assert {k: row[k] for k in ("orderId", "messageId", "messageType", "version")} == {
            "orderId": "o-1",
            "messageId": ACCEPTED.message_id,
            "messageType": "OrderAccepted",
            "version": 1,
        }
        assert (row["operation"], row["amountMinor"], row["currency"]) == ("capture", 4200, "EUR")
        assert (row["key"], row["provider"]) == (KEY, "in-progress")
        assert row["startedAt"].startswith("2026-12-01T10:00:01")

        # The slow attempt commits: the money moved once; the lookup finds it.
        await committed(provider)
        [row] = await listed(payments, provider)
        assert row["provider"] == "found"

        # The operator's "did not happen" contradicts the provider: refused, nothing written.
        before = await read(payments, "payment")
        code, out = await tool(payments, provider, "resolve", "o-1", "--did-not-happen")
        assert code == 1 and "refused" in out and "the provider has the operation" in out
        assert await read(payments, "payment") == before

        code, out = await tool(payments, provider, "resolve", "o-1", "--happened")
        assert code == 0 and "completed" in out, out
        state = await read(payments, "payment")
        assert state is not None
        assert (state["pending"], state["version"], state["capturedMinor"]) == (None, 1, 4200)
        assert state["revision"] == before["revision"] + 1  # type: ignore[index]
        marker = await read(payments, marker_id(CONSUMER_NAME, str(ACCEPTED.message_id)))
        assert marker is not None and marker["outcome"] == "processed"
        record = await read(payments, f"call:{KEY}")
        assert record is not None and record["result"]["status"] == "succeeded"
        assert record["result"]["amountMinor"] == 4200
        assert await listed(payments, provider) == []

        # The dead letters resubmitted: the parked event is a duplicate, the one behind it
        # captures its difference.
        posts = provider.requests_received["POST /v1/captures"]
        assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.DUPLICATE
        assert provider.requests_received["POST /v1/captures"] == posts
        assert [entry.amount_minor for entry in provider.ledger] == [4200]
        assert (await consumer.deliver(AMENDED)).outcome is Outcome.PROCESSED
        assert provider.net_captured("o-1") == 5000
        assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]


async def test_a_call_that_never_happened_is_cleared_and_its_resubmitted_event_moves_money_once(
    payments: ContainerProxy, provider: PaymentProviderStandIn
) -> None:
    async with consumer_client(provider) as client:
        await park(Consumer(payments, client), provider, slow_s=60.0)
    # The provider goes down with the attempt it was processing: it never commits.
    port = provider.port
    provider.stop()
    assert provider.ledger == ()
    with PaymentProviderStandIn(honour_keys=False, port=port) as restarted:
        [row] = await listed(payments, restarted)
        assert row["provider"] == "not-found"

        # "Happened" contradicts the lookup: refused, nothing written.
        before = await read(payments, "payment")
        code, out = await tool(payments, restarted, "resolve", "o-1", "--happened")
        assert code == 1 and "no operation under the call's reference" in out, out
        assert await read(payments, "payment") == before

        code, out = await tool(payments, restarted, "resolve", "o-1", "--did-not-happen")
        assert code == 0 and "cleared" in out, out
        state = await read(payments, "payment")
        assert state is not None and before is not None
        assert (state["pending"], state["version"], state["capturedMinor"]) == (None, 0, 0)
        assert state["revision"] == before["revision"] + 1
        assert await read(payments, marker_id(CONSUMER_NAME, str(ACCEPTED.message_id))) is None

        async with consumer_client(restarted) as client:
            consumer = Consumer(payments, client)
            assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.PROCESSED
            assert (await consumer.deliver(ACCEPTED)).outcome is Outcome.DUPLICATE
            assert [entry.idempotency_key for entry in restarted.ledger] == [KEY]  # its same key
            assert (await consumer.deliver(AMENDED)).outcome is Outcome.PROCESSED
        assert [entry.amount_minor for entry in restarted.ledger] == [4200, 800]
        assert restarted.net_captured("o-1") == 5000


async def test_an_order_without_a_parked_call_is_not_resolved(
    payments: ContainerProxy, provider: PaymentProviderStandIn
) -> None:
    async with consumer_client(provider) as client:
        assert (await Consumer(payments, client).deliver(ACCEPTED)).outcome is Outcome.PROCESSED
    before = await read(payments, "payment")
    for word in ("--happened", "--did-not-happen"):
        code, out = await tool(payments, provider, "resolve", "o-1", word)
        assert code == 1 and "not-parked" in out, out
    code, out = await tool(payments, provider, "resolve", "o-2", "--happened")
    assert code == 1 and "no call in progress" in out
    assert await read(payments, "payment") == before
    assert await listed(payments, provider) == []


# -- then the dead letters, resubmitted from the payments subscription ------------------------


def published(event: IncomingMessage) -> OutgoingMessage:
    """The event as the relay publishes it to the topic."""
    return OutgoingMessage(event.message_id, event.body, subject=event.subject)


def subscription_dead_letters(
    topic: OrderEventsTopic, clock: ManualClock
) -> ServiceBusDeadLetterQueue:
    """The tool's Service Bus adapter on the payments subscription of the local topic, through
    the real SDK (its subscription receiver, its topic sender)."""
    namespace = LocalNamespace(
        {
            f"{topic.name}/subscriptions/{name}": queue
            for name, queue in topic.subscriptions.items()
        },
        topics={topic.name: topic},
    )
    return ServiceBusDeadLetterQueue(
        servicebus_client(namespace),
        topic.name,
        timedelta(days=1),
        subscription="payments",
        clock=clock,
        receive_wait_s=0.2,
    )


def resubmit(
    dead_letters: ServiceBusDeadLetterQueue, orders: CosmosOrderLookup, *argv: str
) -> tuple[int, dict[str, dict[str, Any]]]:
    """``python -m ops resubmit --subscription payments ... --json``: its results by MessageId."""
    out = io.StringIO()
    code = main(
        ["resubmit", "--subscription", "payments", *argv, "--json"],
        queue=dead_letters,
        orders=orders,
        out=out,
    )
    report = json.loads(out.getvalue())
    return code, {row["messageId"]: row for row in report["results"]}


async def test_the_payments_dead_letters_are_resubmitted_by_subscription_once_the_call_is_resolved(
    payments: ContainerProxy, provider: PaymentProviderStandIn, app_env: dict[str, str]
) -> None:
    clock = ManualClock()
    topic = OrderEventsTopic.from_messaging_file(
        clock, subscriptions=(RETAINED_SUBSCRIPTION, "inventory", "payments")
    )
    subscription = topic.subscriptions["payments"]
    topic.send_batch([published(ACCEPTED), published(AMENDED)])
    orders = CosmosOrderLookup.connect(
        app_env["COSMOS_ENDPOINT"],
        app_env["COSMOS_DATABASE"],
        payments.id,
        key=app_env["COSMOS_KEY"],
        verify_tls=False,
    )
    dead_letters = subscription_dead_letters(topic, clock)
    async with consumer_client(provider) as client:
        consumer = Consumer(payments, client)
        for decision in await park(consumer, provider, slow_s=2.0):  # as the function settles
            [delivery] = subscription.receive(1)
            subscription.dead_letter(
                delivery.lock_token, decision.deadletter_reason, decision.description
            )
        clock.advance(timedelta(days=2))  # past the topic's duplicate-detection window

        # Unresolved, a copy would be parked again: both refused, nothing sent.
        code, results = resubmit(dead_letters, orders, "--reason", NEEDS_RECONCILIATION)
        assert code == 1
        assert {row["verdict"] for row in results.values()} == {"refused"}
        assert "parked for reconciliation" in results[str(AMENDED.message_id)]["detail"]
        assert len(subscription.dead_letters) == 2 and subscription.active_count() == 0

        await committed(provider)
        code, out = await tool(payments, provider, "resolve", "o-1", "--happened")
        assert code == 0, out

        code, results = resubmit(dead_letters, orders, "--reason", NEEDS_RECONCILIATION)
        assert code == 0, results
        # The parked event is handled (the resolution wrote its marker): removed, nothing sent;
        # the one behind it is sent to the topic and seen on the subscription.
        assert results[str(ACCEPTED.message_id)]["verdict"] == "already-stored"
        assert results[str(AMENDED.message_id)]["verdict"] == "resubmitted"
        assert subscription.dead_letters == []
        # A copy in every subscription that takes it (the stock reservation: a duplicate there).
        assert topic.subscriptions["inventory"].active_count() == 3
        [copy] = subscription.receive(1)
        assert copy.message.message_id == AMENDED.message_id
        redelivered = IncomingMessage(
            copy.message.message_id,
            copy.message.body,
            subject=copy.message.subject,
            delivery_count=copy.delivery_count,
        )
        assert (await consumer.deliver(redelivered)).outcome is Outcome.PROCESSED
    assert provider.net_captured("o-1") == 5000
    assert [entry.amount_minor for entry in provider.ledger] == [4200, 800]
