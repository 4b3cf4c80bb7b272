"""Credentials in production, through the composition root (``shared.bootstrap``) and the real SDKs:
with the host's ``<connection>__credential`` = ``managedidentity`` the app authenticates as the
user-assigned identity of ``<connection>__clientId`` (``ManagedIdentityCredential``) and never
walks the default chain; without it, the developer's default chain (``DefaultAzureCredential``).
The managed identity endpoint is App Service's, on 127.0.0.1 (``identity_endpoint``); Cosmos DB
is the local server, which accepts any token, so what is checked is the token the SDK sent.

Each test fails on 2fb4db9, whose app built ``DefaultAzureCredential`` everywhere: the token
request then named ``AZURE_CLIENT_ID`` (the environment's identity), not the connection's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import ConfigurationError

from local.assembly.world import World
from local.standins.broker import PeekLockQueue
from local.standins.faults import FaultInjectingTransport
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from shared.config import IdentitySettings, RelaySettings, Settings
from tests.integration.identity_endpoint import IdentityEndpoint, identity_endpoint, token_for
from tests.orders import message, order_body
from tests.state import documents

UAMI = str(uuid.UUID(int=1))  # the user-assigned identity the Bicep names
ENVIRONMENT_IDENTITY = str(uuid.UUID(int=2))  # an AZURE_CLIENT_ID the instance happens to have


class AuthorizationHeaders(FaultInjectingTransport):
    """Records the Authorization header of every document request the Cosmos SDK sends."""

    def __init__(self) -> None:
        super().__init__(connection_verify=False)
        self.authorizations: list[str] = []

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        if "/docs" in request.url:
            self.authorizations.append(unquote(request.headers.get("authorization", "")))
        return await super().send(request, **kwargs)


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[IdentityEndpoint]:
    with identity_endpoint() as found:
        for name, value in found.environment.items():
            monkeypatch.setenv(name, value)
        # The default chain would take this one (DefaultAzureCredential's managed identity
        # defaults to AZURE_CLIENT_ID); the managed identity setting must not.
        monkeypatch.setenv("AZURE_CLIENT_ID", ENVIRONMENT_IDENTITY)
        yield found


def keyless(world: World, **settings: str) -> dict[str, str]:
    """The app's settings without the account key: Entra ID, as deployed."""
    return {**{k: v for k, v in world.env.items() if k != "COSMOS_KEY"}, **settings}


async def one_order(host: LocalFunctionsHost, queue: PeekLockQueue, order_id: str) -> None:
    queue.send(message(order_body(order_id), message_id=order_id))
    await host.run_until_idle()


async def test_the_deployed_settings_give_the_cosmos_client_the_user_assigned_identity(
    world: World,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    endpoint: IdentityEndpoint,
) -> None:
    transport = AuthorizationHeaders()
    env = keyless(
        world,
        CosmosDBConnection__credential="managedidentity",
        CosmosDBConnection__clientId=UAMI,
    )
    world.compose(env=env, transport=transport)

    await one_order(host, queue, "ord-mi-1")

    assert [d["id"] for d in await documents(container) if d["type"] == "order"] == ["ord-mi-1"]
    assert {(r.client_id, r.secret_ok) for r in endpoint.requests} == {(UAMI, True)}
    assert transport.authorizations
    assert all(f"sig={token_for(UAMI)}" in a for a in transport.authorizations)


async def test_without_the_credential_setting_the_default_chain_is_used(
    world: World,
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    container: ContainerProxy,
    endpoint: IdentityEndpoint,
) -> None:
    # A developer's settings: no __credential (a __clientId alone is ignored, as by the host).
    transport = AuthorizationHeaders()
    world.compose(env=keyless(world, CosmosDBConnection__clientId=UAMI), transport=transport)

    await one_order(host, queue, "ord-dev-1")

    # DefaultAzureCredential reached its managed identity step, with AZURE_CLIENT_ID's identity.
    assert {r.client_id for r in endpoint.requests} == {ENVIRONMENT_IDENTITY}
    assert all(f"sig={token_for(ENVIRONMENT_IDENTITY)}" in a for a in transport.authorizations)


async def test_the_relay_s_service_bus_client_has_the_queue_trigger_s_identity(
    relay_env: dict[str, str], endpoint: IdentityEndpoint
) -> None:
    env = {
        **relay_env,
        "ServiceBusConnection__credential": "managedidentity",
        "ServiceBusConnection__clientId": UAMI,
    }
    sender, closers = bootstrap._topic_sender(RelaySettings.from_env(env))
    try:
        # The credential the SDK will authenticate its CBS link with (BaseHandler keeps it as
        # _credential, azure/servicebus/aio/_base_handler_async.py:158): no namespace answers
        # here, so it is asked for a token directly.
        token = await sender._credential.get_token("https://servicebus.azure.net/.default")  # type: ignore[attr-defined]
    finally:
        for close in closers:
            await close()
    assert token.token == token_for(UAMI)
    assert [(r.client_id, r.resource) for r in endpoint.requests] == [
        (UAMI, "https://servicebus.azure.net")
    ]


@pytest.fixture
def relay_env(app_env: dict[str, str]) -> dict[str, str]:
    return app_env


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, IdentitySettings()),
        ({"CosmosDBConnection__clientId": UAMI}, IdentitySettings()),
        ({"CosmosDBConnection__credential": "managedidentity"}, IdentitySettings(True)),
        (
            {
                "CosmosDBConnection__credential": "ManagedIdentity",
                "CosmosDBConnection__clientId": UAMI,
            },
            IdentitySettings(True, UAMI),
        ),
    ],
)
def test_the_credential_settings_are_read_as_the_host_reads_them(
    env: dict[str, str], expected: IdentitySettings
) -> None:
    base = {"ORDERS_QUEUE_NAME": "orders", "COSMOS_ENDPOINT": "https://a.documents.azure.com/"}
    assert Settings.from_env({**base, **env}).cosmos_identity == expected


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"CosmosDBConnection__credential": "connectionstring"}, "CosmosDBConnection__credential"),
        (
            {
                "CosmosDBConnection__credential": "managedidentity",
                "CosmosDBConnection__clientId": "x",
            },
            "CosmosDBConnection__clientId",
        ),
    ],
)
def test_an_invalid_credential_setting_fails_with_its_name(
    env: dict[str, str], setting: str
) -> None:
    base = {"ORDERS_QUEUE_NAME": "orders", "COSMOS_ENDPOINT": "https://a.documents.azure.com/"}
    with pytest.raises(ConfigurationError) as raised:
        Settings.from_env({**base, **env})
    assert raised.value.setting == setting


def test_the_relay_reads_the_queue_trigger_s_credential_settings() -> None:
    env = {
        "ORDER_EVENTS_TOPIC_NAME": "order-events",
        "ServiceBusConnection__fullyQualifiedNamespace": "ns.servicebus.windows.net",
        "ServiceBusConnection__credential": "managedidentity",
        "ServiceBusConnection__clientId": UAMI,
    }
    assert RelaySettings.from_env(env).identity == IdentitySettings(True, UAMI)
    with pytest.raises(ConfigurationError) as raised:
        RelaySettings.from_env({**env, "ServiceBusConnection__credential": "secret"})
    assert raised.value.setting == "ServiceBusConnection__credential"
