"""The relay function as the worker indexes it: a Cosmos DB trigger on the orders container with
the leases container, identity-based connection, and the unbounded exponential retry policy
(``shared.triggers.RUNTIME_RETRY``), which the change-feed emulation reads back from the worker's
metadata (tests/relay/test_relay.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from local.assembly.world import World
from shared.triggers import RELAY_MAX_ITEMS_PER_INVOCATION, RUNTIME_RETRY
from tests.infra.infra_support import parse_bicep

REPO = Path(__file__).resolve().parents[2]


def indexed_relay() -> dict[str, object]:
    # A fresh interpreter: ``app.get_functions()`` may run once per app (the suite's host did).
    probe = textwrap.dedent(
        """
        import json, function_app
        [f] = [f for f in function_app.app.get_functions()
               if f.get_function_name() == "relay_outbox"]
        print(json.dumps({"function": json.loads(f.get_function_json()),
                          "retry": f.get_settings_dict("retry_policy")}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    indexed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return indexed


def test_relay_is_a_change_feed_trigger_with_an_unbounded_exponential_retry() -> None:
    indexed = indexed_relay()
    function = indexed["function"]
    assert isinstance(function, dict)
    [binding] = function["bindings"]
    assert binding == {
        "direction": "IN",
        "type": "cosmosDBTrigger",
        "name": "documents",
        "connection": "CosmosDBConnection",
        "databaseName": "%COSMOS_DATABASE%",
        "containerName": "%COSMOS_CONTAINER%",
        "leaseContainerName": "leases",
        "createLeaseContainerIfNotExists": False,
        # With no leases yet, from the beginning: never "from now" (test_start_position.py).
        "startFromBeginning": True,
        # About 100 orders' documents per invocation (function_app.py says why).
        "maxItemsPerInvocation": 300,
    }
    assert indexed["retry"] == {
        "setting_name": "retry_policy",
        "strategy": "exponential_backoff",
        "max_retry_count": "-1",
        "minimum_interval": RUNTIME_RETRY.minimum_interval,
        "maximum_interval": RUNTIME_RETRY.maximum_interval,
    }


async def test_the_host_delivers_at_most_the_binding_s_max_items_per_invocation(
    world: World,
) -> None:
    # The stand-in host reads the binding (as the host does): batches of 300, not its own 100.
    assert world.change_feed.max_items == RELAY_MAX_ITEMS_PER_INVOCATION == 300


def test_the_trigger_s_lease_container_is_the_one_bicep_deploys() -> None:
    main = parse_bicep(REPO / "infra" / "main.bicep")
    params = main["modules"]["cosmos"]["config"]["params"]
    assert params["leasesContainerName"] == "leases"
