"""The relay's composition root: built from app settings without opening a connection, and a
bad configuration holds the batch (the invocation fails and is retried) instead of skipping it."""

from __future__ import annotations

import logging

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import ConfigurationError

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from shared import bootstrap
from shared.config import RelaySettings
from tests.relay.conftest import accept_order, new_order_ids
from tests.state import documents


async def test_the_production_relay_is_built_with_the_identity_based_sender(
    relay_env: dict[str, str],
) -> None:
    # No sender passed: the azure-servicebus one, on the namespace, with managed identity;
    # built without connecting, and closed with the runtime.
    composed = bootstrap.Runtime(bootstrap.Composition(relay_env))
    try:
        relay = await composed.relay()
        assert relay is await composed.relay()  # one per event loop
    finally:
        await composed.close()


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({}, "ORDER_EVENTS_TOPIC_NAME"),
        ({"ORDER_EVENTS_TOPIC_NAME": "t"}, "ServiceBusConnection__fullyQualifiedNamespace"),
        (
            {"ORDER_EVENTS_TOPIC_NAME": "t", "ServiceBusConnection__fullyQualifiedNamespace": "x"},
            "ServiceBusConnection__fullyQualifiedNamespace",
        ),
    ],
)
def test_an_invalid_relay_setting_fails_with_its_name(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RelaySettings.from_env(env)
    assert raised.value.setting == setting


async def test_a_bad_configuration_holds_the_batch_and_says_so_loudly(
    container: ContainerProxy,
    world: World,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    env = {k: v for k, v in world.env.items() if k != "ORDER_EVENTS_TOPIC_NAME"}
    world.compose(env=env)  # a setting is missing

    with caplog.at_level(logging.CRITICAL, logger="orders.relay"):
        stats = await change_feed.drain(max_attempts_per_batch=3)

    assert stats.stalled and stats.failed_invocations == 3
    assert change_feed.lease.continuation is None  # not checkpointed past
    assert any("ORDER_EVENTS_TOPIC_NAME" in r.getMessage() for r in caplog.records)
    [outbox] = [d for d in await documents(container) if d["type"] == "outbox"]
    assert outbox["status"] == "pending"
