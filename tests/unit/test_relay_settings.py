"""The relay's settings (``shared.config.RelaySettings``), both ways of naming the Service Bus
connection the queue trigger uses: the namespace (``ServiceBusConnection__fullyQualifiedNamespace``,
identity-based: Azure) and the connection string (``ServiceBusConnection``: the emulators, as
local.settings.json.template sets it).

What each test kills (``make mutation``, ``shared.config.xǁRelaySettingsǁfrom_env``): the
emulator's connection string dropped or read from another setting, a default that makes an unset
namespace look set, the namespace's connection string kept beside it, the identity read for a
connection string, a URL-form namespace accepted (it would then fail every send, retried for
ever: a misconfiguration is never parked), the messages that name the alternative or echo the
bad value (bounded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.servicebus.aio import ServiceBusSender
from idempotent_consumer import ConfigurationError

from shared import bootstrap as runtime
from shared.config import (
    NAMESPACE_SETTING,
    SERVICE_BUS_CONNECTION_STRING_SETTING,
    TOPIC_SETTING,
    IdentitySettings,
    RelaySettings,
)

REPO = Path(__file__).resolve().parents[2]
TOPIC = "order-events"
NAMESPACE = "orders-ns.servicebus.windows.net"
UAMI = "00000000-0000-0000-0000-000000000001"


def emulator_connection_string() -> str:
    """What a developer's local.settings.json has (the template's value)."""
    template = json.loads((REPO / "local.settings.json.template").read_text())
    value: str = template["Values"][SERVICE_BUS_CONNECTION_STRING_SETTING]
    assert "UseDevelopmentEmulator=true" in value
    return value


async def test_the_emulator_s_connection_string_alone_builds_a_sender_for_the_emulator() -> None:
    connection_string = emulator_connection_string()
    env = {
        TOPIC_SETTING: TOPIC,
        SERVICE_BUS_CONNECTION_STRING_SETTING: f"  {connection_string}  ",
        # The host's credential settings belong to the namespace form: ignored here.
        "ServiceBusConnection__credential": "managedidentity",
    }

    settings = RelaySettings.from_env(env)

    assert settings == RelaySettings(TOPIC, None, connection_string, IdentitySettings())
    sender, closers = runtime._topic_sender(settings)
    try:
        assert isinstance(sender, ServiceBusSender)
        assert sender.fully_qualified_namespace == "localhost"
        assert sender.entity_name == TOPIC
    finally:
        for close in closers:
            await close()


def test_the_namespace_wins_over_a_connection_string_and_brings_the_identity() -> None:
    env = {
        TOPIC_SETTING: TOPIC,
        NAMESPACE_SETTING: f" {NAMESPACE} ",
        SERVICE_BUS_CONNECTION_STRING_SETTING: emulator_connection_string(),
        "ServiceBusConnection__credential": "managedidentity",
        "ServiceBusConnection__clientId": UAMI,
    }

    settings = RelaySettings.from_env(env)

    # The connection string (it holds a key) is not kept once the namespace is used.
    assert settings == RelaySettings(TOPIC, NAMESPACE, None, IdentitySettings(True, UAMI))


def test_neither_form_fails_naming_the_namespace_and_the_emulators_alternative() -> None:
    with pytest.raises(ConfigurationError) as raised:
        RelaySettings.from_env({TOPIC_SETTING: TOPIC, NAMESPACE_SETTING: "  "})

    assert raised.value.setting == NAMESPACE_SETTING
    assert str(raised.value) == (
        f"{NAMESPACE_SETTING}: is required (or {SERVICE_BUS_CONNECTION_STRING_SETTING} "
        "for emulators)"
    )


@pytest.mark.parametrize(
    "namespace",
    [
        f"sb://{NAMESPACE}/",
        f"sb://{NAMESPACE}",
        f"https://{NAMESPACE}/",
        f"{NAMESPACE}/",
        "orders-ns",
    ],
)
def test_a_namespace_that_is_no_host_name_is_refused_naming_the_setting(namespace: str) -> None:
    # Refused even beside a valid connection string: the namespace is what would be used.
    env = {
        TOPIC_SETTING: TOPIC,
        NAMESPACE_SETTING: namespace,
        SERVICE_BUS_CONNECTION_STRING_SETTING: emulator_connection_string(),
    }
    with pytest.raises(ConfigurationError) as raised:
        RelaySettings.from_env(env)

    assert raised.value.setting == NAMESPACE_SETTING
    assert str(raised.value) == (
        f"{NAMESPACE_SETTING}: must be <name>.servicebus.windows.net, got {namespace!r}"
    )


def test_a_refused_namespace_is_echoed_bounded_to_80_characters() -> None:
    namespace = "sb://" + "n" * 200 + ".servicebus.windows.net/"
    with pytest.raises(ConfigurationError) as raised:
        RelaySettings.from_env({TOPIC_SETTING: TOPIC, NAMESPACE_SETTING: namespace})

    assert str(raised.value).endswith(f"got {namespace[:80]!r}")
