"""Run in a fresh venv by ``tests/kit/test_fresh_app.py``: a user's one-file function app (the
units-sold consumer bound with ``bind_consumer``) driven through Microsoft's worker
(``azure_functions_runtime``, in this process) by the local host's Service Bus trigger on a
subscription, against the Cosmos account the app settings name. Prints what it saw as JSON.

Scenarios, in order: redeliveries (a sale, another, the first again), five concurrent deliveries
of one message, and a delivery stopped between two partitions (every request of its second SKU's
partition fails at the connection, below the real SDK) then redelivered.

The stand-in queue runs on a manual clock set in the past: the app (on the system clock) sees
each lock already at its end, so it retries nothing within a delivery and a failed delivery is
abandoned at once and redelivered, as a worker stopped mid-delivery would be.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
from azure.cosmos.aio import CosmosClient

from local.standins.broker import (
    Delivery,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
)
from local.standins.host import LocalFunctionsHost
from local.standins.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
)
from local.standins.topic import subscription_path
from local.standins.worker import FunctionsWorker

TOPIC = "order-events"
SUBSCRIPTION = "units-sold"
STOPPED_PARTITION = '["SKU-B2"]'  # the partition key header of the stopped delivery's 2nd SKU


def sale(event_id: str, order_id: str, lines: list[tuple[str, int]]) -> OutgoingMessage:
    payload = {
        "orderId": order_id,
        "placedAt": "2026-11-30T08:00:00Z",
        "lines": [{"sku": sku, "quantity": quantity} for sku, quantity in lines],
    }
    body = json.dumps({"eventType": "OrderAccepted", "payload": payload}).encode()
    return OutgoingMessage(event_id, body, subject="OrderAccepted")


async def units_of(prefix: str) -> dict[str, int]:
    """The day's counters of the SKUs starting with ``prefix``, read with a client of our own."""
    async with CosmosClient(
        os.environ["COSMOS_ENDPOINT"], credential=os.environ["COSMOS_KEY"], connection_verify=False
    ) as client:
        container = client.get_database_client(os.environ["COSMOS_DATABASE"]).get_container_client(
            os.environ["COSMOS_CONTAINER"]
        )
        query = "SELECT * FROM c WHERE STARTSWITH(c.sku, @prefix) AND IS_DEFINED(c.units)"
        parameters: list[dict[str, object]] = [{"name": "@prefix", "value": prefix}]
        return {
            item["sku"]: item["units"]
            async for item in container.query_items(query, parameters=parameters)
        }


def settled(queue: PeekLockQueue, since: int) -> list[str]:
    return [f"{r.operation}:{r.ok}" for r in queue.settlement_log[since:]]


async def main(app_directory: Path) -> dict[str, Any]:
    queue = PeekLockQueue(
        QueueSettings(
            lock_duration=timedelta(seconds=60),
            max_delivery_count=10,
            duplicate_detection_window=timedelta(0),  # a subscription detects no duplicates
            queue_name=subscription_path(TOPIC, SUBSCRIPTION),
        ),
        clock=ManualClock(datetime(2020, 1, 1, tzinfo=UTC)),
    )
    stop = {"armed": False, "refused": 0}
    request = aiohttp.ClientSession._request

    async def stopping_request(
        session: aiohttp.ClientSession, method: str, url: Any, **kwargs: Any
    ) -> Any:
        headers = kwargs.get("headers") or {}
        if stop["armed"] and headers.get("x-ms-documentdb-partitionkey") == STOPPED_PARTITION:
            stop["refused"] += 1
            raise aiohttp.ClientConnectionError("the worker stopped here")
        return await request(session, method, url, **kwargs)

    aiohttp.ClientSession._request = stopping_request  # type: ignore[method-assign,assignment]
    report: dict[str, Any] = {}
    with worker_arguments_restored(), SettlementServer(queue) as settlement:
        bind_message_actions(settlement.port)
        worker = await FunctionsWorker.start(app_directory)
        try:
            host = LocalFunctionsHost(
                queue, worker, app_settings=os.environ, max_concurrent_calls=8
            )
            report["functions"] = sorted(worker.functions)
            first = sale("event-1", "ord-1", [("SKU-A1", 2), ("SKU-A2", 1)])
            second = sale("event-2", "ord-2", [("SKU-A1", 3)])
            for message in (first, second, first):
                queue.send(message)
                await host.run_until_idle()
            report["redeliveries"] = settled(queue, 0)

            mark = len(queue.settlement_log)
            for _ in range(5):
                queue.send(second)
            await host.run_until_idle()
            report["concurrent"] = settled(queue, mark)

            mark = len(queue.settlement_log)

            async def stopped_first_time(
                delivery: Delivery, invoke: Callable[[], Awaitable[None]]
            ) -> None:
                stop["armed"] = delivery.delivery_count == 1
                await invoke()
                stop["armed"] = False
                if delivery.delivery_count == 1:
                    report["halfway"] = await units_of("SKU-B")

            host.max_concurrent_calls = 1
            queue.send(sale("event-3", "ord-3", [("SKU-B1", 2), ("SKU-B2", 4), ("SKU-B3", 1)]))
            await host.run_until_idle(on_delivery=stopped_first_time)
            report["stopped"] = settled(queue, mark)
            report["stop_refused_requests"] = stop["refused"]
            report["dead_letters"] = len(queue.dead_letters)
            report["failed_invocations"] = host.stats.errors
        finally:
            worker.close()
    import idempotent_consumer

    report["kit_file"] = idempotent_consumer.__file__
    report["shared_imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "shared")
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
