"""The application service: one delivery in, decided, settled exactly once, and recorded.

This is where the core meets the adapters. It never raises for anything a message can cause;
a failed settlement is logged and swallowed (the lock lapses, the redelivery is recognised as a
duplicate). Only cancellation propagates: then nothing is settled and the lock expires, exactly as
when the worker process dies. It never builds its collaborators: the composition root
(``shared.bootstrap``) passes them in, the clock included.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from shared.adapters.servicebus_in import MessageActions, Settler, to_incoming
from shared.clock import SYSTEM_CLOCK, Clock
from shared.consumer.core import (
    HELD_BEFORE_ABANDON,
    RETRIED_IN_DELIVERY,
    Decision,
    IncomingMessage,
    OrderStore,
    RetryPolicy,
    decide,
)
from shared.telemetry.consumer import ConsumerTelemetry, RelayTelemetry


class OrderConsumer:
    def __init__(
        self,
        store: OrderStore,
        telemetry: ConsumerTelemetry,
        *,
        outbox_enabled: bool = True,
        retry_policy: RetryPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
        jitter: Callable[[], float] = random.random,
        settler: Settler | None = None,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._outbox_enabled = outbox_enabled
        self._retry_policy = retry_policy or RetryPolicy()
        # One clock for backoff, lock deadlines and acceptedAt: tests and the local stand-in
        # ride out outages on a manual clock.
        self._clock = clock
        self._jitter = jitter
        self._settler = settler or Settler()

    async def handle(self, message: Any, actions: MessageActions) -> Decision:
        started = time.perf_counter()
        incoming = to_incoming(message)
        with self._telemetry.processing(incoming) as span:
            # Stored on the outbox event: the relay's publish span links this trace.
            traceparent = RelayTelemetry.traceparent(span)
            decision, attempts = await self._decide_with_retries(incoming, traceparent)
            try:
                await self._settler.settle(actions, message, decision)
                settled = True
            except Exception as error:  # noqa: BLE001 - lock lost, host gone: never fatal
                settled = False
                self._telemetry.settlement_failed(incoming, decision, error)
            self._telemetry.record_outcome(
                span,
                incoming,
                decision,
                settled=settled,
                duration_s=time.perf_counter() - started,
                attempts=attempts,
            )
        return decision

    async def _decide_with_retries(
        self, incoming: IncomingMessage, traceparent: str | None
    ) -> tuple[Decision, int]:
        """Decide; on a transient or systemic failure, retry while the lock lasts; on an
        unexpected one, hold the lock a while (``RetryPolicy``), then give up.

        Retrying is safe: if an earlier attempt committed without us hearing back, the next
        create conflicts and the stored fingerprint matches, so the outcome is a duplicate."""
        policy, clock = self._retry_policy, self._clock
        deadline = incoming.locked_until or (
            clock.now() + timedelta(seconds=policy.budget_without_lock_s)
        )
        attempts = 1
        while True:
            decision = await decide(
                incoming,
                self._store,
                outbox_enabled=self._outbox_enabled,
                clock=clock,
                traceparent=traceparent,
            )
            remaining = (deadline - clock.now()).total_seconds()
            if decision.outcome in HELD_BEFORE_ABANDON:
                await clock.sleep(policy.hold_before_abandon(remaining))
                return decision, attempts
            if decision.outcome not in RETRIED_IN_DELIVERY:
                return decision, attempts
            delay = policy.next_delay(
                attempts, remaining, self._jitter(), retry_after_s=decision.retry_after_s
            )
            if delay is None:
                return decision, attempts
            self._telemetry.retrying(incoming, decision, attempts, delay)
            await clock.sleep(delay)
            attempts += 1
