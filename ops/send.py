"""``python -m ops send``: sample orders (``ops.sample_orders``) to a deployment's queue, for a
smoke test of a real namespace or the Service Bus emulator (``func start`` against it). Each
message has MessageId = orderId (the idempotency key), a JSON body and a correlation id naming
the run; the same seed sends the same orders again (duplicates, by design)."""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import UTC, datetime, timedelta
from typing import TextIO

from ops.sample_orders import random_order


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = commands.add_parser(
        "send", help="send sample orders to a real Service Bus (or its emulator)"
    )
    send.add_argument("--count", type=int, default=10)
    send.add_argument("--seed", type=int, default=1)
    # Given after ``send`` (as ``python -m local send`` took them); the tool's own --queue,
    # --namespace and --connection-string before it are the fallbacks.
    send.add_argument("--queue", dest="send_queue", help="default: $ORDERS_QUEUE_NAME or 'orders'")
    send.add_argument(
        "--namespace", dest="send_namespace", help="<name>.servicebus.windows.net (Entra ID auth)"
    )
    send.add_argument(
        "--connection-string", dest="send_connection_string", help="default: $ServiceBusConnection"
    )


def run(arguments: argparse.Namespace, out: TextIO) -> int:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    queue = arguments.send_queue or arguments.queue
    namespace = arguments.send_namespace or arguments.namespace
    if namespace:
        from azure.identity import DefaultAzureCredential

        client = ServiceBusClient(namespace, credential=DefaultAzureCredential())
    else:
        # The Functions app setting name, case and all.
        connection = (
            arguments.send_connection_string
            or arguments.connection_string
            or os.environ.get("ServiceBusConnection", "")  # noqa: SIM112
        )
        if not connection:
            print("give --namespace or --connection-string (or set ServiceBusConnection)", file=out)
            return 2
        client = ServiceBusClient.from_connection_string(connection)
    rng = random.Random(arguments.seed)
    placed = datetime.now(UTC).replace(microsecond=0)
    with client, client.get_queue_sender(queue) as sender:
        for index in range(arguments.count):
            order_id = f"ord-{arguments.seed}-{index:05d}"
            body = random_order(rng, order_id, placed + timedelta(seconds=index))
            sender.send_messages(
                ServiceBusMessage(
                    json.dumps(body),
                    message_id=order_id,  # the idempotency key: MessageId = orderId
                    content_type="application/json",
                    correlation_id=f"send-{arguments.seed}",
                )
            )
            print(f"sent {order_id}", file=out)
    return 0
