"""The payment provider through the real adapter (``HttpPaymentProvider``, aiohttp) against the
stand-in over real HTTP on 127.0.0.1: each rule of the Idempotency-Key draft, the money rules,
and the ledger (the money that moved) after each fault. Where the stand-in cannot answer as a
test needs (the draft's ``Link`` form, another provider's wording, a redirect, an oversized
body), a small aiohttp server on 127.0.0.1 answers instead (``local_host``), recording what it
receives.

Timeouts are a few hundred milliseconds: the stand-in holds an answer past the client's timeout,
so no test sleeps longer than that."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from local.standins.payment_provider import (
    Fault,
    FaultRule,
    PaymentProviderStandIn,
    Problem,
    parse_sf_string,
)
from shared.adapters.payment_profile import (
    REFUND_EXCEEDS_CAPTURED,
    ProviderProfile,
    Refusal,
    RefusalRule,
)
from shared.adapters.payment_provider import (
    CAPTURES_PATH,
    IDEMPOTENCY_KEY_HEADER,
    MAX_ANSWER_BYTES,
    OPERATIONS_PATH,
    PROBLEM_JSON,
    REFUNDS_PATH,
    HttpPaymentProvider,
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
    UnrecognisedRefusal,
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
    assert result.detail == f"capture 4200 EUR ({entry.provider_id})"  # what moved, as recorded
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
    # Worded as the draft's example, the 422 shares its type with every key error: the status
    # alone says the key was reused (it was a "refused" outcome while types told them apart).
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
    assert (problem["type"], problem["title"]) == (
        Problem.IDEMPOTENCY_KEY,
        "Idempotency-Key is missing",
    )
    assert problem["detail"]
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

    assert (status, content_type, problem["type"], problem["title"]) == (
        400,
        "application/problem+json",
        Problem.IDEMPOTENCY_KEY,
        "Idempotency-Key is invalid",
    )
    assert provider.ledger == ()


async def test_a_key_the_provider_refuses_as_malformed_is_systemic_never_a_refusal(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    # Longer than the stand-in's published format: its 400 (the draft's wording) is our bug.
    payment = request(key="k" * 256)

    with pytest.raises(UnexpectedProviderAnswer) as raised:
        await client.perform(payment)

    assert "HTTP 400" in raised.value.description and "malformed" in raised.value.description
    assert provider.ledger == ()
    assert (await client.lookup(payment.reference)).status is LookupStatus.NOT_FOUND


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
    assert (refused.reference, refused.amount_minor) == (too_much.reference, 500)
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


# -- refusals the profile does not name --------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "problem", "systemic"),
    [
        (
            418,
            {"type": "https://provider.example/teapot", "title": "I'm a teapot"},
            UnrecognisedRefusal,
        ),
        (404, {"type": "about:blank", "title": "Not Found"}, UnrecognisedRefusal),
        (451, {"title": "Unavailable For Legal Reasons"}, UnrecognisedRefusal),
        # A 400 of a type nobody documented: the draft's 400, the request was wrong.
        (400, {"type": "https://provider.example/unknown", "title": "?"}, UnexpectedProviderAnswer),
    ],
)
async def test_a_refusal_the_profile_does_not_name_is_systemic_never_an_outcome(
    provider: PaymentProviderStandIn,
    client: HttpPaymentProvider,
    status: int,
    problem: dict[str, Any],
    systemic: type[UnexpectedProviderAnswer],
) -> None:
    provider.inject(FaultRule(Fault.ERROR_BEFORE_COMMIT, status=status, problem=problem))
    payment = request()

    with pytest.raises(systemic) as raised:
        await client.perform(payment)

    assert f"HTTP {status}" in raised.value.description
    assert provider.ledger == ()


# -- the profile: each refusal's meaning, as a provider words it ----------------------------------

Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Received:
    method: str
    path_qs: str
    headers: dict[str, str]
    body: bytes


@asynccontextmanager
async def local_host(answer: Answer) -> AsyncIterator[tuple[str, list[Received]]]:
    """An aiohttp server on 127.0.0.1 that records every request it receives and answers it with
    ``answer``: its URL and what it received."""
    received: list[Received] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        received.append(Received(request.method, request.path_qs, dict(request.headers), body))
        return await answer(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", received
    finally:
        await runner.cleanup()


def answering(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Answer:
    async def answer(request: web.Request) -> web.Response:
        if body is None:
            return web.Response(status=status, headers=headers)
        return web.Response(
            status=status,
            body=json.dumps(body).encode(),
            content_type=PROBLEM_JSON,
            headers=headers,
        )

    return answer


# draft-ietf-httpapi-idempotency-key-header-06 section 2.7's examples, as written there.
DRAFT_LINK = "https://developer.example.com/idempotency"
DRAFT_LINK_HEADER = {"Link": f'<{DRAFT_LINK}>; rel="describedby"; type="text/html"'}
DRAFT_400 = {
    "type": DRAFT_LINK,
    "title": "Idempotency-Key is missing",
    "detail": "This operation is idempotent and it requires correct usage of Idempotency Key.",
}
DRAFT_422 = {
    "type": DRAFT_LINK,
    "title": "Idempotency-Key is already used",
    "detail": "This operation is idempotent and it requires correct usage of Idempotency Key. "
    "Idempotency Key MUST not be reused across different payloads of this operation.",
}
DRAFT_409 = {
    "type": DRAFT_LINK,
    "title": "A request is outstanding for this Idempotency-Key",
    "detail": "A request with the same Idempotency-Key for the same operation is being "
    "processed or is outstanding.",
}
REFUND_REFUSAL = {"type": REFUND_EXCEEDS_CAPTURED, "title": "Refund exceeds captured"}


@pytest.mark.parametrize(
    ("status", "body", "headers", "meaning"),
    [
        (400, DRAFT_400, None, UnexpectedProviderAnswer),
        (400, None, DRAFT_LINK_HEADER, UnexpectedProviderAnswer),
        (422, DRAFT_422, None, KeyReused),
        (422, None, DRAFT_LINK_HEADER, KeyReused),
        (409, DRAFT_409, None, ProviderBusy),
        (409, None, DRAFT_LINK_HEADER, ProviderBusy),
        (402, None, None, ResultStatus.DECLINED),
        (422, REFUND_REFUSAL, None, ResultStatus.REFUSED),
        (418, None, None, UnrecognisedRefusal),
        (499, None, None, UnrecognisedRefusal),  # the last 4xx: a refusal still
        (410, {"type": REFUND_EXCEEDS_CAPTURED}, None, UnrecognisedRefusal),
    ],
)
async def test_the_drafts_profile_reads_each_refusal_by_its_status_and_only_a_documented_code(
    status: int,
    body: Any,
    headers: dict[str, str] | None,
    meaning: type[Exception] | ResultStatus,
) -> None:
    async with (
        local_host(answering(status, body, headers)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        if isinstance(meaning, ResultStatus):
            result = await client.perform(request())
            assert result.status is meaning and result.provider_id is None
        else:
            with pytest.raises(meaning) as raised:
                await client.perform(request())
            assert type(raised.value) is meaning


CODES_IN_BODY = ProviderProfile(
    name="codes-in-body",
    captures_path="/api/captures",
    refunds_path="/api/refunds",
    operations_path="/api/operations",
    code_pointer="/error/code",
    rules=(
        RefusalRule(400, Refusal.REFUSED, "amount_too_large"),
        RefusalRule(400, Refusal.KEY_REUSED, "idempotency_key_reused"),
        RefusalRule(402, Refusal.DECLINED),
        RefusalRule(409, Refusal.IN_PROGRESS),
    ),
)


@pytest.mark.parametrize(
    ("code", "meaning"),
    [
        ("amount_too_large", ResultStatus.REFUSED),
        ("idempotency_key_reused", KeyReused),
        ("parameter_missing", UnrecognisedRefusal),
        (None, UnrecognisedRefusal),
    ],
)
async def test_a_provider_that_words_its_refusals_its_own_way_gets_a_profile_of_its_own(
    code: str | None, meaning: type[Exception] | ResultStatus
) -> None:
    body = {"error": {"code": code, "message": "..."}} if code else {"message": "bad request"}
    async with (
        local_host(answering(400, body)) as (url, received),
        HttpPaymentProvider(url, "key", profile=CODES_IN_BODY) as client,
    ):
        if isinstance(meaning, ResultStatus):
            assert (await client.perform(request())).status is meaning
        else:
            with pytest.raises(meaning):
                await client.perform(request())
    assert [(seen.method, seen.path_qs) for seen in received] == [("POST", "/api/captures")]


@pytest.mark.parametrize(
    "rule",
    [
        RefusalRule(401, Refusal.REFUSED),  # answered before any profile: credentials
        RefusalRule(429, Refusal.IN_PROGRESS),  # throttled: the moment
        RefusalRule(503, Refusal.IN_PROGRESS),  # not a refusal
        RefusalRule(409, Refusal.KEY_REUSED),  # 409 is already mapped
    ],
)
def test_a_profile_refuses_a_rule_it_would_never_apply(rule: RefusalRule) -> None:
    with pytest.raises(ValueError, match="HTTP"):
        ProviderProfile(
            "broken", "/c", "/r", "/o", rules=(RefusalRule(409, Refusal.IN_PROGRESS), rule)
        )


# -- redirects and the answer's size ---------------------------------------------------------------


def forged(request: web.Request) -> dict[str, Any]:
    """What a host that is not the provider answers: a success of its own making, readable both
    as an operation and as a lookup."""
    operation = {
        "id": "op_forged",
        "operation": "capture",
        "status": "succeeded",
        "state": "completed",
        "outcome": "succeeded",
        "amount_minor": 1250,
        "currency": "EUR",
    }
    return {**operation, "reference": request.query.get("reference"), "operations": [operation]}


async def other_host_answer(request: web.Request) -> web.Response:
    return web.json_response(forged(request), status=201 if request.method == "POST" else 200)


async def _unexpected_answer(
    client: HttpPaymentProvider, call: str
) -> pytest.ExceptionInfo[UnexpectedProviderAnswer]:
    """``call`` (capture, refund or lookup) made, and the ``UnexpectedProviderAnswer`` it
    raised."""
    made = (
        client.lookup("order-1:capture")
        if call == "lookup"
        else client.perform(request(Operation(call)))
    )
    with pytest.raises(UnexpectedProviderAnswer) as raised:
        await made
    return raised


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308, 399])  # every 3xx
@pytest.mark.parametrize("call", ["capture", "refund", "lookup"])
async def test_a_redirect_is_never_followed_and_is_systemic(status: int, call: str) -> None:
    async with local_host(other_host_answer) as (other_url, at_other_host):

        async def redirect(request: web.Request) -> web.Response:
            return web.Response(status=status, headers={"Location": other_url + request.path_qs})

        async with (
            local_host(redirect) as (provider_url, at_provider),
            HttpPaymentProvider(provider_url, "the-credential", timeout_s=2) as client,
        ):
            raised = await _unexpected_answer(client, call)

    assert at_other_host == []  # not the body, not the key, not a GET in its place
    assert len(at_provider) == 1
    assert f"HTTP {status}" in raised.value.description
    assert raised.value.description.endswith(
        f": HTTP {status}, a redirect: not followed, a provider call goes to the configured base "
        "URL only"
    )
    assert other_url not in raised.value.description  # the Location steers nothing, not a log


def padded_success(size: int) -> bytes:
    """A success the stand-in would answer, padded with spaces to exactly ``size`` bytes."""
    body = json.dumps({"id": "op_1", "operation": "capture", "amount_minor": 1250}).encode()
    return body + b" " * (size - len(body))


@pytest.mark.parametrize(
    ("size", "read"), [(MAX_ANSWER_BYTES, True), (MAX_ANSWER_BYTES + 1, False)]
)
async def test_an_answer_is_read_up_to_the_bound_and_refused_past_it(size: int, read: bool) -> None:
    async def success(request: web.Request) -> web.Response:
        return web.Response(status=201, body=padded_success(size), content_type="application/json")

    async with local_host(success) as (url, _), HttpPaymentProvider(url, "key") as client:
        if read:
            assert (await client.perform(request())).provider_id == "op_1"
        else:
            with pytest.raises(UnexpectedProviderAnswer, match=f"over {MAX_ANSWER_BYTES} bytes"):
                await client.perform(request())


async def endless_body(request: web.Request) -> web.StreamResponse:
    """A 201 whose chunked body never ends: it can never be read whole."""
    response = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError):  # until the client goes away
        while True:
            await response.write(b" " * 4096)
    return response


async def declared_huge_body(request: web.Request) -> web.StreamResponse:
    """A 201 that declares a gigabyte and sends one byte: refused from its Content-Length."""
    response = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
    response.content_length = 2**30
    await response.prepare(request)
    await response.write(b"{")
    await asyncio.sleep(60)  # cancelled at the server's shutdown
    return response


@pytest.mark.parametrize("answer", [endless_body, declared_huge_body])
async def test_a_body_over_the_bound_is_refused_without_reading_it_whole(answer: Answer) -> None:
    # Read whole, either would hold the call until its timeout: ProviderUnavailable, "the money
    # may have moved" from a host whose answer is no answer of the API's.
    async with (
        local_host(answer) as (url, _),
        HttpPaymentProvider(url, "key", timeout_s=5) as client,
    ):
        with pytest.raises(UnexpectedProviderAnswer, match=f"over {MAX_ANSWER_BYTES} bytes"):
            await asyncio.wait_for(client.perform(request()), timeout=2)


# -- the base URL, as the docs give it -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
BASE_URL_DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "infra").rglob("*.bicep")),
    ROOT / "local.settings.json.template",
]
_URL = re.compile(r"https?://[^\s'\"`)]+")


def documented_base_urls() -> list[tuple[str, str]]:
    """Every example URL on a line that sets or describes ``PAYMENT_PROVIDER_BASE_URL``."""
    found = []
    for document in BASE_URL_DOCUMENTS:
        for line in document.read_text().splitlines():
            if "PAYMENT_PROVIDER_BASE_URL" in line or "paymentProviderBaseUrl" in line:
                found += [(document.name, url.rstrip(".,;")) for url in _URL.findall(line)]
    return found


def test_the_docs_give_examples_of_the_base_url() -> None:
    # So that the next test cannot pass on no example at all.
    assert {name for name, _ in documented_base_urls()} >= {
        "infrastructure.md",
        "operations.md",
        "function.bicep",
        "local.settings.json.template",
    }


@pytest.mark.parametrize(("document", "url"), documented_base_urls())
async def test_every_documented_base_url_joined_with_the_paths_reaches_the_api(
    provider: PaymentProviderStandIn, document: str, url: str
) -> None:
    # The documented URL's path on the stand-in's origin: what the adapter appends goes after it.
    async with HttpPaymentProvider(provider.url + urlparse(url).path, provider.api_key) as client:
        payment = request()
        await client.perform(payment)
        await client.perform(request(Operation.REFUND, order_id=payment.order_id))
        await client.lookup(payment.reference)

    assert set(provider.requests_received) == {
        f"POST {CAPTURES_PATH}",
        f"POST {REFUNDS_PATH}",
        f"GET {OPERATIONS_PATH}",
    }
    assert CAPTURES_PATH == "/v1/captures"


@pytest.mark.parametrize(
    ("status", "body", "call"),
    [
        (202, {"title": "Accepted"}, "capture"),
        (204, None, "refund"),
        (202, {"title": "Accepted"}, "lookup"),
        (410, {"title": "Gone"}, "lookup"),
    ],
)
async def test_a_status_outside_the_api_is_systemic_and_the_description_says_which(
    status: int, body: dict[str, str] | None, call: str
) -> None:
    async with (
        local_host(answering(status, body)) as (url, _),
        HttpPaymentProvider(url, "the-credential", timeout_s=2) as client,
    ):
        raised = await _unexpected_answer(client, call)

    detail = body["title"] if body else "no problem details"
    assert raised.value.description.startswith(f"{call} '")  # which call, and its reference
    assert raised.value.description.endswith(
        f": HTTP {status} is not in the provider's API: {detail}"
    )


@pytest.mark.parametrize("timeout_s", [0, -1.0])
def test_a_timeout_of_zero_or_less_is_refused_never_an_unbounded_money_call(
    timeout_s: float,
) -> None:
    # aiohttp reads a total of 0 or less as no timeout at all (helpers.py ceil_timeout): a
    # capture would wait for the provider forever, holding the message's lock.
    with pytest.raises(ValueError, match=f"^timeout_s must be > 0, not {timeout_s}$"):
        HttpPaymentProvider("https://api.provider.example", "key", timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("status", "refusal", "committed"),
    [
        (429, ProviderUnavailable, False),
        (503, ProviderUnavailable, True),
        (409, ProviderBusy, None),
    ],
)
@pytest.mark.parametrize(
    ("retry_after", "wait_s"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("-3", 0.0),  # never a negative wait
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),  # an HTTP-date is not read
        (None, None),
    ],
)
async def test_the_providers_retry_after_is_the_wait_it_asks_for_in_seconds_never_negative(
    status: int,
    refusal: type[ProviderUnavailable | ProviderBusy],
    committed: bool | None,
    retry_after: str | None,
    wait_s: float | None,
) -> None:
    # RFC 9110 section 10.2.3: Retry-After in seconds; the consumer waits that long before the
    # key's repeat (a 429, a 5xx, the draft's 409 while the first attempt is processed).
    headers = None if retry_after is None else {"Retry-After": retry_after}
    async with (
        local_host(answering(status, {"title": "Wait"}, headers)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        with pytest.raises(refusal) as raised:
            await client.perform(request())

    assert type(raised.value) is refusal
    assert raised.value.retry_after_s == wait_s
    if isinstance(raised.value, ProviderUnavailable):
        assert raised.value.may_have_committed is committed


async def test_a_declined_card_looked_up_is_the_same_result_with_no_provider_id(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    # The stand-in lists every operation with its id; only a success's id is the money's.
    payment = request(customer_id=DECLINED_CUSTOMER)
    answered = await client.perform(payment)
    found = await client.lookup(payment.reference)

    assert found.status is LookupStatus.FOUND and found.result is not None
    assert found.result.status is ResultStatus.DECLINED is answered.status
    assert found.result.provider_id is None is answered.provider_id
    assert found.result.amount_minor == payment.amount_minor == answered.amount_minor
    assert found.result.reference == payment.reference == answered.reference
    assert found.result.detail == "the card was declined"  # the provider's words, as listed
    assert answered.detail == "Card declined: the card was declined"  # its problem's, RFC 9457
    assert provider.ledger == ()


@pytest.mark.parametrize("body", [{"operation": "capture"}, {"id": "op_1"}, ["op_1", 1250]])
async def test_a_success_without_its_id_and_amount_is_systemic_and_says_so(body: Any) -> None:
    payment = request()
    async with (
        local_host(answering(201, body)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        with pytest.raises(UnexpectedProviderAnswer) as raised:
            await client.perform(payment)

    assert raised.value.description == (
        f"capture {payment.reference!r}: a success without its id and amount"
    )


@pytest.mark.parametrize("status", [200, 201])
async def test_a_success_answered_200_or_201_is_the_money_moved(status: int) -> None:
    # The adapter's status table reads either as the operation done (the stand-in answers 201):
    # a 200 taken for anything else would leave moved money unrecorded.
    operation = {"id": "op_7", "operation": "capture", "status": "succeeded", "amount_minor": 1250}
    payment = request()
    async with (
        local_host(answering(status, operation)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        result = await client.perform(payment)

    assert (result.status, result.provider_id, result.amount_minor) == (
        ResultStatus.SUCCEEDED,
        "op_7",
        1250,
    )


@pytest.mark.parametrize("status", [429, 503])
async def test_a_lookup_the_provider_cannot_answer_never_claims_money_may_have_moved(
    status: int,
) -> None:
    # A GET moves no money: its failure must never read as a capture that may have committed.
    async with (
        local_host(answering(status, {"title": "Unavailable"})) as (url, received),
        HttpPaymentProvider(url, "key") as client,
    ):
        with pytest.raises(ProviderUnavailable) as raised:
            await client.lookup("order-1:capture:1")

    assert raised.value.may_have_committed is False
    assert raised.value.description.startswith("lookup 'order-1:capture:1': ")
    assert "Unavailable" in raised.value.description
    assert [(seen.method, seen.path_qs) for seen in received] == [
        ("GET", f"{OPERATIONS_PATH}?reference=order-1:capture:1")
    ]


@pytest.mark.parametrize(
    "answer",
    [
        {"reference": "order-1:capture:1"},  # no operations
        {"operations": [{"state": "completed", "amount_minor": 1250}]},  # no outcome
        {"operations": [{"state": "completed", "outcome": "maybe", "amount_minor": 1}]},
        {"operations": [{"state": "completed", "outcome": "succeeded", "amount_minor": "x"}]},
    ],
)
async def test_a_lookup_answer_it_cannot_read_is_systemic_and_says_which_lookup(
    answer: dict[str, Any],
) -> None:
    async with (
        local_host(answering(200, answer)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        with pytest.raises(UnexpectedProviderAnswer) as raised:
            await client.lookup("order-1:capture:1")

    assert raised.value.description.startswith("lookup 'order-1:capture:1': unreadable answer (")


@pytest.mark.parametrize(
    ("status", "refusal", "committed"),
    [
        (401, ProviderRejectedCredentials, None),
        (403, ProviderRejectedCredentials, None),
        (500, ProviderUnavailable, True),
        (501, ProviderUnavailable, True),
    ],
)
@pytest.mark.parametrize("oversized", [False, True])
async def test_a_systemic_status_is_classified_by_its_status_even_with_an_answer_too_large(
    status: int,
    refusal: type[ProviderRejectedCredentials | ProviderUnavailable],
    committed: bool | None,
    oversized: bool,
) -> None:
    # A capture's 5xx may have moved the money (the key's repeat or the lookup will tell); a
    # refused credential is the operator's to fix. The answer's size changes neither.
    payment = request()
    body = (
        {"title": "Failed", "padding": " " * MAX_ANSWER_BYTES} if oversized else {"title": "Failed"}
    )
    async with (
        local_host(answering(status, body)) as (url, _),
        HttpPaymentProvider(url, "key") as client,
    ):
        with pytest.raises(refusal) as raised:
            await client.perform(payment)

    assert type(raised.value) is refusal
    detail = "an answer too large to read" if oversized else "Failed"
    assert raised.value.description.startswith(f"capture {payment.reference!r}: HTTP {status}: ")
    assert f"HTTP {status}: {detail}" in raised.value.description
    if isinstance(raised.value, ProviderUnavailable):
        assert raised.value.may_have_committed is committed


async def test_a_lookup_that_lists_no_operation_finds_nothing() -> None:
    async with (
        local_host(answering(200, {"reference": "order-1:capture:1", "operations": []})) as (
            url,
            _,
        ),
        HttpPaymentProvider(url, "key") as client,
    ):
        found = await client.lookup("order-1:capture:1")

    assert found.status is LookupStatus.NOT_FOUND and found.result is None


async def test_an_adapter_closed_and_used_again_opens_a_session_of_its_own(
    provider: PaymentProviderStandIn,
) -> None:
    adapter = HttpPaymentProvider(provider.url, provider.api_key)
    await adapter.perform(request())
    await adapter.close()
    try:
        await adapter.perform(request())
    finally:
        await adapter.close()

    assert len(provider.ledger) == 2


# -- the transport's own failures, the connection, the key's header --------------------------------


@dataclass(slots=True)
class RawConnection:
    """One connection the client opened to ``raw_host``: the requests read whole on it, and
    whether the client closed it."""

    requests: int = 0
    closed_by_client: asyncio.Event = field(default_factory=asyncio.Event)


def http_answer(status: int, body: dict[str, Any]) -> bytes:
    """A whole HTTP/1.1 answer, kept alive (no ``Connection: close``)."""
    content = json.dumps(body).encode()
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(content)}\r\n\r\n".encode() + content


@asynccontextmanager
async def raw_host(answer: bytes | None) -> AsyncIterator[tuple[str, list[RawConnection]]]:
    """A bare HTTP/1.1 server on 127.0.0.1 that reads each request whole and writes ``answer``,
    or, with None, drops the connection once the request is read (no answer at all): its URL and
    the connections the client opened. Bare, so that a connection is seen as the client uses it
    (aiohttp's server would hide when the client reuses or closes one)."""
    connections: list[RawConnection] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = RawConnection()
        connections.append(connection)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                await reader.readexactly(int(length.group(1)) if length else 0)
                connection.requests += 1
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except asyncio.IncompleteReadError:  # the client closed the connection
            connection.closed_by_client.set()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", connections
    finally:
        server.close()
        server.close_clients()
        await server.wait_closed()


@pytest.mark.parametrize(("call", "committed"), [("capture", True), ("lookup", False)])
async def test_a_connection_lost_after_the_request_was_sent_is_unavailable_outcome_unknown(
    call: str, committed: bool
) -> None:
    # The provider read the whole capture: it may have moved the money before the connection
    # went (aiohttp raises a ClientError, neither a timeout nor a connection never made); a
    # lookup moves none.
    payment = request()
    reference = "order-1:capture:1" if call == "lookup" else payment.reference
    async with raw_host(None) as (url, connections), HttpPaymentProvider(url, "key") as client:
        made = client.lookup(reference) if call == "lookup" else client.perform(payment)
        with pytest.raises(ProviderUnavailable) as raised:
            await made

    # Sent whole; a GET once more on a new connection (aiohttp retries an idempotent method once
    # after a lost connection, RFC 9112 section 9.3.1.1, client.py IDEMPOTENT_METHODS), never
    # a POST: a money call is sent once.
    sent = [1] if call == "capture" else [1, 1]
    assert [connection.requests for connection in connections] == sent
    assert raised.value.may_have_committed is committed
    assert raised.value.description == (
        f"{call} {reference!r}: the connection failed (ServerDisconnectedError); the outcome is "
        "unknown"
    )


async def test_a_timeout_and_a_connection_never_made_say_which_call_and_what_happened(
    provider: PaymentProviderStandIn, client: HttpPaymentProvider
) -> None:
    provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HOLD_S))
    late = request()
    with pytest.raises(ProviderUnavailable) as timed_out:
        await client.perform(late)
    provider.stop()
    unreached = request()
    with pytest.raises(ProviderUnavailable) as not_connected:
        await client.perform(unreached)

    assert timed_out.value.description == (
        f"capture {late.reference!r}: no answer within {CLIENT_TIMEOUT_S:g} s; the outcome is "
        "unknown"
    )
    assert not_connected.value.description == (
        f"capture {unreached.reference!r}: no connection to the provider (ClientConnectorError)"
    )
    # Provably not sent: the one case of a capture's failure the caller may make afresh.
    assert (timed_out.value.may_have_committed, not_connected.value.may_have_committed) == (
        True,
        False,
    )
    assert not_connected.value.performed_nothing is True


