"""The kit's Cosmos DB client verifies the server's certificate unless its caller says not to
(``create_client(..., connection_verify=False)``, what only a local stand-in with a self-signed
certificate needs): a deployed app never talks to Cosmos DB over TLS it has not verified.

azure-cosmos itself skips verification for the hosts ``localhost`` and ``127.0.0.1`` (the
emulator's: azure/cosmos/aio/_asynchronous_request.py:116-122), so the local server, whose
certificate is self-signed, is reached here through its IPv4-mapped IPv6 address, which the SDK
does not skip.

Mutation run 5, the twelfth session: ``idempotent_consumer.cosmos._store.create_client`` ``_1``
(``connection_verify`` defaulting to False).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from azure.core.exceptions import ServiceRequestError
from idempotent_consumer.cosmos import create_client


def mapped_endpoint(app_env: dict[str, str]) -> str:
    return f"https://[::ffff:127.0.0.1]:{urlsplit(app_env['COSMOS_ENDPOINT']).port}/"


async def test_the_kit_s_client_refuses_a_certificate_it_cannot_verify(
    app_env: dict[str, str],
) -> None:
    client = create_client(mapped_endpoint(app_env), app_env["COSMOS_KEY"])
    try:
        with pytest.raises(ServiceRequestError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.__aenter__()  # the account's read, the client's first request
    finally:
        await client.close()


async def test_the_kit_s_client_skips_verification_only_when_told(
    app_env: dict[str, str],
) -> None:
    async with create_client(
        mapped_endpoint(app_env), app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = await client.create_database_if_not_exists(app_env["COSMOS_DATABASE"])

    assert database.id == app_env["COSMOS_DATABASE"]
