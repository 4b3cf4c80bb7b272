"""The orders API's settings (``shared.config.EdgeSettings``): the queue the consumer reads, the
requests container (default ``requests``), the Service Bus connection of the queue trigger."""

from __future__ import annotations

import pytest
from idempotent_consumer import ConfigurationError

from shared.config import EdgeSettings, IdentitySettings

NAMESPACE = {"ServiceBusConnection__fullyQualifiedNamespace": "ns.servicebus.windows.net"}


def test_the_defaults_and_the_queue_trigger_s_connection() -> None:
    settings = EdgeSettings.from_env(
        {
            "ORDERS_QUEUE_NAME": "orders",
            **NAMESPACE,
            "ServiceBusConnection__credential": "managedidentity",
        }
    )

    assert settings.queue_name == "orders"
    assert settings.requests_container == "requests"
    assert settings.fully_qualified_namespace == "ns.servicebus.windows.net"
    assert settings.connection_string is None
    assert settings.identity == IdentitySettings(managed=True)


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        (NAMESPACE, "ORDERS_QUEUE_NAME"),
        ({"ORDERS_QUEUE_NAME": "orders"}, "ServiceBusConnection__fullyQualifiedNamespace"),
        (
            {"ORDERS_QUEUE_NAME": "orders", **NAMESPACE, "REQUESTS_CONTAINER": "a/b"},
            "REQUESTS_CONTAINER",
        ),
    ],
)
def test_a_missing_or_invalid_setting_is_named(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        EdgeSettings.from_env(env)
    assert error.value.setting == setting