async def test_a_success_whose_body_is_not_json_is_systemic_and_says_so() -> None:
    async def html(request: web.Request) -> web.Response:
        return web.Response(status=201, text="<html>captured</html>", content_type="text/html")

    payment = request()
    async with local_host(html) as (url, _), HttpPaymentProvider(url, "key") as client:
        with pytest.raises(UnexpectedProviderAnswer) as raised:
            await client.perform(payment)

    assert raised.value.description == (
        f"capture {payment.reference!r}: HTTP 201 with a body that is not JSON"
    )


async def test_calls_through_one_adapter_share_one_connection_which_closing_the_adapter_ends() -> (
    None
):
    # Keep-alive: a connection (a TLS handshake) per money call otherwise. The session the
    # adapter opened is its own to close, and with it the connection.
    operation = {"id": "op_7", "operation": "capture", "status": "succeeded", "amount_minor": 1250}
    async with raw_host(http_answer(201, operation)) as (url, connections):
        async with HttpPaymentProvider(url, "key") as client:
            for _ in range(3):
                assert (await client.perform(request())).provider_id == "op_7"
        await asyncio.wait_for(connections[0].closed_by_client.wait(), timeout=2)

    assert [connection.requests for connection in connections] == [3]


async def test_a_base_url_with_a_path_and_a_trailing_slash_is_joined_with_the_apis_paths() -> None:
    operation = {"id": "op_7", "operation": "capture", "status": "succeeded", "amount_minor": 1250}
    async with (
        local_host(answering(201, operation)) as (url, received),
        HttpPaymentProvider(url + "/gateway-X/", "key") as client,
    ):
        await client.perform(request())

    assert [seen.path_qs for seen in received] == [f"/gateway-X{CAPTURES_PATH}"]


