"""``classify_error``: every Cosmos DB status and exception the consumer can meet, and what a
redelivery can fix about it. ``None`` means "cannot tell": the core treats it as unexpected
(held briefly, then abandoned, logged with its stack trace)."""

from __future__ import annotations

import binascii

import aiohttp
import pytest
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, ServiceResponseError
from azure.core.pipeline.policies import AzureKeyCredentialPolicy
from azure.cosmos import exceptions as cosmos_errors
from azure.cosmos.aio import CosmosClient
from azure.identity import ClientSecretCredential
from idempotent_consumer import StoreError, SystemicStoreError, TransientStoreError
from idempotent_consumer.cosmos import classify_error

from local.standins.cosmos_server import EMULATOR_KEY
from shared.adapters.cosmos_orders import CosmosOrderStore, create_client
from shared.config import Settings

SYSTEMIC, TRANSIENT, UNKNOWN = SystemicStoreError, TransientStoreError, None

# (status, writing) -> expected class. 409 on a create and 404 on the point read are handled
# before classification (OrderAlreadyExists, "no such order"); classified, they are unknown.
STATUSES: dict[tuple[int, bool], type[StoreError] | None] = {
    (400, True): UNKNOWN,  # a request this code built wrong: a bug, not the moment
    (401, True): SYSTEMIC,  # key or token rejected
    (403, True): SYSTEMIC,  # RBAC role missing
    (404, True): SYSTEMIC,  # database or container missing
    (404, False): UNKNOWN,
    (408, True): TRANSIENT,
    (409, True): UNKNOWN,
    (410, True): TRANSIENT,  # gone: partition moved, beyond the SDK's own retries
    (412, True): UNKNOWN,  # no ETag is ever sent
    (413, True): UNKNOWN,  # bodies are bounded at 256 KiB, far below the 2 MB item limit
    (429, True): TRANSIENT,  # throttled beyond the SDK's retries
    (449, True): TRANSIENT,
    (500, True): TRANSIENT,
    (502, True): TRANSIENT,  # a gateway in front of the account failed: the moment
    (503, True): TRANSIENT,
    (504, True): TRANSIENT,  # the gateway timed out waiting for the account: the moment
    (502, False): TRANSIENT,
    (504, False): TRANSIENT,
}


@pytest.mark.parametrize(("status", "writing"), list(STATUSES))
def test_every_status_is_classified_by_what_a_redelivery_can_fix(
    status: int, writing: bool
) -> None:
    error = cosmos_errors.CosmosHttpResponseError(  # type: ignore[no-untyped-call]
        status_code=status, message=f"status {status}"
    )

    classified = classify_error(error, writing=writing)

    expected = STATUSES[(status, writing)]
    if expected is None:
        assert classified is None
    else:
        assert type(classified) is expected
        assert str(status) in str(classified)


@pytest.mark.parametrize(
    ("status", "sub_status", "writing"),
    [(403, 3, True), (404, 1002, False)],
    ids=["write-forbidden-failover", "read-session-not-available"],
)
def test_a_status_whose_sub_status_means_the_moment_is_transient(
    status: int, sub_status: int, writing: bool
) -> None:
    """Past the SDK's own retries of these (endpoint discovery, session): the status alone would
    say the system (403) or "no such document" (404); the sub-status says the moment."""
    error = cosmos_errors.CosmosHttpResponseError(  # type: ignore[no-untyped-call]
        status_code=status, message="retried by the SDK", sub_status=sub_status
    )

    classified = classify_error(error, writing=writing)

    assert type(classified) is TRANSIENT
    assert f"{status}.{sub_status}" in str(classified)


def value_error_from_the_auth_policy() -> ValueError:
    """A real ValueError raised inside azure-core's authentication policy."""
    try:
        AzureKeyCredentialPolicy(AzureKeyCredential("key"), name="")
    except ValueError as error:
        return error
    raise AssertionError("the policy accepted an empty header name")


def value_error_from_azure_identity() -> ValueError:
    """A real ValueError raised inside azure-identity: a token request it refuses to make."""
    credential = ClientSecretCredential(
        "00000000-0000-0000-0000-000000000000", "client", "secret", authority="https://127.0.0.1:9"
    )
    try:
        credential.get_token()
    except ValueError as error:
        return error
    finally:
        credential.close()
    raise AssertionError("azure-identity asked for a token without a scope")


