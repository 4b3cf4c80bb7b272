"""A stand-in for the Functions host's Service Bus trigger, on top of the peek-lock queue model.

It does what the host does for this app, and no more:
- indexes ``function_app.app`` (the worker's view: ``app.get_functions()`` and the binding JSON)
  and resolves ``%ORDERS_QUEUE_NAME%`` from the app settings;
- encodes each delivery in the host's binding format and decodes it with the extension's own
  ``ServiceBusConverter`` into a real ``azure.servicebus.ServiceBusReceivedMessage``;
- passes the real ``ServiceBusMessageActions``, which settles over gRPC against
  ``local.settlement_server`` exactly as it would against the host;
- runs up to ``maxConcurrentCalls`` (host.json) invocations at once;
- with ``autoCompleteMessages: false``, an exception escaping the function settles nothing: the
  lock expires and the message is redelivered.

Not reproduced: automatic lock renewal while a function runs (locks only expire when the caller
advances the clock or expires one on purpose), prefetch, sessions, batch triggers.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import azure.functions as func
from azurefunctions.extensions.base import GrpcClientType
from azurefunctions.extensions.bindings.servicebus import ServiceBusClientConverter

from local.broker import Delivery, ManualClock, PeekLockQueue
from local.host_binding import decode_host_binding, encode_amqp, host_binding_bytes

REPO_ROOT = Path(__file__).resolve().parent.parent
_SETTING_REFERENCE = re.compile(r"^%([^%]+)%$")


def host_settings(path: Path = REPO_ROOT / "host.json") -> dict[str, Any]:
    """``extensions.serviceBus`` of host.json: the same file the real host reads."""
    document = json.loads(path.read_text())
    settings: dict[str, Any] = document.get("extensions", {}).get("serviceBus", {})
    return settings


@dataclass(frozen=True)
class IndexedFunction:
    name: str
    call: Callable[..., Any]
    trigger_arg: str
    queue_name: str
    connection: str
    auto_complete: bool
    client_args: tuple[str, ...]


_indexed_apps: dict[int, list[tuple[str, str, Callable[..., Any]]]] = {}


def indexed_functions(app: func.FunctionApp) -> list[tuple[str, str, Callable[..., Any]]]:
    """(name, function JSON, user function) of each function, as the worker indexes them.

    ``get_functions()`` validates and registers names, so it may run once per app, as in the
    worker, which indexes once at start-up."""
    if id(app) not in _indexed_apps:
        _indexed_apps[id(app)] = [
            (str(f.get_function_name()), f.get_function_json(), f.get_user_function())
            for f in app.get_functions()
        ]
    return _indexed_apps[id(app)]


def index_function(
    app: func.FunctionApp, app_settings: Mapping[str, str], function_name: str | None = None
) -> IndexedFunction:
    """Find the Service Bus queue-triggered function the way the worker indexes it."""
    for name, function_json, user_function in indexed_functions(app):
        if function_name is not None and name != function_name:
            continue
        bindings = json.loads(function_json)["bindings"]
        trigger = next((b for b in bindings if b["type"] == "serviceBusTrigger"), None)
        if trigger is None:
            continue
        signature = inspect.signature(user_function)
        # The worker injects gRPC client types (ServiceBusMessageActions) by annotation.
        client_args = tuple(
            name
            for name, parameter in signature.parameters.items()
            if inspect.isclass(parameter.annotation)
            and issubclass(parameter.annotation, GrpcClientType)
        )
        return IndexedFunction(
            name=name,
            call=user_function,
            trigger_arg=trigger["name"],
            queue_name=_resolve(trigger["queueName"], app_settings),
            connection=trigger["connection"],
            auto_complete=bool(trigger.get("autoCompleteMessages", True)),
            client_args=client_args,
        )
    raise LookupError(f"no Service Bus queue trigger named {function_name or '(any)'} in the app")


def _resolve(value: str, app_settings: Mapping[str, str]) -> str:
    match = _SETTING_REFERENCE.match(value)
    if match is None:
        return value
    name = match.group(1)
    if name not in app_settings:
        raise LookupError(f"app setting {name} (referenced as {value}) is not set")
    return app_settings[name]


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


async def invoke_function(function: IndexedFunction, content: bytes) -> None:
    """The worker's side of an invocation: decode the host's bytes with the extension's converter,
    bind the gRPC clients (``ServiceBusMessageActions``) and call the function; raises what the
    function raised."""
    kwargs: dict[str, Any] = {function.trigger_arg: decode_host_binding(content)}
    for name in function.client_args:
        kwargs[name] = ServiceBusClientConverter.get_client()
    result = function.call(**kwargs)
    if inspect.isawaitable(result):
        await result


@dataclass
class HostStats:
    invocations: int = 0
    failed_invocations: int = 0
    lock_expiry_waits: int = 0
    errors: list[str] = field(default_factory=list)


InvokeHook = Callable[[Delivery, Callable[[], Awaitable[None]]], Awaitable[None]]


class LocalFunctionsHost:
    def __init__(
        self,
        queue: PeekLockQueue,
        app: func.FunctionApp,
        *,
        app_settings: Mapping[str, str] | None = None,
        function_name: str | None = None,
        max_concurrent_calls: int | None = None,
    ) -> None:
        self.queue = queue
        settings = dict(os.environ if app_settings is None else app_settings)
        self.function = index_function(app, settings, function_name)
        if self.function.queue_name != queue.settings.queue_name:
            raise LookupError(
                f"function listens on {self.function.queue_name!r}, "
                f"the queue is {queue.settings.queue_name!r}"
            )
        if self.function.auto_complete:
            raise ValueError("this stand-in only models autoCompleteMessages: false")
        self.max_concurrent_calls = int(
            max_concurrent_calls or host_settings().get("maxConcurrentCalls", 16)
        )
        self.stats = HostStats()

    async def invoke(self, delivery: Delivery) -> None:
        """One function invocation for one delivery, as the host and worker perform it. An
        exception escaping the function is recorded in ``stats`` and settles nothing."""
        content = delivery_binding_bytes(delivery)  # the host's side
        self.stats.invocations += 1
        try:
            await invoke_function(self.function, content)  # the worker's side
        except Exception as error:  # noqa: BLE001 - the host logs it; the lock will expire
            self.stats.failed_invocations += 1
            self.stats.errors.append(f"{type(error).__name__}: {error}")

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
