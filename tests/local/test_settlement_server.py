"""The real ServiceBusMessageActions client, talking gRPC to the local settlement server.

Messages are built the way the Functions host hands them to the worker (lock token bytes,
marker, AMQP-encoded message) and decoded by the extension's own converter, so the lock
token the client sends is the one the broker issued.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc
import pytest
import uamqp
from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.base import Datum
from azurefunctions.extensions.bindings.protos import (
    settlement_pb2,
    settlement_pb2_grpc,
)
from azurefunctions.extensions.bindings.servicebus import (
    ServiceBusConverter,
    ServiceBusMessageActions,
)
from azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions import (
    SettlementError,
)

from local.standins.broker import (
    Delivery,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
    QueueSettings,
)
from local.standins.settlement_server import (
    SettlementServer,
    bind_message_actions,
    worker_arguments_restored,
    worker_argv,
)

LOCK = timedelta(seconds=30)


@dataclass
class _ModelBindingData:
    version: str
    source: str
    content_type: str
    content: bytes


def host_message(delivery: Delivery) -> ServiceBusReceivedMessage:
    """Encode a delivery as the host's model binding data and decode it like the worker."""
    message = delivery.message
    amqp_bytes = uamqp.Message(
        body=message.body,
        properties=uamqp.message.MessageProperties(
            message_id=message.message_id,
            correlation_id=message.correlation_id,
            content_type=message.content_type,
        ),
        application_properties=dict(message.application_properties),
        header=uamqp.message.MessageHeader(),
    ).encode_message()
    content = delivery.lock_token.bytes_le + b"x-opt-lock-token" + amqp_bytes
    mbd = _ModelBindingData(
        "1.0", "AzureServiceBusReceivedMessage", "application/octet-stream", content
    )
    decoded = ServiceBusConverter.decode(
        Datum(value=mbd, type="model_binding_data"), trigger_metadata=None, pytype=None
    )
    assert isinstance(decoded, ServiceBusReceivedMessage)
    return decoded


@dataclass
class Harness:
    queue: PeekLockQueue
    clock: ManualClock
    server: SettlementServer
    actions: ServiceBusMessageActions

    def deliver(self, message_id: str = "order-1") -> tuple[Delivery, ServiceBusReceivedMessage]:
        self.queue.send(OutgoingMessage(message_id, b'{"orderId": "1"}', correlation_id="c-1"))
        [delivery] = self.queue.receive()
        return delivery, host_message(delivery)


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    # bind_message_actions rewrites sys.argv and the client singleton; undo both afterwards.
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(ServiceBusMessageActions, "_instance", None)
    clock = ManualClock()
    queue = PeekLockQueue(QueueSettings(LOCK, 3, timedelta(minutes=10), "orders"), clock)
    with SettlementServer(queue) as server:
        yield Harness(queue, clock, server, bind_message_actions(server.port))


def grpc_code(error: SettlementError) -> Any:
    assert isinstance(error.original, grpc.RpcError)
    return error.original.code()


def test_host_encoding_round_trips_the_lock_token_and_message(harness: Harness) -> None:
    delivery, received = harness.deliver()

    assert received.lock_token == delivery.lock_token
    assert received.message_id == "order-1"
    assert received.correlation_id == "c-1"
    assert b"".join(received.body) == b'{"orderId": "1"}'


def test_bind_message_actions_points_the_client_at_the_server(harness: Harness) -> None:
    assert sys.argv[-len(worker_argv(harness.server.port)) :] == worker_argv(harness.server.port)
    assert ServiceBusMessageActions.get_instance() is harness.actions
    assert harness.server.address == f"127.0.0.1:{harness.server.port}"


def test_rebinding_replaces_the_previous_worker_args(harness: Harness) -> None:
    bind_message_actions(1)
    actions = bind_message_actions(harness.server.port)

    assert sys.argv.count("--port") == 1
    assert actions is not harness.actions
    assert actions is ServiceBusMessageActions.get_instance()


def test_worker_arguments_are_restored_after_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["worker", "--port", "7071", "--keep"])
    monkeypatch.setattr(ServiceBusMessageActions, "_instance", None)
    before = list(sys.argv)

    with worker_arguments_restored():
        bind_message_actions(1)
        assert sys.argv[-len(worker_argv(1)) :] == worker_argv(1)

    assert sys.argv == before


def test_complete_removes_the_message(harness: Harness) -> None:
    _, received = harness.deliver()
    harness.actions.complete(received)

    assert harness.queue.is_idle()
    assert harness.queue.stats.completed == 1


