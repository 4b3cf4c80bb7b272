"""The Service Bus adapter of the relay's ``EventPublisher`` port (azure-servicebus aio).

Owns: turning an ``OutboundEvent`` into a ``ServiceBusMessage`` (MessageId = eventId, content
type, subject, correlation id, application properties), packing the events of one invocation
into as few ``ServiceBusMessageBatch`` sends as their size allows, and translating the SDK's
errors into ``shared.relay``'s classes. Never decides what to retry or park (``shared.relay``).

One ``ServiceBusClient`` and one topic sender per worker process (``shared.runtime``), identity
based (``DefaultAzureCredential``; ``AZURE_CLIENT_ID`` selects the user-assigned identity), on the
namespace the queue trigger uses (``ServiceBusConnection__fullyQualifiedNamespace``); a
connection string (``ServiceBusConnection``) only for emulators.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from azure.core.exceptions import ClientAuthenticationError
from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
)

from shared.relay import (
    EventRejected,
    OutboundEvent,
    PublishMisconfigured,
    PublishUnavailable,
)


class MessageBatchSender(Protocol):
    """What the adapter needs of ``azure.servicebus.aio.ServiceBusSender`` (the network
    boundary: the local topic model implements it too)."""

    async def create_message_batch(
        self, max_size_in_bytes: int | None = None
    ) -> ServiceBusMessageBatch: ...

    async def send_messages(self, message: Any, **kwargs: Any) -> None: ...


def to_service_bus_message(event: OutboundEvent) -> ServiceBusMessage:
    properties: dict[str | bytes, int | float | bytes | bool | str | uuid.UUID] = {}
    for name, value in event.application_properties.items():
        properties[name] = value
    return ServiceBusMessage(
        event.body,
        message_id=event.event_id,
        content_type=event.content_type,
        subject=event.subject,
        correlation_id=event.correlation_id,
        application_properties=properties,
    )


class ServiceBusEventPublisher:
    def __init__(self, sender: MessageBatchSender) -> None:
        self._sender = sender

    async def publish(self, events: Sequence[OutboundEvent]) -> list[BaseException | None]:
        results: list[BaseException | None] = [None] * len(events)
        batch: ServiceBusMessageBatch | None = None
        members: list[int] = []
        for index, event in enumerate(events):
            message = to_service_bus_message(event)
            if batch is not None:
                try:
                    batch.add_message(message)
                    members.append(index)
                    continue
                except MessageSizeExceededError:  # full: send it, start another
                    await self._send(batch, members, results)
                    batch, members = None, []
            try:
                batch = await self._sender.create_message_batch()
            except Exception as error:  # noqa: BLE001 - reported per event
                translated = translate(error)
                for rest in range(index, len(events)):
                    results[rest] = translated
                return results
            try:
                batch.add_message(message)
                members.append(index)
            except MessageSizeExceededError as error:  # alone, it exceeds the entity's limit
                results[index] = EventRejected(f"message of {len(event.body)} bytes: {error}")
        if batch is not None and members:
            await self._send(batch, members, results)
        return results

    async def _send(
        self,
        batch: ServiceBusMessageBatch,
        members: list[int],
        results: list[BaseException | None],
    ) -> None:
        try:
            await self._sender.send_messages(batch)
        except Exception as error:  # noqa: BLE001 - reported per event
            translated = translate(error)
            for index in members:
                results[index] = translated


def translate(error: Exception) -> BaseException:
    """The SDK's error as ``shared.relay`` classifies it (the original is the cause)."""
    translated: BaseException
    if isinstance(error, MessageSizeExceededError):
        translated = EventRejected(str(error))
    elif isinstance(
        error,
        ServiceBusAuthenticationError
        | ServiceBusAuthorizationError
        | ClientAuthenticationError
        | MessagingEntityNotFoundError
        | MessagingEntityDisabledError
        | ServiceBusQuotaExceededError,
    ):
        translated = PublishMisconfigured(f"{type(error).__name__}: {error}")
    elif isinstance(
        error,
        OperationTimeoutError
        | ServiceBusConnectionError
        | ServiceBusCommunicationError
        | ServiceBusServerBusyError
        | TimeoutError
        | ConnectionError,
    ):
        translated = PublishUnavailable(f"{type(error).__name__}: {error}")
    else:
        return error
    translated.__cause__ = error
    return translated