def test_an_adapter_configured_without_saying_honours_idempotency_keys() -> None:
    # The draft's provider (the default profile) honours them: without a repeat's key, the
    # capture would look up every lost attempt before repeating it.
    assert (
        HttpPaymentProvider("https://api.provider.example", "key").honours_idempotency_keys is True
    )


@pytest.mark.parametrize("key", ["\x1f", "k\x7f", "\x00", "clé"])  # below, at and past the ends
def test_a_key_outside_printable_ascii_is_refused_before_anything_is_sent(key: str) -> None:
    with pytest.raises(
        ValueError, match=r"^an Idempotency-Key must be printable ASCII \(RFC 8941 String\)$"
    ):
        sf_string(key)


def test_the_printable_ascii_ends_are_sent_as_they_are_and_quotes_escaped() -> None:
    # RFC 8941 section 4.1.6: %x20-7E; only DQUOTE and "\" escaped.
    assert sf_string(" ~") == '" ~"'
    assert sf_string('a"b\\c') == '"a\\"b\\\\c"'


async def test_a_success_sent_in_pieces_is_read_whole() -> None:
    # A chunked answer (HTTP/1.1 section 7.1) arrives as the provider writes it: each piece is
    # its own read, and the operation is all of them.
    operation = json.dumps({"id": "op_7", "operation": "capture", "amount_minor": 1250}).encode()

    async def in_pieces(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(operation), 16):
            await response.write(operation[start : start + 16])
            await asyncio.sleep(0.01)  # sent before the next is written
        await response.write_eof()
        return response

    async with local_host(in_pieces) as (url, _), HttpPaymentProvider(url, "key") as client:
        result = await client.perform(request())

    assert (result.status, result.provider_id, result.amount_minor) == (
        ResultStatus.SUCCEEDED,
        "op_7",
        1250,
    )


async def test_the_calls_go_through_a_session_passed_in_with_its_settings() -> None:
    # The caller's session is the one used (its headers, connector limits and traces apply),
    # never one the adapter opens beside it.
    operation = {"id": "op_7", "operation": "capture", "status": "succeeded", "amount_minor": 1250}
    async with (
        local_host(answering(201, operation)) as (url, received),
        aiohttp.ClientSession(headers={"User-Agent": "caller-app/1"}) as session,
    ):
        adapter = HttpPaymentProvider(url, "key", session=session)
        await adapter.perform(request())
        await adapter.close()

    assert [seen.headers.get("User-Agent") for seen in received] == ["caller-app/1"]
