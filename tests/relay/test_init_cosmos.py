"""``python -m ops init-cosmos`` (the operator tool's; ``python -m local init-cosmos`` runs it too)
creates what both functions need: the orders container and the
relay trigger's ``leases`` container (partition key ``/id``), which the trigger never creates
(``createLeaseContainerIfNotExists`` is false)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from azure.cosmos.aio import CosmosClient

from local.assembly.world import CosmosAccount

REPO = Path(__file__).resolve().parents[2]


async def test_init_cosmos_creates_every_container_with_item_ttl_honoured(
    cosmos_account: CosmosAccount,
) -> None:
    assert cosmos_account.key is not None  # the local server or the emulator
    database = f"init-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "COSMOS_ENDPOINT": cosmos_account.endpoint,
        "COSMOS_KEY": cosmos_account.key,
        "COSMOS_VERIFY_TLS": "false",
        "COSMOS_DATABASE": database,
    }
    command = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ops",
        "init-cosmos",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(command.communicate(), timeout=120)
    assert command.returncode == 0, output.decode()

    async with CosmosClient(
        cosmos_account.endpoint, credential=cosmos_account.key, connection_verify=False
    ) as client:
        db = client.get_database_client(database)
        try:
            leases = await db.get_container_client("leases").read()
            orders = await db.get_container_client("orders").read()
            inventory = await db.get_container_client("inventory").read()
            payments = await db.get_container_client("payments").read()
            requests = await db.get_container_client("requests").read()
        finally:
            await client.delete_database(database)
    assert leases["partitionKey"]["paths"] == ["/id"]
    assert orders["partitionKey"]["paths"] == ["/orderId"]
    assert inventory["partitionKey"]["paths"] == ["/sku"]
    assert payments["partitionKey"]["paths"] == ["/orderId"]
    # Items' own ttl honoured (markers, released reservations), as the Bicep sets it.
    assert requests["partitionKey"]["paths"] == ["/orderId"]
    assert [c.get("defaultTtl") for c in (orders, inventory, payments, requests)] == [-1] * 4
