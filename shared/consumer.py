"""The application service: one delivery in, decided, settled exactly once, and recorded.

This is where the core meets the adapters. It never raises for anything a message can cause;
a failed settlement is logged and swallowed (the lock lapses, the redelivery is recognised as a
duplicate). Only cancellation propagates: then nothing is settled and the lock expires, exactly as
when the worker process dies.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from shared.core import (
    RETRIED_IN_DELIVERY,
    Decision,
    IncomingMessage,
    OrderStore,
    RetryPolicy,
    decide,
    utc_now,
)
from shared.settlement import MessageActions, settle, to_incoming
from shared.telemetry import ConsumerTelemetry


class OrderConsumer:
    def __init__(
        self,
        store: OrderStore,
        telemetry: ConsumerTelemetry,
        *,
        outbox_enabled: bool = True,
        retry_policy: RetryPolicy | None = None,
        now: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._outbox_enabled = outbox_enabled
        self._retry_policy = retry_policy or RetryPolicy()
        # Injectable so tests and the local stand-in ride out outages on a manual clock.
        self._now = now
        self._sleep = sleep
        self._jitter = jitter

    async def handle(self, message: Any, actions: MessageActions) -> Decision:
        started = time.perf_counter()
        incoming = to_incoming(message)
        with self._telemetry.processing(incoming) as span:
            decision, attempts = await self._decide_with_retries(incoming)
            try:
                await settle(actions, message, decision)
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

    async def _decide_with_retries(self, incoming: IncomingMessage) -> tuple[Decision, int]:
        """Decide; on a transient or systemic failure, retry while the lock lasts.

        Retrying is safe: if an earlier attempt committed without us hearing back, the next
        create conflicts and the stored fingerprint matches, so the outcome is a duplicate."""
        policy = self._retry_policy
        deadline = incoming.locked_until or (
            self._now() + timedelta(seconds=policy.budget_without_lock_s)
        )
        attempts = 1
        while True:
            decision = await decide(incoming, self._store, outbox_enabled=self._outbox_enabled)
            if decision.outcome not in RETRIED_IN_DELIVERY:
                return decision, attempts
            remaining = (deadline - self._now()).total_seconds()
            delay = policy.next_delay(attempts, remaining, self._jitter())
            if delay is None:
                return decision, attempts
            self._telemetry.retrying(incoming, decision, attempts, delay)
            await self._sleep(delay)
            attempts += 1
