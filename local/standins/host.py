"""The Functions host's Service Bus trigger, on top of the peek-lock queue model, invoking the
function through Microsoft's worker (``local.standins.worker.FunctionsWorker`` over
``azure_functions_runtime``). One host per triggered entity: the orders queue, or a subscription
of the order-events topic (a subscription is a queue: ``local.standins.topic``).

It keeps only the host's side:
- finds the Service Bus-triggered function of its entity in the worker's metadata (its raw
  bindings): ``queueName``, or ``topicName`` and ``subscriptionName`` (the topic trigger's:
  azure/functions/decorators/servicebus.py, ``ServiceBusTopicTrigger``), each ``%SETTING%``
  resolved from the app settings; and checks ``autoCompleteMessages: false``;
- turns each delivery into one invocation request: the trigger as ``model_binding_data`` (source
  ``AzureServiceBusReceivedMessage``: lock token + ``x-opt-lock-token`` + AMQP bytes) when the
  worker declared the SDK-type binding (``SupportsDeferredBinding``), else the body; trigger
  metadata (MessageId, DeliveryCount, ...), a new trace context for the invocation, the retry
  context;
- runs up to ``maxConcurrentCalls`` (host.json) invocations at once;
- logs a failed invocation (the worker's own error) and, with ``autoCompleteMessages: false``,
  settles nothing: the lock expires and the message is redelivered.
Settlement reaches the queue through ``local.standins.settlement_server`` (the host's gRPC service),
which the worker's ``ServiceBusMessageActions`` calls by itself.

Not reproduced: automatic lock renewal while a function runs (locks only expire when the caller
advances the clock or expires one on purpose), prefetch, sessions, batch triggers, the host's
function timeout, and the worker's cancellation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from idempotent_consumer.servicebus import max_concurrent_calls as host_max_concurrent_calls

from local.standins.broker import Delivery, ManualClock, PeekLockQueue
from local.standins.host_binding import (
    ModelBindingData,
    encode_amqp,
    host_binding_bytes,
)
from local.standins.topic import subscription_path
from local.standins.worker import (
    FunctionsWorker,
    IndexedFunction,
    InvocationResult,
    Json,
    TypedValue,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
_SETTING_REFERENCE = re.compile(r"^%([^%]+)%$")
logger = logging.getLogger("local.standins.host")


def resolve_setting(value: str, app_settings: Mapping[str, str]) -> str:
    """A binding property as the host reads it: ``%NAME%`` is the app setting NAME."""
    match = _SETTING_REFERENCE.match(value)
    if match is None:
        return value
    name = match.group(1)
    if name not in app_settings:
        raise LookupError(f"app setting {name} (referenced as {value}) is not set")
    return app_settings[name]


def trigger_entity(trigger: Mapping[str, Any], app_settings: Mapping[str, str]) -> str:
    """The entity a Service Bus trigger reads: its queue, or ``<topic>/subscriptions/<sub>``."""
    if "queueName" in trigger:
        return resolve_setting(str(trigger["queueName"]), app_settings)
    return subscription_path(
        resolve_setting(str(trigger["topicName"]), app_settings),
        resolve_setting(str(trigger["subscriptionName"]), app_settings),
    )


def listening_function(
    worker: FunctionsWorker,
    entity: str,
    app_settings: Mapping[str, str],
    function_name: str | None = None,
) -> IndexedFunction:
    """The Service Bus-triggered function named ``function_name``, which must read ``entity``;
    or, unnamed, the one that reads it."""
    if function_name is not None:
        function = worker.triggered_function("serviceBusTrigger", function_name)
        listens_on = trigger_entity(function.trigger, app_settings)
        if listens_on != entity:
            raise LookupError(f"function listens on {listens_on!r}, the queue is {entity!r}")
        return function
    unresolved: list[str] = []
    for function in worker.functions.values():
        if function.trigger["type"] != "serviceBusTrigger":
            continue
        try:
            listens_on = trigger_entity(function.trigger, app_settings)
        except LookupError as error:
            unresolved.append(f"{function.name}: {error}")  # it reads no entity here
            continue
        if listens_on == entity:
            return function
    raise LookupError(
        f"no Service Bus-triggered function reads {entity!r}"
        + (f" ({'; '.join(unresolved)})" if unresolved else "")
    )


def delivery_binding_bytes(delivery: Delivery) -> bytes:
    """The host's side of an invocation: the delivery in the host's binding format."""
    message = delivery.message
    return host_binding_bytes(
        delivery.lock_token,
        encode_amqp(
            body=message.body,
            message_id=message.message_id,
            correlation_id=message.correlation_id,
            content_type=message.content_type,
            subject=message.subject,
            application_properties=dict(message.application_properties),
            delivery_count=delivery.delivery_count,
            enqueued_time=delivery.enqueued_time,
            sequence_number=delivery.sequence_number,
            locked_until=delivery.locked_until,
        ),
    )


def trigger_metadata(
    delivery: Delivery, function_name: str, now: datetime
) -> dict[str, TypedValue]:
    """The Service Bus trigger's binding data, under the host's names."""
    message = delivery.message
    metadata: dict[str, TypedValue] = {
        "DeliveryCount": Json(delivery.delivery_count),
        "SequenceNumber": Json(delivery.sequence_number),
        "EnqueuedTimeUtc": Json(delivery.enqueued_time.isoformat()),
        "LockedUntil": Json(delivery.locked_until.isoformat()),
        "LockToken": str(delivery.lock_token),
        "ApplicationProperties": Json(dict(message.application_properties)),
        "UserProperties": Json(dict(message.application_properties)),
        "sys": Json({"MethodName": function_name, "UtcNow": now.isoformat()}),
    }
    for name, value in (
        ("MessageId", message.message_id),
        ("CorrelationId", message.correlation_id),
        ("ContentType", message.content_type),
        ("Subject", message.subject),
    ):
        if value is not None:
            metadata[name] = value
    return metadata


@dataclass
class HostStats:
    invocations: int = 0
    failed_invocations: int = 0
    lock_expiry_waits: int = 0
    errors: list[str] = field(default_factory=list)  # the worker's messages of failed invocations
    last: InvocationResult | None = None


InvokeHook = Callable[[Delivery, Callable[[], Awaitable[None]]], Awaitable[None]]


class LocalFunctionsHost:
    """The host's Service Bus trigger for one function of a started worker, on one entity (a
    queue or a subscription): the function named ``function_name``, or the one that reads it."""

    def __init__(
        self,
        queue: PeekLockQueue,
        worker: FunctionsWorker,
        *,
        app_settings: Mapping[str, str] | None = None,
        function_name: str | None = None,
        max_concurrent_calls: int | None = None,
    ) -> None:
        self.queue = queue
        self.worker = worker
        settings = dict(os.environ if app_settings is None else app_settings)
        self.function = listening_function(
            worker, queue.settings.queue_name, settings, function_name
        )
        trigger = self.function.trigger
        self.trigger_name = str(trigger["name"])
        self.deferred_binding = bool(
            trigger.get("properties", {}).get("SupportsDeferredBinding", False)
        )
        if trigger.get("autoCompleteMessages", True):
            raise ValueError("this stand-in only models autoCompleteMessages: false")
        self.max_concurrent_calls = int(
            max_concurrent_calls or host_max_concurrent_calls(REPO_ROOT / "host.json")
        )
        self.stats = HostStats()

    async def invoke(self, delivery: Delivery) -> InvocationResult:
        """One invocation request for one delivery. A failed invocation is logged and recorded
        in ``stats``, and settles nothing."""
        name = self.function.name
        self.stats.invocations += 1
        result = await self.worker.invoke(
            name,
            {self.trigger_name: self._trigger_data(delivery)},
            trigger_metadata=trigger_metadata(delivery, name, self.queue.clock.now()),
        )
        self.stats.last = result
        if not result.succeeded:
            self.stats.failed_invocations += 1
            self.stats.errors.append(str(result.error))
            logger.error(
                "Executed 'Functions.%s' (Failed, Id=%s): %s",
                name,
                result.invocation_id,
                result.error,
            )
        return result

    def _trigger_data(self, delivery: Delivery) -> TypedValue:
        """An SDK-type binding (``ServiceBusReceivedMessage``) gets the whole message as
        ``model_binding_data``; the classic ``func.ServiceBusMessage`` gets the body, and reads
        the rest from the trigger metadata."""
        if self.deferred_binding:
            return ModelBindingData(content=delivery_binding_bytes(delivery))
        return delivery.message.body

    async def run_until_idle(
        self,
        *,
        on_delivery: InvokeHook | None = None,
        max_rounds: int = 1_000_000,
    ) -> HostStats:
        """Receive and invoke until the queue is empty.

        When nothing is available but some messages are still locked (an invocation crashed or
        its settlement failed), wait for the earliest lock expiry: by advancing a ``ManualClock``
        (no sleeping), or by sleeping until then on the system clock.
        ``on_delivery(delivery, invoke)`` lets a caller wrap an invocation (fault injection).
        """
        in_flight: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        available = asyncio.Event()

        def wake() -> None:  # called by the queue, possibly from a gRPC server thread
            loop.call_soon_threadsafe(available.set)

        async def run(delivery: Delivery) -> None:
            async def invoke() -> None:
                await self.invoke(delivery)

            if on_delivery is None:
                await invoke()
            else:
                await on_delivery(delivery, invoke)

        self.queue.add_listener(wake)
        try:
            for _ in range(max_rounds):
                available.clear()
                free = self.max_concurrent_calls - len(in_flight)
                for delivery in self.queue.receive(free) if free > 0 else []:
                    in_flight.add(asyncio.create_task(run(delivery)))
                if in_flight:
                    # Like the host's receive loop: react to a finished invocation or to a
                    # message becoming available (an abandon, an expired lock), whichever first.
                    waiter = asyncio.create_task(available.wait())
                    done, _ = await asyncio.wait(
                        {*in_flight, waiter}, return_when=asyncio.FIRST_COMPLETED
                    )
                    waiter.cancel()
                    for task in done - {waiter}:
                        in_flight.discard(task)
                        task.result()  # surface bugs in the host itself or in a hook
                    continue
                if self.queue.is_idle():
                    return self.stats
                expiry = self.queue.next_lock_expiry()
                if expiry is None:
                    continue  # a message became available meanwhile; receive again
                self.stats.lock_expiry_waits += 1
                clock = self.queue.clock
                if isinstance(clock, ManualClock):
                    clock.advance(max(expiry - clock.now(), timedelta(0)))
                else:
                    await asyncio.sleep(max(0.0, (expiry - clock.now()).total_seconds()))
        finally:
            self.queue.remove_listener(wake)
            for task in in_flight:
                task.cancel()
        raise RuntimeError(f"queue not idle after {max_rounds} rounds")
