"""The order consumer: the kit's ``Consumer`` (decide, retry, settle once, report) deciding with
the order core (``shared.consumer.core.decide``) over the order store. Wiring only."""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from typing import Any

from idempotent_consumer import (
    SYSTEM_CLOCK,
    Clock,
    Consumer,
    ConsumerObserver,
    Decision,
    IncomingMessage,
    RetryPolicy,
)

from shared.consumer.core import DEFAULT_MARKER_TTL_S, OrderStore, decide


class OrderConsumer(Consumer):
    def __init__(
        self,
        store: OrderStore,
        observer: ConsumerObserver,
        *,
        outbox_enabled: bool = True,
        retry_policy: RetryPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
        jitter: Callable[[], float] = random.random,
        marker_ttl_s: int = DEFAULT_MARKER_TTL_S,
    ) -> None:
        # decide's own coroutine, not one awaiting it: no forwarding level per delivery.
        def decide_order(
            incoming: IncomingMessage, traceparent: str | None
        ) -> Coroutine[Any, Any, Decision]:
            return decide(
                incoming,
                store,
                outbox_enabled=outbox_enabled,
                clock=clock,
                traceparent=traceparent,
                marker_ttl_s=marker_ttl_s,
            )

        super().__init__(
            decide_order, observer, retry_policy=retry_policy, clock=clock, jitter=jitter
        )