def test_deadletter_carries_reason_and_description(harness: Harness) -> None:
    _, received = harness.deliver()
    harness.actions.deadletter(
        received,
        deadletter_reason="SchemaValidationFailed",
        deadletter_error_description="amount must be positive",
    )

    [dead] = harness.queue.dead_letters
    assert dead.reason == "SchemaValidationFailed"
    assert dead.description == "amount must be positive"
    assert dead.message.message_id == "order-1"
    assert harness.queue.is_idle()


def test_deadletter_without_description(harness: Harness) -> None:
    _, received = harness.deliver()
    harness.actions.deadletter(received, deadletter_reason="Poison")

    [dead] = harness.queue.dead_letters
    assert (dead.reason, dead.description) == ("Poison", None)


def test_abandon_redelivers_with_incremented_count(harness: Harness) -> None:
    first, received = harness.deliver()
    harness.actions.abandon(received)

    [second] = harness.queue.receive()
    assert second.delivery_count == first.delivery_count + 1
    assert second.lock_token != first.lock_token


def test_stale_token_makes_the_client_raise_and_the_message_stays(harness: Harness) -> None:
    _, stale = harness.deliver()
    harness.clock.advance(LOCK)
    [redelivery] = harness.queue.receive()

    with pytest.raises(SettlementError) as caught:
        harness.actions.complete(stale)
    assert grpc_code(caught.value) == grpc.StatusCode.FAILED_PRECONDITION
    assert "MessageLockLost" in caught.value.original.details()
    assert harness.queue.active_count() == 1

    harness.actions.complete(host_message(redelivery))
    assert harness.queue.is_idle()


def test_double_complete_raises(harness: Harness) -> None:
    _, received = harness.deliver()
    harness.actions.complete(received)

    with pytest.raises(SettlementError) as caught:
        harness.actions.complete(received)
    assert grpc_code(caught.value) == grpc.StatusCode.FAILED_PRECONDITION


def test_renew_keeps_the_lock_past_its_original_expiry(harness: Harness) -> None:
    _, received = harness.deliver()
    harness.clock.advance(LOCK / 2)
    harness.actions.renew_message_lock(received)
    harness.clock.advance(LOCK / 2)

    assert harness.queue.receive() == []
    harness.actions.complete(received)
    assert harness.queue.is_idle()


def test_defer_is_unimplemented(harness: Harness) -> None:
    _, received = harness.deliver()
    with pytest.raises(SettlementError) as caught:
        harness.actions.defer(received)
    assert grpc_code(caught.value) == grpc.StatusCode.UNIMPLEMENTED
    assert harness.queue.active_count() == 1


def test_sessions_are_unimplemented(harness: Harness) -> None:
    with pytest.raises(SettlementError) as caught:
        harness.actions.release_session("s-1")
    assert grpc_code(caught.value) == grpc.StatusCode.UNIMPLEMENTED


def test_malformed_lock_token_is_invalid_argument(harness: Harness) -> None:
    with grpc.insecure_channel(harness.server.address) as channel:
        stub = settlement_pb2_grpc.SettlementStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Complete(settlement_pb2.CompleteRequest(locktoken="not-a-uuid"))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_token_is_failed_precondition(harness: Harness) -> None:
    harness.deliver()
    with grpc.insecure_channel(harness.server.address) as channel:
        stub = settlement_pb2_grpc.SettlementStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Complete(settlement_pb2.CompleteRequest(locktoken=str(uuid.uuid4())))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert harness.queue.active_count() == 1


def test_property_modification_is_rejected_rather_than_ignored(harness: Harness) -> None:
    delivery, _ = harness.deliver()
    with grpc.insecure_channel(harness.server.address) as channel:
        stub = settlement_pb2_grpc.SettlementStub(channel)
        request = settlement_pb2.AbandonRequest(
            locktoken=str(delivery.lock_token), propertiesToModify=b"\x00"
        )
        with pytest.raises(grpc.RpcError) as caught:
            stub.Abandon(request)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert harness.queue.stats.abandoned == 0


def test_concurrent_settlement_from_many_threads(harness: Harness) -> None:
    for i in range(40):
        harness.queue.send(OutgoingMessage(f"order-{i}", b"{}"))
    received = [host_message(d) for d in harness.queue.receive(max_count=40)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(harness.actions.complete, received))

    assert harness.queue.is_idle()
    assert harness.queue.stats.completed == 40
