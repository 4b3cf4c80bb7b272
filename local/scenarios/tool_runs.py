"""``python -m ops`` over the demo's own data, one command at a time, as an operator runs it: a
fresh set of the tool's adapters per command, the same ones it builds in Azure. The dead-letter
queue through the tool's Service Bus adapter on the local broker
(``local.assembly.dead_letter_queue``, the real
SDK's receive-and-settle path), the topic's subscriptions through its ``ServiceBusEvents`` (peek),
the demo's container through its Cosmos DB adapters (``ops.cosmos``, the real SDK), and its
inventory container through ``ops.cosmos_inventory`` (``python -m ops stock``). Nothing
is confirmed: a ``purge`` without ``--yes`` removes nothing. Never reads the stand-in's state
any other way than the tool does."""

from __future__ import annotations

import io
import shlex
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from azure.cosmos import CosmosClient
from urllib3.exceptions import InsecureRequestWarning

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.assembly.world import CosmosAccount, World
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from local.standins.topic import RETAINED_SUBSCRIPTION, topic_name
from ops.cli import main as tool_main
from ops.cosmos import CosmosAuditReader, CosmosOrderLookup, CosmosOutboxDocuments
from ops.cosmos_inventory import CosmosInventory
from ops.servicebus import ServiceBusEvents


@dataclass(frozen=True)
class ToolRun:
    """One command: what the operator typed, its exit status and what it printed."""

    arguments: tuple[str, ...]
    exit_status: int
    output: str

    @property
    def command(self) -> str:
        return "python -m ops " + shlex.join(self.arguments)


def run_tool(
    arguments: Sequence[str], world: World, account: CosmosAccount, container_name: str
) -> ToolRun:
    settings = world.settings
    printed = io.StringIO()
    entities = [world.queue, *world.topic.subscriptions.values()]
    namespace = LocalNamespace({entity.settings.queue_name: entity for entity in entities})
    dead_letters = LocalDeadLetterQueue(world.queue, namespace)
    inventory_name = world.env.get("INVENTORY_CONTAINER") if world.subscription_hosts else None
    events = ServiceBusEvents(servicebus_client(namespace), topic_name())
    if not settings.cosmos_verify_tls:
        # The local server's self-signed certificate (or the emulator's, with --no-verify-tls):
        # unverified by choice. For the process: the sync SDK's endpoint health check sends
        # from a thread of its own (azure/cosmos/_global_endpoint_manager.py:244).
        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    try:
        with CosmosClient(
            account.endpoint,
            credential=account.key or default_credential_sync(),
            connection_verify=settings.cosmos_verify_tls,
        ) as client:
            database = client.get_database_client(settings.cosmos_database)
            container = database.get_container_client(container_name)
            inventory = (
                CosmosInventory(database.get_container_client(inventory_name))
                if inventory_name
                else None
            )
            status = tool_main(
                list(arguments),
                queue=dead_letters,
                orders=CosmosOrderLookup(container),
                outbox=CosmosOutboxDocuments(container),
                audit=CosmosAuditReader(container),
                events=events,
                inventory=inventory,
                clock=world.clock,
                confirm=lambda _prompt: False,
                out=printed,
            )
    finally:
        events.close()
        dead_letters.close()
    return ToolRun(tuple(arguments), status, printed.getvalue())


def default_credential_sync() -> Any:
    """Entra ID for a real account given without a key (the tool's sync client)."""
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def audit_arguments(started: datetime) -> list[str]:
    """``python -m ops audit`` over the demo's run, as an operator types it: since a minute
    before the run began by this machine's clock (the window is on Cosmos DB's ``_ts``, the
    server's clock: the minute absorbs a skew; the container is the demo's own, so nothing else
    falls in it), the ``retained`` subscription (downstream consumed its own copy), and no
    pending grace (the demo's relay is idle when it audits; a live one needs the default)."""
    since = (started - timedelta(minutes=1)).replace(microsecond=0).isoformat()
    return [
        "audit",
        "--since",
        since,
        "--subscription",
        RETAINED_SUBSCRIPTION,
        "--pending-grace",
        "0s",
    ]
