"""Target 4's second figure, the child's side: ``python -m bench.first_message <side> <order>``
runs in a fresh interpreter (started by ``bench.coldstart.first_message``) and takes one function
app from nothing to its first message settled, through Microsoft's worker, as a new worker process
does: the worker's init (which imports the app's script), its metadata (indexing) and the loads,
then one invocation of the Service Bus-triggered function for one new order on the peek-lock
queue, settled over gRPC by the function itself. It prints one JSON line the moment the message is
settled, then closes what it opened.

``side`` is ``consumer`` (the product's ``function_app.py`` in the repository root, composed from
the app settings in the environment on its first message, as in Azure) or ``floor`` (the platform
floor of target 3, ``bench/floor_alone_app.py``: the floor's blueprint alone in an app, writing
the documents the consumer would write, given in ``<order>``'s JSON, through a Cosmos client of
its own built on the same path). ``<order>`` is a JSON file the parent wrote: the message id, the
body and the floor's documents.

What it times: the process's CPU time (``time.process_time``, every thread: the worker's pool
and the settlement server's included) at three points, the harness ready (the interpreter, the
worker runtime and the stand-in host's modules loaded, the settlement server listening), the
worker started (app imported, indexed, loaded) and the message settled; the wall time of the
whole is the parent's (spawn to this line). The stand-in host's modules load before the first
point on both sides alike, and the kit (``idempotent_consumer``) with them (the broker model and
the host read its clock and host.json reader): the phases after that point hold the app's import,
the worker's indexing and the first message, the total holds everything from a fresh interpreter.

It must import nothing of the app before the worker does (``shared`` stays out of
``sys.modules`` until the worker's init), and it is never imported by other code.
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from local.standins.broker import OutgoingMessage, PeekLockQueue, QueueSettings
from local.standins.host import LocalFunctionsHost
from local.standins.settlement_server import SettlementServer, bind_message_actions
from local.standins.worker import FunctionsWorker

REPO_ROOT = Path(__file__).resolve().parent.parent
# (app directory, script, Service Bus-triggered function) of each side.
SIDES = {
    "consumer": (REPO_ROOT, "function_app.py", "consume_order"),
    "floor": (REPO_ROOT / "bench", "floor_alone_app.py", "platform_floor"),
}
SCRIPT_SETTING = "PYTHON_SCRIPT_FILE_NAME"  # the runtime reads it from the environment


async def _floor_ready(order: dict[str, Any]) -> Any:
    """The floor's Cosmos client and its documents for the message, on the timed path as the
    consumer's composition is on its own (a client built, its first request)."""
    from azure.cosmos.aio import CosmosClient

    from bench import floor_app  # the worker's import of it, already in sys.modules

    verify = os.environ["COSMOS_VERIFY_TLS"] == "true"
    client = CosmosClient(
        os.environ["COSMOS_ENDPOINT"],
        credential=os.environ["COSMOS_KEY"],
        connection_verify=verify,
    )
    container = client.get_database_client(os.environ["COSMOS_DATABASE"]).get_container_client(
        os.environ["COSMOS_CONTAINER"]
    )
    floor_app.expect(container, {order["message_id"]: order["documents"]})
    return client


async def first_message(side: str, order: dict[str, Any]) -> None:
    app_directory, script, function_name = SIDES[side]
    os.environ[SCRIPT_SETTING] = script
    queue = PeekLockQueue(QueueSettings.from_messaging_file())
    with SettlementServer(queue) as settlement:
        bind_message_actions(settlement.port)
        ready = time.process_time()
        worker = await FunctionsWorker.start(app_directory)
        started = time.process_time()
        floor_client = None
        try:
            floor_client = await _floor_ready(order) if side == "floor" else None
            host = LocalFunctionsHost(
                queue, worker, app_settings=dict(os.environ), function_name=function_name
            )
            queue.send(
                OutgoingMessage(
                    message_id=order["message_id"],
                    body=order["body"].encode("utf-8"),
                    correlation_id=f"corr-{order['message_id']}",
                )
            )
            await host.run_until_idle()
            settled = time.process_time()
            outcome = [(r.operation, r.ok) for r in queue.settlement_log]
            if host.stats.failed_invocations or outcome != [("complete", True)]:
                raise RuntimeError(f"{side}: {outcome}, {host.stats.errors}")
            print(
                json.dumps(
                    {
                        "side": side,
                        "cpu_s": settled,
                        "harness_cpu_s": ready,
                        "worker_start_cpu_s": started - ready,
                        "first_message_cpu_s": settled - started,
                        # The app's modules the worker loaded: none before its init.
                        "app_modules": sum(1 for m in sys.modules if m.startswith("shared.")),
                    }
                ),
                flush=True,
            )
        finally:
            worker.close()
            if floor_client is not None:
                await floor_client.close()
            elif "shared.bootstrap" in sys.modules:
                await sys.modules["shared.bootstrap"].close()


def main() -> None:
    if "shared" in sys.modules:
        raise RuntimeError("the harness imported the app before the worker")
    side, order_file = sys.argv[1], sys.argv[2]
    asyncio.run(first_message(side, json.loads(Path(order_file).read_text())))


if __name__ == "__main__":
    main()
