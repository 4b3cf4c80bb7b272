"""The edge's queue sender (``shared.adapters.servicebus_out.ServiceBusOrderSender``) held at the
SDK's lowest boundary: a real ``azure.servicebus.aio.ServiceBusSender`` for the ``orders`` queue
over the fake AMQP link of ``tests.relay.amqp_link`` (the sender's own ``_open``, retries and
error mapping run). What a retry can fix is ``SendFailed`` (the edge answers 503 and keeps the
intent); what it cannot is raised as the SDK raised it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from azure.servicebus._pyamqp.error import ErrorCondition
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusError

from shared.adapters.servicebus_out import ServiceBusOrderSender
from shared.consumer.contract import ORDER_CANCELLED, ORDER_PLACED
from shared.edge import SendFailed
from tests.relay.amqp_link import CONNECTION_STRING, LinkNetwork

QUEUE = "orders"


def queue_sender_on(network: LinkNetwork, **client_options: Any) -> ServiceBusSender:
    """A real queue sender whose handler (the AMQP link) is ``network``'s."""
    client = ServiceBusClient.from_connection_string(CONNECTION_STRING, **client_options)
    sender = client.get_queue_sender(QUEUE)

    def create_handler(auth: Any) -> None:
        sender._handler = network.new_link()

    sender._create_handler = create_handler  # type: ignore[method-assign]
    return sender


async def test_a_sent_message_carries_its_message_id() -> None:
    network = LinkNetwork()
    sender = queue_sender_on(network)
    adapter = ServiceBusOrderSender(sender)

    await adapter.send("ord-1", ORDER_PLACED, b'{"orderId":"ord-1"}')
    await adapter.send("ord-1:v2", ORDER_CANCELLED, b'{"orderId":"ord-1"}')

    assert network.sent_ids == ["ord-1", "ord-1:v2"]
    await sender.close()


async def test_a_retryable_error_after_the_sdk_s_retries_is_send_failed() -> None:
    # Every send rejected with amqp:internal-error: the SDK marks it retryable and retries it
    # (retry_total 3: four attempts), then raises; the queue may take it later: SendFailed.
    network = LinkNetwork(reject_with=ErrorCondition.InternalError)
    sender = queue_sender_on(network, retry_backoff_factor=0.001)

    with pytest.raises(SendFailed) as failed:
        await ServiceBusOrderSender(sender).send("ord-2", ORDER_PLACED, b"{}")

    assert network.send_attempts == 4
    assert isinstance(failed.value.__cause__, ServiceBusError)
    await sender.close()


async def test_a_hung_link_is_bounded_and_send_failed() -> None:
    network = LinkNetwork(hang_send=True)
    sender = queue_sender_on(network)

    with pytest.raises(SendFailed):
        await asyncio.wait_for(
            ServiceBusOrderSender(sender, timeout_s=0.2).send("ord-3", ORDER_PLACED, b"{}"),
            timeout=10,
        )
    assert network.sent_ids == []


async def test_a_send_behind_a_hung_one_gives_up_within_the_lock_wait() -> None:
    network = LinkNetwork(hang_send=True)
    sender = queue_sender_on(network)
    adapter = ServiceBusOrderSender(sender, timeout_s=5, lock_wait_s=0.2)
    holder = asyncio.create_task(adapter.send("ord-4", ORDER_PLACED, b"{}"))
    await asyncio.sleep(0.05)

    with pytest.raises(SendFailed, match="busy"):
        await asyncio.wait_for(adapter.send("ord-5", ORDER_PLACED, b"{}"), timeout=3)

    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder


async def test_a_missing_queue_is_not_send_failed_but_the_sdk_s_error() -> None:
    """The queue gone (or the identity refused) is the system's fault: a retry in a second
    cannot fix it; raised as the SDK raised it (the HTTP layer answers 500, the host logs)."""
    network = LinkNetwork(reject_with=ErrorCondition.NotFound)
    sender = queue_sender_on(network, retry_backoff_factor=0.001)

    with pytest.raises(MessagingEntityNotFoundError):
        await ServiceBusOrderSender(sender).send("ord-6", ORDER_PLACED, b"{}")
    await sender.close()
