"""Azure Functions entry point (Python v2 model). Wiring only: the logic lives in ``shared``."""

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from shared.runtime import handle_order_message

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
