"""``python -m ops init-cosmos``: create what both functions need in a Cosmos DB account or
emulator, from the app settings (``COSMOS_ENDPOINT``, ``COSMOS_KEY``, ``COSMOS_DATABASE``,
``COSMOS_CONTAINER``, ``COSMOS_VERIFY_TLS``, as ``shared.config`` reads them): the database, the
orders container (partition key ``/orderId``, the indexing policy the Bicep deploys:
infra/orders-indexing.json, without which the watchdog's ordered query is refused) and the relay
trigger's ``leases`` container
(partition key ``/id``), which the trigger never creates (``createLeaseContainerIfNotExists`` is
false). Needs the account key: Entra ID data-plane roles cannot create containers (in Azure, the
Bicep creates them). Creates only what is missing; never deletes or changes anything."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, TextIO

from shared.config import Settings
from shared.kit.errors import ConfigurationError

LEASES_CONTAINER = "leases"  # function_app.py's lease_container_name, infra's leasesContainerName
ORDERS_PARTITION_KEY = "/orderId"
LEASES_PARTITION_KEY = "/id"
# infra/app/cosmos.bicep loads the same file (loadJsonContent): one policy, here and in Azure.
INDEXING_FILE = Path(__file__).resolve().parent.parent / "infra" / "orders-indexing.json"
ORDERS_INDEXING_POLICY: dict[str, Any] = json.loads(INDEXING_FILE.read_text())


def run(out: TextIO) -> int:
    from azure.cosmos import CosmosClient, PartitionKey

    try:
        settings = Settings.from_env({"ORDERS_QUEUE_NAME": "-", **os.environ})
    except ConfigurationError as error:
        print(f"invalid app setting {error}", file=sys.stderr)
        return 2
    if not settings.cosmos_key:
        print(
            "init-cosmos needs COSMOS_KEY: Entra ID roles cannot create containers "
            "(in Azure, azd up creates them)",
            file=sys.stderr,
        )
        return 2
    if not settings.cosmos_verify_tls:
        # COSMOS_VERIFY_TLS=false: an emulator's self-signed certificate, unverified by choice;
        # urllib3 would warn on every request of the sync SDK (requests) otherwise.
        from urllib3.exceptions import InsecureRequestWarning

        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    with CosmosClient(
        settings.cosmos_endpoint,
        credential=settings.cosmos_key,
        connection_verify=settings.cosmos_verify_tls,
    ) as client:
        database = client.create_database_if_not_exists(settings.cosmos_database)
        database.create_container_if_not_exists(
            settings.cosmos_container,
            partition_key=PartitionKey(path=ORDERS_PARTITION_KEY),
            indexing_policy=ORDERS_INDEXING_POLICY,
        )
        database.create_container_if_not_exists(
            LEASES_CONTAINER, partition_key=PartitionKey(path=LEASES_PARTITION_KEY)
        )
    name = settings.cosmos_database
    print(
        f"{name}/{settings.cosmos_container} ready (partition key {ORDERS_PARTITION_KEY})", file=out
    )
    print(f"{name}/{LEASES_CONTAINER} ready (partition key {LEASES_PARTITION_KEY})", file=out)
    return 0
