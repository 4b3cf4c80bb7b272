"""The Docker emulator setup declares the same entities and semantics as the Bicep.

The Service Bus emulator caps some values (duplicate-detection window at 5 minutes, message TTL
at 1 hour, MaxDeliveryCount at 10): its config must equal infra/messaging.json, clamped to those
caps.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from ops.durations import parse_iso8601_duration as iso_duration  # the one parser
from tests.infra.infra_support import EMULATORS, INFRA, load_yaml, messaging, parse_bicep

COMPOSE = EMULATORS / "docker-compose.yml"
SERVICEBUS_CONFIG = EMULATORS / "servicebus-config.json"

EMULATOR_MAX_WINDOW = timedelta(minutes=5)
EMULATOR_MAX_TTL = timedelta(hours=1)
EMULATOR_MAX_LOCK = timedelta(minutes=5)
EMULATOR_MAX_DELIVERY_COUNT = 10


def _namespace() -> dict[str, Any]:
    config = json.loads(SERVICEBUS_CONFIG.read_text(encoding="utf-8"))
    namespaces = config["UserConfig"]["Namespaces"]
    assert len(namespaces) == 1
    namespace: dict[str, Any] = namespaces[0]
    assert namespace["Name"] == "sbemulatorns"  # the only name the emulator accepts
    return namespace


def _clamped(value: str, cap: timedelta) -> timedelta:
    return min(iso_duration(value), cap)


def _compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)


def test_emulator_queue_matches_messaging_json() -> None:
    expected = messaging()
    queues = _namespace()["Queues"]
    assert [q["Name"] for q in queues] == [expected["queueName"]]
    props = queues[0]["Properties"]
    assert props["RequiresDuplicateDetection"] is True
    assert props["DeadLetteringOnMessageExpiration"] is True
    assert props["RequiresSession"] is False
    assert props["LockDuration"] == expected["lockDuration"]
    assert iso_duration(props["LockDuration"]) <= EMULATOR_MAX_LOCK
    assert props["MaxDeliveryCount"] == expected["maxDeliveryCount"]
    assert props["MaxDeliveryCount"] <= EMULATOR_MAX_DELIVERY_COUNT
    assert iso_duration(props["DuplicateDetectionHistoryTimeWindow"]) == _clamped(
        expected["duplicateDetectionHistoryTimeWindow"], EMULATOR_MAX_WINDOW
    )
    assert iso_duration(props["DefaultMessageTimeToLive"]) == _clamped(
        expected["defaultMessageTimeToLive"], EMULATOR_MAX_TTL
    )


def test_emulator_topic_matches_messaging_json() -> None:
    expected = messaging()
    topics = _namespace()["Topics"]
    assert [t["Name"] for t in topics] == [expected["topicName"]]
    props = topics[0]["Properties"]
    assert props["RequiresDuplicateDetection"] is True
    assert iso_duration(props["DuplicateDetectionHistoryTimeWindow"]) == _clamped(
        expected["duplicateDetectionHistoryTimeWindow"], EMULATOR_MAX_WINDOW
    )
    # the emulator requires at least one subscription per topic
    subscriptions = topics[0]["Subscriptions"]
    assert len(subscriptions) >= 1
    for subscription in subscriptions:
        assert subscription["Properties"]["MaxDeliveryCount"] <= EMULATOR_MAX_DELIVERY_COUNT


def test_compose_declares_the_three_emulators() -> None:
    services = _compose()["services"]
    assert set(services) >= {"azurite", "cosmosdb", "servicebus"}
    assert services["azurite"]["image"].startswith("mcr.microsoft.com/azure-storage/azurite")
    assert services["cosmosdb"]["image"].startswith(
        "mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator"
    )
    assert services["servicebus"]["image"].startswith(
        "mcr.microsoft.com/azure-messaging/servicebus-emulator"
    )


@pytest.mark.parametrize(
    ("service", "port"),
    [
        ("azurite", "10000"),
        ("azurite", "10001"),
        ("azurite", "10002"),
        ("cosmosdb", "8081"),
        ("servicebus", "5672"),
    ],
)
def test_compose_publishes_the_ports_local_settings_use(service: str, port: str) -> None:
    ports = _compose()["services"][service]["ports"]
    assert f"{port}:{port}" in ports


def test_servicebus_emulator_mounts_the_config_and_has_its_sql_backend() -> None:
    services = _compose()["services"]
    servicebus = services["servicebus"]
    mounts = [volume.split(":") for volume in servicebus["volumes"]]
    config_mounts = [m for m in mounts if m[1] == "/ServiceBus_Emulator/ConfigFiles/Config.json"]
    assert len(config_mounts) == 1
    assert (COMPOSE.parent / config_mounts[0][0]).resolve() == SERVICEBUS_CONFIG.resolve()
    sql_service = servicebus["environment"]["SQL_SERVER"]
    assert sql_service in servicebus["depends_on"]
    assert sql_service in services
    assert services[sql_service]["image"].startswith("mcr.microsoft.com/")
    # the SA password and the EULA acceptance are never committed: they come from the shell
    for name in (sql_service, "servicebus"):
        environment = services[name]["environment"]
        assert environment["MSSQL_SA_PASSWORD"].startswith("${MSSQL_SA_PASSWORD:?")
        assert environment["ACCEPT_EULA"].startswith("${ACCEPT_EULA:?")


def test_every_emulator_image_is_pinned_to_a_version() -> None:
    """``latest`` (or ``2022-latest``) lets a new emulator release change local behaviour."""
    for name, service in _compose()["services"].items():
        repository, _, tag = service["image"].rpartition(":")
        assert repository.startswith("mcr.microsoft.com/"), name
        assert tag, f"{name}: no tag"
        assert "latest" not in tag, f"{name}: {tag}"
        assert any(character.isdigit() for character in tag), f"{name}: {tag}"


def test_emulator_has_the_consumer_subscriptions_with_the_bicep_s_filter() -> None:
    """`func start` against the emulator reads the subscriptions the local settings name
    (INVENTORY_SUBSCRIPTION_NAME, PAYMENTS_SUBSCRIPTION_NAME): the same names, the queue's
    semantics clamped to the emulator's caps, and the Bicep's `$Default` rule (the emulator's
    rule schema: FilterType "Sql" with a nested SqlFilter)."""
    expected = messaging()
    servicebus = parse_bicep(INFRA / "app" / "servicebus.bicep")
    bicep_filter = servicebus["variables"]["orderEventsFilter"]["value"]
    (topic,) = _namespace()["Topics"]
    subscriptions = {subscription["Name"]: subscription for subscription in topic["Subscriptions"]}
    for name in (expected["inventorySubscriptionName"], expected["paymentsSubscriptionName"]):
        subscription = subscriptions[name]
        props = subscription["Properties"]
        assert props["LockDuration"] == expected["lockDuration"]
        assert props["MaxDeliveryCount"] == expected["maxDeliveryCount"]
        assert props["DeadLetteringOnMessageExpiration"] is True
        assert props["RequiresSession"] is False
        assert iso_duration(props["DefaultMessageTimeToLive"]) == _clamped(
            expected["defaultMessageTimeToLive"], EMULATOR_MAX_TTL
        )
        assert subscription["Rules"] == [
            {
                "Name": "$Default",
                "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": bicep_filter}},
            }
        ]
