"""The provider adapter's module-level values, spelled out (mutation run 5, the tenth session:
``tools/mutation/constants.py`` ``PAYMENT_PROVIDER``). The stand-in provider imports the header
name from the adapter and ``tests/payments/test_provider.py`` reads the bound through its name,
so a changed value moves both sides together there; here each is held to what the draft, the
adapter's docstring and the app's settings page say, through a real HTTP exchange where there
is one.
"""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from shared.adapters.payment_provider import HttpPaymentProvider
from shared.config import DEFAULT_PAYMENT_PROVIDER_TIMEOUT_S
from shared.payments.provider import UnexpectedProviderAnswer
from tests.payments.test_provider import local_host, padded_success, request

KIB_64 = 65_536  # the adapter's docstring: no answer is read beyond 64 KiB


async def created(_request: web.Request) -> web.Response:
    body = {"id": "op_1", "operation": "capture", "amount_minor": 1250}
    return web.Response(status=201, body=json.dumps(body).encode(), content_type="application/json")


async def test_the_key_travels_in_the_drafts_idempotency_key_header_field() -> None:
    # draft-ietf-httpapi-idempotency-key-header, section 2: the field is named Idempotency-Key
    # (field names are case-insensitive, RFC 9110 section 5.1).
    sent = request(key="payment-capture:msg-1:capture")
    async with local_host(created) as (url, received), HttpPaymentProvider(url, "key") as client:
        await client.perform(sent)

    [post] = received
    fields = {name.lower(): value for name, value in post.headers.items()}
    assert fields["idempotency-key"] == '"payment-capture:msg-1:capture"'


@pytest.mark.parametrize(("size", "read"), [(KIB_64, True), (KIB_64 + 1, False)])
async def test_an_answer_of_64_kib_is_read_and_one_byte_more_is_refused(
    size: int, read: bool
) -> None:
    async def success(_request: web.Request) -> web.Response:
        return web.Response(status=201, body=padded_success(size), content_type="application/json")

    async with local_host(success) as (url, _), HttpPaymentProvider(url, "key") as client:
        if read:
            assert (await client.perform(request())).provider_id == "op_1"
        else:
            with pytest.raises(UnexpectedProviderAnswer, match="over 65536 bytes"):
                await client.perform(request())


def test_an_adapter_built_without_a_timeout_has_the_apps_documented_default() -> None:
    # docs/configuration.md: PAYMENT_PROVIDER_TIMEOUT_SECONDS, 10 s by default; an app building
    # the adapter itself, without one, gets the same bound on each request.
    assert DEFAULT_PAYMENT_PROVIDER_TIMEOUT_S == 10.0
    assert HttpPaymentProvider("http://127.0.0.1:9", "key").timeout_s == 10.0
