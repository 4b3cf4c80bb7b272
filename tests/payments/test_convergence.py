"""Exactly once at the provider, over generated histories: any arrival order of an order's
versions, duplicates, stops between the call and the completed record, provider failures before
and after it committed, concurrent deliveries, with a provider that honours the Idempotency-Key
and one that honours none. The provider's ledger is the referee: for every order, captures minus
refunds equal the total of its highest version (zero once cancelled), and no refund is ever
refused (never a refund of money not captured)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local.standins.doubles import InMemoryDocumentStore
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.kit.decision import IncomingMessage, Settlement
from shared.kit.errors import TransientStoreError
from shared.kit.external import decide_call
from shared.payments.consumer import payment_capture
from tests.payments.events import payment_event

CLIENT_TIMEOUT_S = 0.3


@dataclass(frozen=True)
class Version:
    order_id: str
    version: int
    total: int | None  # None: cancelled

    def message(self) -> IncomingMessage:
        return payment_event(self.order_id, self.version, self.total)


@st.composite
def history(draw: st.DrawFn, order_id: str) -> list[Version]:
    count = draw(st.integers(1, 4))
    versions = [Version(order_id, v, draw(st.integers(1, 9)) * 100) for v in range(1, count + 1)]
    if draw(st.booleans()):
        versions.append(Version(order_id, count + 1, None))
    kept = [v for v in versions[:-1] if draw(st.booleans())]
    return [*kept, versions[-1]]


@dataclass(frozen=True)
class Case:
    orders: list[list[Version]]
    deliveries: list[Version]
    store_stops: list[int]
    faults: list[tuple[Fault, int]]
    honour_keys: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    orders = [draw(history(f"o-{n}")) for n in range(draw(st.integers(1, 2)))]
    events = [v for h in orders for v in h]
    deliveries = draw(st.permutations(events + draw(st.lists(st.sampled_from(events), max_size=2))))
    faults = draw(
        st.lists(
            st.tuples(
                st.sampled_from([Fault.ERROR_BEFORE_COMMIT, Fault.ERROR_AFTER_COMMIT]),
                st.integers(1, 6),
            ),
            max_size=2,
        )
    )
    stops = draw(st.lists(st.integers(1, 30), max_size=3, unique=True))
    return Case(orders, deliveries, stops, faults, draw(st.booleans()))


@pytest.fixture(scope="module")
def provider() -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn() as stand_in:
        yield stand_in


class Stopping(InMemoryDocumentStore):
    """Fails its n-th requests (a stop) and yields at each, so deliveries interleave."""

    def __init__(self, stops: list[int]) -> None:
        super().__init__()
        self.stops, self.count = set(stops), 0

    def _request(self, name: str) -> None:
        self.count += 1
        if self.count in self.stops:
            raise TransientStoreError(f"stopped at request {self.count}")
        super()._request(name)

    async def read(self, partition_key: str, document_id: str):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        return await super().read(partition_key, document_id)

    async def commit(self, partition_key: str, writes):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        await super().commit(partition_key, writes)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
async def test_the_ledger_holds_each_orders_highest_total_exactly(
    provider: PaymentProviderStandIn, case: Case
) -> None:
    provider.clear_faults()
    provider.honour_keys = case.honour_keys
    run = f"r{uuid.uuid4().hex[:8]}-"  # a fresh order id space per example
    for fault, nth in case.faults:
        provider.inject(FaultRule(fault, times=nth))
    store = Stopping(case.store_stops)
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    async with HttpPaymentProvider(
        provider.url,
        provider.api_key,
        honours_idempotency_keys=case.honour_keys,
        timeout_s=CLIENT_TIMEOUT_S,
    ) as client:
        definition = payment_capture(client, call_deadline_s=CLIENT_TIMEOUT_S)
        queue = [replace(v, order_id=run + v.order_id).message() for v in case.deliveries]
        for _ in range(60):
            if not queue:
                break
            batch, queue = queue[:3], queue[3:]
            now += timedelta(seconds=1)
            decisions = await asyncio.gather(
                *(decide_call(definition, m, store, marker_ttl_s=600, now=now) for m in batch)
            )
            for message, decision in zip(batch, decisions, strict=True):
                assert decision.settlement is not Settlement.DEADLETTER, decision
                if decision.settlement is Settlement.ABANDON:
                    count = (message.delivery_count or 1) + 1
                    queue.append(replace(message, delivery_count=count))
        assert not queue, queue
    for order in case.orders:
        highest = order[-1]
        expected = highest.total or 0
        assert provider.net_captured(run + highest.order_id) == expected, (order, provider.ledger)
    for (_, document_id), document in store.documents.items():
        if document_id == "payment":
            assert document.get("lastOutcome") in (None, "succeeded"), document
