"""The payment provider through the real adapter (``HttpPaymentProvider``, aiohttp) against the
stand-in over real HTTP on 127.0.0.1: each rule of the Idempotency-Key draft, the money rules,
and the ledger (the money that moved) after each fault.

Timeouts are a few hundred milliseconds: the stand-in holds an answer past the client's timeout,
so no test sleeps longer than that."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from local.standins.payment_provider import (
    Fault,
    FaultRule,
    PaymentProviderStandIn,
    parse_sf_string,
)
from shared.adapters.payment_provider import (
    CAPTURES_PATH,
    IDEMPOTENCY_KEY_HEADER,
    HttpPaymentProvider,
    Problem,
    sf_string,
)
from shared.payments.provider import (
    KeyReused,
    LookupStatus,
    Operation,
    PaymentRequest,
    ProviderBusy,
    ProviderRejectedCredentials,
    ProviderResult,
    ProviderUnavailable,
    ResultStatus,
    UnexpectedProviderAnswer,
)

DECLINED_CUSTOMER = "customer-declined"
CLIENT_TIMEOUT_S = 0.3
HOLD_S = 0.6  # longer than the client waits


@pytest.fixture
def provider() -> Iterator[PaymentProviderStandIn]:
    with PaymentProviderStandIn(declined_customers={DECLINED_CUSTOMER}) as stand_in:
        yield stand_in


@pytest.fixture
async def client(provider: PaymentProviderStandIn) -> AsyncIterator[HttpPaymentProvider]:
    async with HttpPaymentProvider(
        provider.url, provider.api_key, timeout_s=CLIENT_TIMEOUT_S
    ) as adapter:
        yield adapter


def request(
    operation: Operation = Operation.CAPTURE,
    *,
    order_id: str | None = None,
    amount_minor: int = 1250,
    customer_id: str = "customer-1",
    reference: str | None = None,
    key: str | None = None,
) -> PaymentRequest:
    order_id = order_id or f"order-{uuid.uuid4().hex[:8]}"
    reference = reference or f"{order_id}:{operation}:{uuid.uuid4().hex[:8]}"
    return PaymentRequest(
        operation=operation,
        order_id=order_id,
        reference=reference,
        idempotency_key=key or f"payment-capture:{uuid.uuid4()}:{operation}",
        customer_id=customer_id,
        amount_minor=amount_minor,
        currency="EUR",
    )


async def raw_post(
    provider: PaymentProviderStandIn, headers: dict[str, str], body: dict[str, Any]
) -> tuple[int, str, dict[str, Any]]:
    """A POST the adapter would never send (without a key, a malformed key)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            provider.url + CAPTURES_PATH,
            json=body,
            headers={"Authorization": f"Bearer {provider.api_key}", **headers},
        ) as response,
    ):
        return response.status, response.content_type, await response.json(content_type=None)


def body_of(payment: PaymentRequest) -> dict[str, Any]:
    return {
        "order_id": payment.order_id,
        "reference": payment.reference,
        "customer_id": payment.customer_id,
        "amount_minor": payment.amount_minor,
        "currency": payment.currency,
    }


# -- the draft's rules ----------------------------------------------------------------------


