"""One Service Bus delivery handled by a kit consumer, the one way: read it (``to_incoming``),
bind its settlement to the settler, build (or reuse) the consumer, and let the consumer decide,
retry, settle and report; when the consumer cannot be built because a setting is invalid, hold
the delivery and abandon it (``hold_then_abandon``), never dead-letter it. Never raises for
anything the message can cause.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from idempotent_consumer import (
    Clock,
    ConfigurationError,
    Consumer,
    ConsumerObserver,
    Decision,
    RetryPolicy,
    hold_then_abandon,
)
from idempotent_consumer.servicebus._incoming import to_incoming
from idempotent_consumer.servicebus._settlement import MessageActions, Settler


async def handle_delivery(
    message: Any,
    actions: MessageActions,
    *,
    settler: Settler,
    consumer: Callable[[], Awaitable[Consumer]],
    observer: Callable[[], ConsumerObserver],
    clock: Clock,
    retry_policy: RetryPolicy,
) -> Decision:
    """``message`` and ``actions`` as the trigger gives them; ``consumer`` builds or returns the
    event loop's consumer (raising ``ConfigurationError`` for a bad setting); ``observer`` is
    the one that reports a delivery held for the configuration."""
    incoming = to_incoming(message)
    settle = settler.bound(actions, message)
    try:
        built = await consumer()
    except ConfigurationError as error:
        return await hold_then_abandon(
            incoming,
            settle,
            error,
            observer=observer(),
            clock=clock,
            retry_policy=retry_policy,
        )
    return await built.handle(incoming, settle)
