"""``python -m ops init-cosmos``: create what the functions need in a Cosmos DB account or
emulator, from the app settings (``COSMOS_ENDPOINT``, ``COSMOS_KEY``, ``COSMOS_DATABASE``,
``COSMOS_CONTAINER``, ``COSMOS_VERIFY_TLS``, ``INVENTORY_CONTAINER``, ``PAYMENTS_CONTAINER``,
``REQUESTS_CONTAINER``, as ``shared.config`` reads them): the database, the orders container
(partition key ``/orderId``, the indexing policy the Bicep deploys: infra/orders-indexing.json,
without which the watchdog's ordered query is refused), the stock reservation's ``inventory``
(``/sku``) and the payment capture's ``payments`` (``/orderId``), the orders API's ``requests``
(``/orderId``, its completer's fields indexed: infra/requests-indexing.json), each with
``defaultTtl`` -1 as the Bicep sets it, and the relay trigger's ``leases`` container
(partition key ``/id``), which the trigger never creates (``createLeaseContainerIfNotExists``
is false). Needs the account key: Entra ID data-plane roles
cannot create containers (in Azure, the Bicep creates them). Creates only what is missing; never
deletes or changes anything."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, TextIO

from idempotent_consumer import ConfigurationError

from shared.config import (
    INVENTORY_CONTAINER_SETTING,
    PAYMENTS_CONTAINER_SETTING,
    REQUESTS_CONTAINER_SETTING,
    Settings,
)

LEASES_CONTAINER = "leases"  # function_app.py's lease_container_name, infra's leasesContainerName
ORDERS_PARTITION_KEY = "/orderId"
LEASES_PARTITION_KEY = "/id"
# infra/app/cosmos.bicep loads the same file (loadJsonContent): one policy, here and in Azure.
INDEXING_FILE = Path(__file__).resolve().parent.parent / "infra" / "orders-indexing.json"
ORDERS_INDEXING_POLICY: dict[str, Any] = json.loads(INDEXING_FILE.read_text())
# The orders API's records: read by id, and by the request completer's one query (its fields
# only; infra/app/cosmos.bicep loads the same file).
REQUESTS_INDEXING_POLICY: dict[str, Any] = json.loads(
    (INDEXING_FILE.parent / "requests-indexing.json").read_text()
)


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
        # defaultTtl -1, as the Bicep (infra/app/cosmos.bicep): nothing expires by default, but
        # an item's own ttl is honoured (the inbox markers, the stock's released reservations).
        # Without it a container ignores every item's ttl (learn.microsoft.com/azure/cosmos-db/
        # nosql/time-to-live: "If the container's TTL is not set ... TTL on the item is ignored").
        containers = [
            (settings.cosmos_container, ORDERS_PARTITION_KEY, ORDERS_INDEXING_POLICY, -1),
            (_name(INVENTORY_CONTAINER_SETTING, "inventory"), "/sku", None, -1),
            (_name(PAYMENTS_CONTAINER_SETTING, "payments"), "/orderId", None, -1),
            (
                _name(REQUESTS_CONTAINER_SETTING, "requests"),
                "/orderId",
                REQUESTS_INDEXING_POLICY,
                -1,
            ),
            (LEASES_CONTAINER, LEASES_PARTITION_KEY, None, None),
        ]
        for container, partition_key, indexing, ttl in containers:
            options: dict[str, object] = {}
            if indexing is not None:
                options["indexing_policy"] = indexing
            if ttl is not None:
                options["default_ttl"] = ttl
            database.create_container_if_not_exists(
                container, partition_key=PartitionKey(path=partition_key), **options
            )
            print(
                f"{settings.cosmos_database}/{container} ready (partition key {partition_key})",
                file=out,
            )
    return 0


def _name(setting: str, default: str) -> str:
    return os.environ.get(setting, "").strip() or default
