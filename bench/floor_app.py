"""The platform floor of target 3: the least any function on this platform does per new order.

A Service Bus-triggered function with the very bindings of ``function_app.consume_order`` (the
extension's ``ServiceBusReceivedMessage`` and ``ServiceBusMessageActions``, autoComplete off), run
by the same worker and host as the consumer (``bench.bench_app`` registers this blueprint beside
``function_app``'s functions in one app). It writes the documents the consumer would write for
the message (prepared in advance and handed over by ``expect``) with the same request
(``write_documents``) and completes the message as the consumer settles
(``shared.adapters.servicebus_in.
Settler``: the pool sized from host.json's ``maxConcurrentCalls``, the same timeout). No
validation, no fingerprint, no conflict handling, no telemetry: what is left is what the platform
costs per message (decoding the host's bytes, one Cosmos write, one settlement over gRPC), so that
``consumer / floor`` is the share of the platform's throughput the consumer's own work leaves.

Not product code: it knows nothing but what it is given, and is correct for new orders only.
Its state (``expect``) lives in this importable module, so the bench and the function the worker
loaded share it.
"""

# No ``from __future__ import annotations``: the worker binds ServiceBusMessageActions by the
# parameter's annotation, which must be the class, not a string (as in function_app.py).
from collections.abc import Mapping, Sequence
from typing import Any

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from idempotent_consumer import Decision, Outcome
from idempotent_consumer.cosmos import OPERATION_TIMEOUT_S
from idempotent_consumer.servicebus import Settler

blueprint = func.Blueprint()  # type: ignore[no-untyped-call]
_expected: dict[str, Sequence[Mapping[str, Any]]] = {}
_target: list[Any] = []  # the container proxy to write to


def expect(
    container: Any, documents_by_message_id: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """Give the floor function its container and the documents of the messages it will get."""
    _target[:] = [container]
    _expected.clear()
    _expected.update(documents_by_message_id)


# Settled as the consumer settles: the same bounded pool (sized from host.json) and timeout.
_settler = Settler()
_COMPLETE = Decision(Outcome.PROCESSED)


async def write_documents(container: Any, documents: Sequence[Mapping[str, Any]]) -> None:
    """What the bare loop and the floor send per order: the consumer's request, without it."""
    if len(documents) == 1:
        await container.create_item(dict(documents[0]), timeout=OPERATION_TIMEOUT_S)
    else:
        await container.execute_item_batch(
            [("create", (dict(document),)) for document in documents],
            partition_key=documents[0]["orderId"],
            timeout=OPERATION_TIMEOUT_S,
        )


@blueprint.function_name("platform_floor")
@blueprint.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%ORDERS_QUEUE_NAME%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
async def platform_floor(
    msg: servicebus.ServiceBusReceivedMessage,
    message_actions: servicebus.ServiceBusMessageActions,
) -> None:
    # Read, not popped: the documents stay alive until the bench's next ``expect``, outside the
    # timed round. Freeing them here would hand the floor the collector's credit for objects
    # the bench built (each free lowers the count that triggers a collection), which the
    # consumer, freeing only what it built itself, never gets.
    documents = _expected[str(msg.message_id)]
    await write_documents(_target[0], documents)
    await _settler.settle(message_actions, msg, _COMPLETE)
