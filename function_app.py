"""Azure Functions entry point (Python v2 model). Wiring only: the logic lives in ``shared``."""

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from shared.bootstrap import (
    handle_completer_tick,
    handle_openapi_request,
    handle_order_message,
    handle_orders_request,
    handle_outbox_changes,
    handle_payment_message,
    handle_stock_message,
    handle_watchdog_tick,
)
from shared.triggers import (
    COMPLETER_SCHEDULE,
    RELAY_MAX_ITEMS_PER_INVOCATION,
    RUNTIME_RETRY,
    WATCHDOG_SCHEDULE,
)

app = func.FunctionApp()


@app.function_name("consume_order")
@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%ORDERS_QUEUE_NAME%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,  # this function settles every message itself, exactly once
)
async def consume_order(
    msg: servicebus.ServiceBusReceivedMessage,
    message_actions: servicebus.ServiceBusMessageActions,
) -> None:
    await handle_order_message(msg, message_actions)


@app.function_name("reserve_stock")
@app.service_bus_topic_trigger(
    arg_name="msg",
    topic_name="%ORDER_EVENTS_TOPIC_NAME%",
    subscription_name="%INVENTORY_SUBSCRIPTION_NAME%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,  # settled by the function, exactly once, like consume_order
)
async def reserve_stock(
    msg: servicebus.ServiceBusReceivedMessage,
    message_actions: servicebus.ServiceBusMessageActions,
) -> None:
    await handle_stock_message(msg, message_actions)


@app.function_name("capture_payment")
@app.service_bus_topic_trigger(
    arg_name="msg",
    topic_name="%ORDER_EVENTS_TOPIC_NAME%",
    subscription_name="%PAYMENTS_SUBSCRIPTION_NAME%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,  # settled by the function, exactly once, like consume_order
)
async def capture_payment(
    msg: servicebus.ServiceBusReceivedMessage,
    message_actions: servicebus.ServiceBusMessageActions,
) -> None:
    await handle_payment_message(msg, message_actions)


@app.function_name("relay_outbox")
@app.cosmos_db_trigger(
    arg_name="documents",
    connection="CosmosDBConnection",  # CosmosDBConnection__accountEndpoint: managed identity
    database_name="%COSMOS_DATABASE%",
    container_name="%COSMOS_CONTAINER%",
    lease_container_name="leases",
    create_lease_container_if_not_exists=False,  # Entra ID cannot create containers; Bicep does
    # With no leases yet (first deploy, recreated leases container) the trigger would start
    # "from now" and never publish an outbox document written before; from the beginning it
    # publishes every pending one (docs/relay.md, start position). The library's
    # annotation says time, its docstring "If True" (azure/functions/decorators/function_app.py,
    # cosmos_db_trigger) and the host's property is a boolean (startFromBeginning).
    start_from_beginning=True,  # type: ignore[arg-type]
    # Documents per invocation (the host's default is 100: learn.microsoft.com/azure/
    # azure-functions/functions-target-based-scaling). Each order brings three: the order, its
    # outbox event and the event's mark coming back as a change; 300 carry about 100 events,
    # which fit one topic send on Standard (a 256 KB batch) and share one feed read, one send and
    # one lease checkpoint where 100 would take three of each. A failed invocation re-sends at
    # most those ~100 (dropped as duplicates). make bench, target 6 (docs/capacity.md).
    max_items_per_invocation=RELAY_MAX_ITEMS_PER_INVOCATION,
)
# The trigger checkpoints its lease when an invocation returns, and by default does not re-run a
# failed batch ("Diagnose and troubleshoot issues with the Azure Functions trigger for Azure
# Cosmos DB", learn.microsoft.com/azure/cosmos-db/nosql/troubleshoot-changefeed-functions); a
# retry policy does, and holds the checkpoint until the retries end ("Azure Functions error
# handling and retries", learn.microsoft.com/azure/azure-functions/functions-bindings-error-pages:
# Cosmos DB supports function-level retry policies, -1 = retry indefinitely). Unbounded, so a
# failed batch is never checkpointed past; the relay parks what must not block
# (shared/relay/core.py).
@app.retry(
    strategy=RUNTIME_RETRY.strategy,
    max_retry_count=str(RUNTIME_RETRY.max_retry_count),
    minimum_interval=RUNTIME_RETRY.minimum_interval,
    maximum_interval=RUNTIME_RETRY.maximum_interval,
)
async def relay_outbox(documents: func.DocumentList, context: func.Context) -> None:
    await handle_outbox_changes(documents, context)


@app.function_name("outbox_watchdog")
# Publishes what the change feed did not (shared/relay/watchdog.py). The timer keeps its schedule
# and
# its one-instance lock in the host's storage (AzureWebJobsStorage) and does not retry a failed
# run: the next one does ("Timer trigger for Azure Functions",
# learn.microsoft.com/azure/azure-functions/functions-bindings-timer: useMonitor, Scale-out,
# Retry behavior).
@app.timer_trigger(
    arg_name="timer", schedule=WATCHDOG_SCHEDULE, run_on_startup=False, use_monitor=True
)
async def outbox_watchdog(timer: func.TimerRequest) -> None:
    await handle_watchdog_tick(timer)


# The orders API (shared/edge, docs/orders-api.md): each route a function-level key, its
# request handed to the edge as it came (shared/adapters/http_in.py translates).
@app.function_name("place_order")
@app.route(route="orders", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
async def place_order(req: func.HttpRequest) -> func.HttpResponse:
    return await handle_orders_request("place", req)


@app.function_name("amend_order")
@app.route(
    route="orders/{orderId}/amendments", methods=["POST"], auth_level=func.AuthLevel.FUNCTION
)
async def amend_order(req: func.HttpRequest) -> func.HttpResponse:
    return await handle_orders_request("amend", req)


@app.function_name("cancel_order")
@app.route(
    route="orders/{orderId}/cancellations", methods=["POST"], auth_level=func.AuthLevel.FUNCTION
)
async def cancel_order(req: func.HttpRequest) -> func.HttpResponse:
    return await handle_orders_request("cancel", req)


@app.function_name("get_order")
@app.route(route="orders/{orderId}", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
async def get_order(req: func.HttpRequest) -> func.HttpResponse:
    return await handle_orders_request("get", req)


# The API's OpenAPI document (shared/edge/openapi.json): read-only and without secrets, so it
# takes no key (tests/infra/test_orders_api_bicep.py forbids anonymous writes only); with App
# Service authentication on, it is behind Entra ID like every path.
@app.function_name("openapi")
@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def openapi(req: func.HttpRequest) -> func.HttpResponse:
    return handle_openapi_request()


@app.function_name("complete_requests")
# Sends the messages of orders API requests committed but never sent (their instance stopped,
# or the queue refused the send and the client never retried: shared/edge/completer.py). Every
# minute: an intent a client gave up on reaches the consumer within about two minutes, and a
# quiet run is one index-served query. One instance at a time, and a failed run is not retried:
# the next one is (learn.microsoft.com/azure/azure-functions/functions-bindings-timer:
# useMonitor, Scale-out, Retry behavior).
@app.timer_trigger(
    arg_name="timer", schedule=COMPLETER_SCHEDULE, run_on_startup=False, use_monitor=True
)
async def complete_requests(timer: func.TimerRequest) -> None:
    await handle_completer_tick(timer)
