"""The Service Bus adapter: read a received message into the core's terms, and settle it.

``ServiceBusMessageActions`` settles over a blocking gRPC call to the Functions host, with no
deadline (the extension sets none). So settlement runs on its own thread pool, never on the
event loop and never on asyncio's default executor (``cpu_count + 4`` threads, shared with
aiohttp's DNS lookups: 6 on a 2-core instance, fewer than ``maxConcurrentCalls``). The pool has
one thread per concurrent call the host makes (host.json ``maxConcurrentCalls``), so no
settlement queues behind another; and each wait is bounded: a settlement that has not returned
after ``SETTLEMENT_TIMEOUT_S`` is a failed settlement (the caller logs and swallows it, the lock
lapses, the redelivery resolves it). A hung call keeps its thread; the pool never grows.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from shared.core import Decision, IncomingMessage, Settlement
from shared.message_body import read_body


class MessageActions(Protocol):
    """The part of ``azurefunctions.extensions.bindings.servicebus.ServiceBusMessageActions``
    this consumer uses."""

    def complete(self, message: Any) -> None: ...

    def abandon(self, message: Any) -> None: ...

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None: ...


def to_incoming(message: Any) -> IncomingMessage:
    """``azure.servicebus.ServiceBusReceivedMessage`` -> ``IncomingMessage``."""
    return IncomingMessage(
        message_id=_text(message.message_id),
        # One reading for the consumer and the dead-letter tool (shared.message_body).
        body=read_body(message.body, getattr(message, "body_type", None)).content,
        correlation_id=_text(message.correlation_id),
        delivery_count=message.delivery_count,
        application_properties=_properties(message.application_properties),
        locked_until=message.locked_until_utc,
    )


# A settlement is one gRPC round trip to the host on the same machine: seconds mean it hangs.
SETTLEMENT_TIMEOUT_S = 10.0
DEFAULT_MAX_CONCURRENT_CALLS = 16  # the Service Bus extension's default
HOST_JSON = Path(__file__).resolve().parent.parent / "host.json"  # next to function_app.py


def max_concurrent_calls(host_json: Path = HOST_JSON) -> int:
    """host.json ``extensions.serviceBus.maxConcurrentCalls``, or the extension's default."""
    try:
        value = json.loads(host_json.read_text())["extensions"]["serviceBus"]["maxConcurrentCalls"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_MAX_CONCURRENT_CALLS
    return value if isinstance(value, int) and value >= 1 else DEFAULT_MAX_CONCURRENT_CALLS


class Settler:
    """Settles decisions on its own bounded pool, with a bounded wait (see the module doc)."""

    def __init__(
        self, max_workers: int | None = None, timeout_s: float = SETTLEMENT_TIMEOUT_S
    ) -> None:
        self.max_workers = max_workers or max_concurrent_calls()
        self.timeout_s = timeout_s
        # Threads start on first use, so an unused settler costs nothing.
        self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="settlement")

    async def settle(self, actions: MessageActions, message: Any, decision: Decision) -> None:
        """Apply the decision's settlement; raises what the settlement call raised, or
        ``TimeoutError`` when it has not returned within ``timeout_s``."""
        settlement = decision.settlement
        call: Callable[[], None]
        if settlement is Settlement.COMPLETE:
            call = functools.partial(actions.complete, message)
        elif settlement is Settlement.DEADLETTER:
            call = functools.partial(
                actions.deadletter,
                message,
                deadletter_reason=decision.deadletter_reason,
                deadletter_error_description=decision.description,
            )
        else:
            call = functools.partial(actions.abandon, message)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.timeout_s):
            await loop.run_in_executor(self._pool, call)

    def close(self) -> None:
        # Not waiting: a hung settlement call must not hang the shutdown too.
        self._pool.shutdown(wait=False, cancel_futures=True)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _properties(properties: Mapping[Any, Any] | None) -> dict[str, Any]:
    # uamqp-decoded application properties arrive with bytes keys and values.
    if not properties:
        return {}
    return {
        _text(key) or "": value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        for key, value in properties.items()
    }
