"""Lifecycle fixtures: the relay's (the world's topic and change feed, the app composed)."""

from tests.relay.conftest import captured_relay, change_feed, relay, relay_cosmos_options, topic

__all__ = ["captured_relay", "change_feed", "relay", "relay_cosmos_options", "topic"]