EXCEPTIONS: dict[str, tuple[Exception, type[StoreError] | None]] = {
    "credential failure": (ClientAuthenticationError("token request refused"), SYSTEMIC),
    "malformed account key (binascii.Error)": (binascii.Error("Incorrect padding"), SYSTEMIC),
    "ValueError from the auth policy": (value_error_from_the_auth_policy(), SYSTEMIC),
    "ValueError from azure-identity": (value_error_from_azure_identity(), SYSTEMIC),
    "any other ValueError": (ValueError("not a credential"), UNKNOWN),
    "client timeout": (cosmos_errors.CosmosClientTimeoutError(), TRANSIENT),  # type: ignore[no-untyped-call]
    "asyncio timeout": (TimeoutError(), TRANSIENT),
    "connection reset": (ConnectionResetError(104, "Connection reset by peer"), TRANSIENT),
    "response lost": (ServiceResponseError("connection closed"), TRANSIENT),
    "aiohttp connection error": (aiohttp.ClientConnectionError("refused"), TRANSIENT),
    "a bug": (KeyError("id"), UNKNOWN),
}


@pytest.mark.parametrize("case", list(EXCEPTIONS))
def test_every_exception_class_is_classified(case: str) -> None:
    error, expected = EXCEPTIONS[case]

    for writing in (True, False):
        classified = classify_error(error, writing=writing)
        if expected is None:
            assert classified is None
        else:
            assert type(classified) is expected


async def test_a_key_the_sdk_cannot_sign_with_is_systemic_through_the_real_client() -> None:
    """azure-cosmos signs every request with the account key (azure/cosmos/auth.py:90,
    ``base64.b64decode(master_key)``): a key it cannot decode raises a plain ValueError from
    inside ``azure.cosmos.auth`` on the first request, before anything is sent. That fails every
    order alike: systemic (abandon and alert), never "unexpected". Killed if
    ``azure.cosmos.auth`` leaves ``_AUTHENTICATION_MODULES``."""
    client = CosmosClient("https://127.0.0.1:9/", credential="ключ")
    store = CosmosOrderStore(client.get_database_client("orders").get_container_client("orders"))
    try:
        with pytest.raises(SystemicStoreError, match="credential failed") as raised:
            await store.create([{"id": "ord-1", "orderId": "ord-1"}])
    finally:
        await client.close()

    assert type(raised.value.__cause__) is ValueError


# What an operator reads in the log record and the span status of a failed attempt: the
# status, then the SDK's first line (for a Cosmos DB answer: "Status code: N", with the
# sub-status when the service sent one), bounded; never a multi-line dump.
DESCRIPTIONS: dict[str, tuple[Exception, str]] = {
    "transient answer": (
        cosmos_errors.CosmosHttpResponseError(  # type: ignore[no-untyped-call]
            status_code=503, message="service busy\nActivityId: 1"
        ),
        "Cosmos DB answered 503: Status code: 503",
    ),
    "systemic answer": (
        cosmos_errors.CosmosHttpResponseError(  # type: ignore[no-untyped-call]
            status_code=403, message="role missing"
        ),
        "Cosmos DB answered 403: Status code: 403",
    ),
    "credential": (
        ClientAuthenticationError("token request refused\nAADSTS700016"),
        "credential failed: ClientAuthenticationError: token request refused",
    ),
    "transport": (
        ServiceResponseError("connection closed\nby peer"),
        "ServiceResponseError: connection closed",
    ),
    "no message": (TimeoutError(), "TimeoutError: TimeoutError"),
    "a long first line": (ConnectionResetError("x" * 400), f"ConnectionResetError: {'x' * 300}"),
}


@pytest.mark.parametrize("case", list(DESCRIPTIONS))
def test_a_classified_error_is_described_by_its_first_line_bounded(case: str) -> None:
    error, expected = DESCRIPTIONS[case]

    assert str(classify_error(error, writing=True)) == expected


def test_a_client_without_key_or_credential_is_refused_with_what_to_do() -> None:
    settings = Settings(queue_name="orders", cosmos_endpoint="https://account.example:443/")
    with pytest.raises(ValueError, match=r"^COSMOS_KEY is unset: pass a credential \("):
        create_client(settings)


@pytest.mark.parametrize("verify", [True, False])
async def test_the_tls_setting_reaches_the_sdk(verify: bool) -> None:
    # COSMOS_VERIFY_TLS=false is for the emulators' self-signed certificates only; the SDK
    # keeps it as its connection policy's DisableSSLVerification (aio/_cosmos_client.py:96-97).
    settings = Settings(
        queue_name="orders",
        cosmos_endpoint="https://account.documents.azure.com:443/",
        cosmos_key=EMULATOR_KEY,
        cosmos_verify_tls=verify,
    )
    client = create_client(settings)
    try:
        assert client.client_connection.connection_policy.DisableSSLVerification is (not verify)
    finally:
        await client.close()