async def test_a_capture_moves_the_money_once_and_the_ledger_says_who_what_and_under_which_key(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    payment = request(amount_minor=4200)
    result = await client.perform(payment)

    assert result.status is ResultStatus.SUCCEEDED
    assert result.reference == payment.reference
    assert result.amount_minor == 4200
    [entry] = provider.ledger
    assert (entry.order_id, entry.operation, entry.amount_minor, entry.reference) == (
        payment.order_id,
        Operation.CAPTURE,
        4200,
        payment.reference,
    )
    assert entry.idempotency_key == payment.idempotency_key
    assert entry.provider_id == result.provider_id
    assert entry.at.tzinfo is not None
    assert provider.net_captured(payment.order_id) == 4200


async def test_a_repeat_with_the_same_key_and_payload_returns_the_first_result_and_moves_nothing(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    payment = request()
    first = await client.perform(payment)
    again = await client.perform(payment)

    assert again == first
    assert len(provider.ledger) == 1
    assert provider.requests_received[f"POST {CAPTURES_PATH}"] == 2
    assert provider.net_captured(payment.order_id) == payment.amount_minor


async def test_the_same_key_with_another_payload_is_refused_422_and_moves_nothing(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    payment = request(amount_minor=1000)
    await client.perform(payment)
    other = request(
        order_id=payment.order_id,
        reference=payment.reference,
        key=payment.idempotency_key,
        amount_minor=2000,
    )

    with pytest.raises(KeyReused) as raised:
        await client.perform(other)

    assert payment.idempotency_key not in raised.value.description
    assert provider.net_captured(payment.order_id) == 1000
    assert len(provider.ledger) == 1


async def test_the_same_key_while_the_first_is_processed_is_refused_409_then_gets_the_result(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=0.2))
    payment = request()

    outcomes = await asyncio.gather(
        client.perform(payment), client.perform(payment), return_exceptions=True
    )

    [result] = [outcome for outcome in outcomes if isinstance(outcome, ProviderResult)]
    [busy] = [outcome for outcome in outcomes if isinstance(outcome, ProviderBusy)]
    assert result.status is ResultStatus.SUCCEEDED
    assert "being processed" in busy.description
    assert len(provider.ledger) == 1
    # No correction is needed after a 409 (draft section 2.7): the same request gets the result.
    assert await client.perform(payment) == result
    assert len(provider.ledger) == 1


async def test_a_missing_key_is_refused_400_with_a_problem_document(
    provider: PaymentProviderStandIn,
) -> None:
    status, content_type, problem = await raw_post(provider, {}, body_of(request()))

    assert status == 400
    assert content_type == "application/problem+json"
    assert problem["type"] == Problem.KEY_MISSING
    assert problem["title"] and problem["detail"]
    assert provider.ledger == ()


@pytest.mark.parametrize(
    "header",
    [
        "8e03978e-40d5-43e8-bc93-6894a57f9324",  # a token, not a String
        '"unterminated',
        '"a";param=1',  # an Item with parameters: not the published format
        '""',  # empty
        '"' + "k" * 256 + '"',  # longer than the published 255
    ],
)
async def test_a_key_that_is_not_one_structured_field_string_is_refused_400(
    provider: PaymentProviderStandIn, header: str
) -> None:
    status, content_type, problem = await raw_post(
        provider, {IDEMPOTENCY_KEY_HEADER: header}, body_of(request())
    )

    assert (status, content_type, problem["type"]) == (
        400,
        "application/problem+json",
        Problem.KEY_INVALID,
    )
    assert provider.ledger == ()


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_the_adapter_sends_any_printable_key_as_a_string_the_provider_reads_back(key: str) -> None:
    assert parse_sf_string(sf_string(key)) == key


def test_a_key_the_header_cannot_carry_never_leaves() -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        sf_string("clé")


# -- the money rules ------------------------------------------------------------------------


async def test_a_refund_above_what_is_captured_minus_refunded_is_refused_and_moves_nothing(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    order = f"order-{uuid.uuid4().hex[:8]}"
    await client.perform(request(order_id=order, amount_minor=1000))
    partial = await client.perform(request(Operation.REFUND, order_id=order, amount_minor=600))
    too_much = request(Operation.REFUND, order_id=order, amount_minor=500)

    refused = await client.perform(too_much)

    assert partial.status is ResultStatus.SUCCEEDED
    assert refused.status is ResultStatus.REFUSED
    assert refused.provider_id is None
    assert "exceeds the 400 left" in refused.detail
    assert provider.net_captured(order) == 400
    # An error is a completed result too: the repeat gets it again (draft section 2.6).
    assert await client.perform(too_much) == refused
    found = await client.lookup(too_much.reference)
    assert found.status is LookupStatus.FOUND
    assert found.result is not None and found.result.status is ResultStatus.REFUSED


async def test_a_declined_card_is_a_result_and_moves_nothing(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    result = await client.perform(request(customer_id=DECLINED_CUSTOMER))

    assert result.status is ResultStatus.DECLINED
    assert result.provider_id is None
    assert "declined" in result.detail
    assert provider.ledger == ()


async def test_a_wrong_credential_is_refused_on_every_endpoint_and_its_value_is_never_told(
    provider: PaymentProviderStandIn,
) -> None:
    async with HttpPaymentProvider(provider.url, "not-the-key") as wrong:
        with pytest.raises(ProviderRejectedCredentials) as raised:
            await wrong.perform(request())
        with pytest.raises(ProviderRejectedCredentials):
            await wrong.lookup("any-reference")

    assert "401" in raised.value.description
    assert "not-the-key" not in raised.value.description
    assert provider.ledger == ()


# -- the faults, refereed by the ledger -------------------------------------------------------


async def test_a_timeout_after_commit_moved_the_money_once_and_the_repeat_returns_it(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    payment = request()

    with pytest.raises(ProviderUnavailable) as raised:
        await client.perform(payment)

    assert raised.value.may_have_committed
    assert payment.idempotency_key not in raised.value.description
    [entry] = provider.ledger
    repeated = await client.perform(payment)
    assert repeated.status is ResultStatus.SUCCEEDED
    assert repeated.provider_id == entry.provider_id
    assert len(provider.ledger) == 1
    assert provider.net_captured(payment.order_id) == payment.amount_minor


async def test_a_5xx_before_commit_moved_nothing_and_the_repeat_moves_the_money_once(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=503))
    payment = request()

    with pytest.raises(ProviderUnavailable) as raised:
        await client.perform(payment)

    # A 5xx cannot tell the client whether the provider committed.
    assert raised.value.may_have_committed
    assert provider.ledger == ()
    assert (await client.lookup(payment.reference)).status is LookupStatus.NOT_FOUND
    assert (await client.perform(payment)).status is ResultStatus.SUCCEEDED
    assert len(provider.ledger) == 1


async def test_a_5xx_after_commit_moved_the_money_once_and_the_repeat_returns_it(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.ERROR_AFTER_COMMIT, status=502))
    payment = request()

    with pytest.raises(ProviderUnavailable) as raised:
        await client.perform(payment)

    assert raised.value.may_have_committed
    [entry] = provider.ledger
    found = await client.lookup(payment.reference)
    assert found.status is LookupStatus.FOUND
    assert found.result is not None and found.result.provider_id == entry.provider_id
    assert (await client.perform(payment)).provider_id == entry.provider_id
    assert len(provider.ledger) == 1


async def test_slowness_before_commit_is_in_progress_to_the_lookup_until_it_commits(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=HOLD_S))
    payment = request()

    with pytest.raises(ProviderUnavailable):
        await client.perform(payment)

    assert provider.ledger == ()
    assert (await client.lookup(payment.reference)).status is LookupStatus.IN_PROGRESS
    # The provider goes on without the client: the commit comes after the delay.
    for _ in range(40):
        found = await client.lookup(payment.reference)
        if found.status is not LookupStatus.IN_PROGRESS:
            break
        await asyncio.sleep(0.05)
    assert found.status is LookupStatus.FOUND
    assert len(provider.ledger) == 1


async def test_a_provider_that_honours_no_key_moves_the_money_again_and_only_the_lookup_tells(
    provider: PaymentProviderStandIn,
) -> None:
    provider.honour_keys = False
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    payment = request()

    async with HttpPaymentProvider(
        provider.url, provider.api_key, honours_idempotency_keys=False, timeout_s=CLIENT_TIMEOUT_S
    ) as client:
        assert not client.honours_idempotency_keys
        with pytest.raises(ProviderUnavailable):
            await client.perform(payment)
        repeated = await client.perform(payment)
        found = await client.lookup(payment.reference)

    assert repeated.status is ResultStatus.SUCCEEDED
    first, second = provider.ledger
    assert provider.net_captured(payment.order_id) == 2 * payment.amount_minor
    assert first.idempotency_key == second.idempotency_key == payment.idempotency_key
    assert found.status is LookupStatus.FOUND
    assert found.result is not None and found.result.provider_id == first.provider_id
    assert [repeat.provider_id for repeat in found.repeats] == [second.provider_id]


async def test_a_lookup_of_a_reference_never_used_finds_nothing(
    client: HttpPaymentProvider,
) -> None:
    assert (await client.lookup("never-used")).status is LookupStatus.NOT_FOUND


async def test_a_fault_counts_the_requests_it_is_set_for(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    rule = provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, Operation.CAPTURE, times=2))
    order = f"order-{uuid.uuid4().hex[:8]}"
    payment = request(order_id=order)

    for _ in range(2):
        with pytest.raises(ProviderUnavailable):
            await client.perform(payment)
    await client.perform(payment)

    assert rule.fired == 2
    assert provider.net_captured(order) == payment.amount_minor


# -- the transport ----------------------------------------------------------------------------


async def test_a_provider_that_cannot_be_reached_is_unavailable_and_provably_not_committed(
    provider: PaymentProviderStandIn,
) -> None:
    url = provider.url
    provider.stop()

    async with HttpPaymentProvider(url, provider.api_key, timeout_s=CLIENT_TIMEOUT_S) as client:
        with pytest.raises(ProviderUnavailable) as raised:
            await client.perform(request())

    assert not raised.value.may_have_committed


async def test_an_answer_outside_the_api_is_systemic(provider: PaymentProviderStandIn) -> None:
    async with HttpPaymentProvider(provider.url + "/not-the-api", provider.api_key) as client:
        with pytest.raises(UnexpectedProviderAnswer):
            await client.perform(request())


async def test_a_session_passed_in_stays_the_callers(provider: PaymentProviderStandIn) -> None:
    async with aiohttp.ClientSession() as session:
        adapter = HttpPaymentProvider(provider.url, provider.api_key, session=session)
        await adapter.perform(request())
        await adapter.close()
        assert not session.closed
