"""``python -m local``: the local stand-ins' command line.

- ``demo``: the whole flow offline (``make demo``), see ``local/scenarios/demo.py``;
- ``chaos``: the same with every failure mixed in, 10,000 messages by default (``make chaos``);
- ``send``: sample orders to a REAL Service Bus namespace or the Service Bus emulator, for people
  running ``func start``;
- ``init-cosmos``: create the database, the orders container (partition key ``/orderId``) and
  the relay trigger's ``leases`` container (partition key ``/id``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta

# gRPC core's own info lines (the settlement channel's GOAWAY when the demo's host stops) are
# noise on the demo's console; gRPC reads this when it is first imported: errors only, unless
# the user sets it.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from local.scenarios import demo  # after the line above

LEASES_CONTAINER = "leases"  # function_app.py's lease_container_name, infra's leasesContainerName


def _send(arguments: argparse.Namespace) -> int:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    queue = arguments.queue or os.environ.get("ORDERS_QUEUE_NAME", "orders")
    if arguments.namespace:
        from azure.identity import DefaultAzureCredential

        client = ServiceBusClient(arguments.namespace, credential=DefaultAzureCredential())
    else:
        # The Functions app setting name, case and all.
        connection = arguments.connection_string or os.environ.get("ServiceBusConnection", "")  # noqa: SIM112
        if not connection:
            print("give --namespace or --connection-string (or set ServiceBusConnection)")
            return 2
        client = ServiceBusClient.from_connection_string(connection)
    rng = random.Random(arguments.seed)
    placed = datetime.now(UTC).replace(microsecond=0)
    with client, client.get_queue_sender(queue) as sender:
        for index in range(arguments.count):
            order_id = f"ord-{arguments.seed}-{index:05d}"
            body = demo.order_document(rng, order_id, placed + timedelta(seconds=index))
            sender.send_messages(
                ServiceBusMessage(
                    json.dumps(body),
                    message_id=order_id,  # the idempotency key: MessageId = orderId
                    content_type="application/json",
                    correlation_id=f"send-{arguments.seed}",
                )
            )
            print(f"sent {order_id}")
    return 0


def _init_cosmos(arguments: argparse.Namespace) -> int:
    from azure.cosmos import PartitionKey
    from azure.cosmos.aio import CosmosClient

    from local.standins.cosmos_server import ensure_container
    from shared.adapters.cosmos_orders import create_client
    from shared.config import Settings
    from shared.consumer.errors import ConfigurationError

    try:
        settings = Settings.from_env({"ORDERS_QUEUE_NAME": "-", **os.environ})
    except ConfigurationError as error:
        print(f"invalid app setting {error}", file=sys.stderr)
        return 2

    async def create() -> None:
        client: CosmosClient = create_client(settings)
        async with client:
            await ensure_container(client, settings.cosmos_database, settings.cosmos_container)
            # The relay's trigger keeps its leases here; it never creates the container itself
            # (createLeaseContainerIfNotExists is false: Entra ID cannot create containers).
            database = client.get_database_client(settings.cosmos_database)
            await database.create_container_if_not_exists(
                LEASES_CONTAINER, partition_key=PartitionKey(path="/id")
            )

    asyncio.run(create())
    database = settings.cosmos_database
    print(f"{database}/{settings.cosmos_container} ready (partition key /orderId)")
    print(f"{database}/{LEASES_CONTAINER} ready (partition key /id)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo.add_arguments(commands.add_parser("demo", help="the whole flow offline"))
    demo.add_chaos_arguments(
        commands.add_parser("chaos", help="every failure mixed in, at volume (make chaos)")
    )
    send = commands.add_parser("send", help="send sample orders to a real Service Bus")
    send.add_argument("--count", type=int, default=10)
    send.add_argument("--seed", type=int, default=1)
    send.add_argument("--queue", help="default: $ORDERS_QUEUE_NAME or 'orders'")
    send.add_argument("--namespace", help="<name>.servicebus.windows.net (Entra ID auth)")
    send.add_argument("--connection-string", help="default: $ServiceBusConnection")
    commands.add_parser(
        "init-cosmos",
        help="create the database, the orders and the leases containers from app settings",
    )
    arguments = parser.parse_args(argv)
    if arguments.command in ("demo", "chaos"):
        return demo.main(arguments)
    if arguments.command == "send":
        return _send(arguments)
    return _init_cosmos(arguments)


if __name__ == "__main__":
    sys.exit(main())
