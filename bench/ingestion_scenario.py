"""The driving half of target 7 (``bench.ingestion``), run only in a fresh interpreter
(``python -m bench.ingestion_scenario <orders> <summary.json>``), because the Azure Monitor
distro configures the process's global providers once.

It configures the project's own exporters (``configure_exporters``, from the environment the
outer process sets: a connection string to the local ingestion endpoint and the trace sampler),
starts the one stand-in (``local.assembly.world.local_world``), composes the app on the global
providers, sends ``orders`` new orders and one invalid message through the host and Microsoft's
worker, relays every event through the change feed, flushes the providers and writes what it did.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from opentelemetry import _logs as logs
from opentelemetry import metrics, trace

from bench.orders import INVALID_BODY, outgoing
from local.assembly.world import app_settings, cosmos_account, local_world
from local.standins.broker import OutgoingMessage
from local.standins.cosmos_server import ensure_container
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings
from shared.telemetry.exporters import configure_exporters


async def drive(orders: int) -> dict[str, Any]:
    assert configure_exporters(os.environ) is True
    with cosmos_account() as account:
        container_name = f"ingestion-{uuid.uuid4().hex[:8]}"
        settings = Settings.from_env(app_settings(account, container=container_name))
        client = create_client(settings)
        try:
            await ensure_container(client, settings.cosmos_database, container_name)
            async with local_world(account=account, container=container_name) as world:
                world.compose()  # the consumer's and the relay's telemetry: the global providers
                for message in outgoing(f"ing-{uuid.uuid4().hex[:6]}", orders):
                    world.queue.send(message)
                world.queue.send(OutgoingMessage("invalid-1", INVALID_BODY))
                await world.host.run_until_idle()
                feed = await world.change_feed.drain()
                summary = {
                    "orders": orders,
                    "deliveries": world.queue.stats.deliveries,
                    "dead_letters": len(world.queue.dead_letters),
                    "published": world.topic.stats.accepted,
                    "relay_invocations": feed.invocations,
                }
        finally:
            await client.close()
    providers: list[Any] = [
        trace.get_tracer_provider(),
        metrics.get_meter_provider(),
        logs.get_logger_provider(),
    ]
    for provider in providers:  # the SDK's providers, set by the distro
        assert provider.force_flush(30_000) is not False
    return summary


def main(argv: list[str]) -> int:
    orders, path = int(argv[0]), Path(argv[1])
    logging.getLogger().setLevel(logging.ERROR)  # the stand-ins' chatter; ours is exported
    # INFO records on, as tests/telemetry/envelope_scenario.py has them; the exporter's filter
    # then decides (shared.telemetry.exporters.ExportedLogRecords).
    logging.getLogger("orders").setLevel(logging.INFO)
    path.write_text(json.dumps(asyncio.run(drive(orders))), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
