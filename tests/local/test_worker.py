"""The local host speaks to Microsoft's worker (``azure_functions_runtime``) as the Functions host
does: what the worker refuses fails the start loudly with the worker's own error, a function's
exception comes back as a failed invocation that the host logs and that settles nothing, and any
indexed function can be invoked by name with typed input data (a Cosmos DB trigger's document
list as ``json``)."""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pytest

from local.assembly.world import CosmosAccount, local_world
from local.standins.broker import PeekLockQueue
from local.standins.host import LocalFunctionsHost
from local.standins.worker import FunctionsWorker, Json, WorkerStartError
from tests.orders import message, order_body
from tests.state import settlements

TRACEPARENT = f"00-{'1' * 32}-{'2' * 16}-01"
SERVICE_BUS_TRIGGER = """
@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%ORDERS_QUEUE_NAME%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
"""


def write_app(directory: Path, *parts: str) -> Path:
    """A throwaway app directory whose function_app.py is ``parts`` after the usual imports."""
    script = "import azure.functions as func\n"
    script += "import azurefunctions.extensions.bindings.servicebus as servicebus\n\n"
    script += "app = func.FunctionApp()\n" + "".join(textwrap.dedent(part) for part in parts)
    (directory / "function_app.py").write_text(script)
    return directory


async def test_the_worker_indexes_the_app_from_its_own_metadata() -> None:
    worker = await FunctionsWorker.start()
    try:
        consume = worker.functions["consume_order"]
    finally:
        worker.close()

    # The runtime's raw bindings, as the host reads them (not app.get_functions()).
    assert consume.trigger["type"] == "serviceBusTrigger"
    assert consume.trigger["queueName"] == "%ORDERS_QUEUE_NAME%"
    assert consume.trigger["connection"] == "ServiceBusConnection"
    assert consume.trigger["autoCompleteMessages"] is False
    assert consume.trigger["properties"] == {"SupportsDeferredBinding": True}  # SDK-type binding


async def test_a_signature_the_worker_refuses_fails_the_start_with_the_workers_error(
    tmp_path: Path, cosmos_account: CosmosAccount
) -> None:
    # ServiceBusMessageActions is injected by its annotation: without it the worker cannot bind
    # the parameter and refuses the function when it indexes the app.
    app = write_app(
        tmp_path,
        SERVICE_BUS_TRIGGER,
        """
        async def consume_order(msg: servicebus.ServiceBusReceivedMessage, message_actions):
            pass
        """,
    )

    with pytest.raises(WorkerStartError) as refused:
        async with local_world(account=cosmos_account, app_directory=app):
            pass  # pragma: no cover - the world must not start

    assert str(refused.value).startswith("worker init failed: FunctionLoadError: ")
    assert "cannot load the consume_order function" in str(refused.value)
    assert "{'message_actions'}" in str(refused.value)


async def test_an_exception_in_the_function_is_a_failed_invocation_that_settles_nothing(
    tmp_path: Path, cosmos_account: CosmosAccount, caplog: pytest.LogCaptureFixture
) -> None:
    app = write_app(
        tmp_path,
        SERVICE_BUS_TRIGGER,
        """
        async def consume_order(
            msg: servicebus.ServiceBusReceivedMessage,
            message_actions: servicebus.ServiceBusMessageActions,
        ) -> None:
            raise ValueError(f"refusing {msg.message_id}")
        """,
    )
    async with local_world(account=cosmos_account, app_directory=app) as world:
        host: LocalFunctionsHost = world.host
        queue: PeekLockQueue = world.queue
        queue.send(message(order_body()))
        delivery = queue.receive(1)[0]

        result = await host.invoke(delivery)

    assert not result.succeeded
    assert result.error == "ValueError: refusing ord-1001"  # decoded by the worker first
    assert host.stats.failed_invocations == 1
    assert host.stats.errors == ["ValueError: refusing ord-1001"]
    assert settlements(queue) == []  # autoCompleteMessages false: the lock will just lapse
    assert queue.active_count() == 1
    [logged] = [r for r in caplog.records if r.name == "local.standins.host"]
    assert logged.levelno == logging.ERROR
    assert "Executed 'Functions.consume_order' (Failed" in logged.getMessage()


async def test_the_trigger_metadata_is_what_the_classic_binding_reads(
    tmp_path: Path, cosmos_account: CosmosAccount
) -> None:
    # func.ServiceBusMessage (no SDK type) gets the body as trigger data and is built by
    # azure-functions from the trigger metadata: it reads back each name and type the host sent.
    app = write_app(
        tmp_path,
        """
        import json
        from pathlib import Path
        """,
        SERVICE_BUS_TRIGGER,
        """
        def consume_order(msg: func.ServiceBusMessage) -> None:
            seen = {
                "body": msg.get_body().decode(),
                "message_id": msg.message_id,
                "delivery_count": msg.delivery_count,
                "correlation_id": msg.correlation_id,
                "enqueued_time_utc": msg.enqueued_time_utc.isoformat(),
                "application_properties": msg.application_properties,
            }
            Path(__file__).with_name("seen.json").write_text(json.dumps(seen))
        """,
    )
    async with local_world(account=cosmos_account, app_directory=app) as world:
        world.queue.send(message(b"{}", traceparent=TRACEPARENT))
        [delivery] = world.queue.receive(1)

        result = await world.host.invoke(delivery)

    assert result.succeeded, result.error
    assert not world.host.deferred_binding
    assert json.loads((tmp_path / "seen.json").read_text()) == {
        "body": "{}",
        "message_id": "ord-1001",
        "delivery_count": 1,
        "correlation_id": "corr-1",
        "enqueued_time_utc": delivery.enqueued_time.isoformat(),
        "application_properties": {"traceparent": TRACEPARENT},
    }


async def test_any_function_is_invoked_by_name_with_typed_input_data(tmp_path: Path) -> None:
    # A Cosmos DB change-feed trigger gets its document list as json, as the host sends it; the
    # invocation's trace context and retry context reach the function's Context.
    app = write_app(
        tmp_path,
        """
        import json
        from pathlib import Path

        @app.cosmos_db_trigger(
            arg_name="documents",
            connection="CosmosConnection",
            database_name="orders",
            container_name="orders",
            lease_container_name="leases",
        )
        def relay(documents: func.DocumentList, context: func.Context) -> None:
            seen = {
                "ids": [document["id"] for document in documents],
                "trace_parent": context.trace_context.trace_parent,
                "retry_count": context.retry_context.retry_count,
            }
            Path(__file__).with_name("seen.json").write_text(json.dumps(seen))
        """,
    )
    worker = await FunctionsWorker.start(app)
    try:
        assert worker.functions["relay"].trigger["type"] == "cosmosDBTrigger"
        result = await worker.invoke(
            "relay", {"documents": Json([{"id": "ord-1:OrderAccepted"}, {"id": "ord-2"}])}
        )
    finally:
        worker.close()

    assert result.succeeded, result.error
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen == {
        "ids": ["ord-1:OrderAccepted", "ord-2"],
        "trace_parent": result.trace_parent,
        "retry_count": 0,
    }
