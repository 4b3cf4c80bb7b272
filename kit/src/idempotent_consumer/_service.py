"""The application service of every consumer: one delivery in, decided, settled exactly once,
and recorded.

This is where a consumer's decision meets its ports: the consumer's ``Decide`` (its contract and
effect over its store: ``decide`` or ``decide_call`` over a definition), the settlement
(``Settle``: a callable the Service Bus adapter binds to one received message) and the observer
(``ConsumerObserver``: spans, metrics and logs, ``idempotent_consumer.telemetry``). It never
raises for anything a message can cause; a failed settlement is reported and swallowed (the lock
lapses, the redelivery is recognised as a duplicate). Only cancellation propagates: then nothing
is settled and the lock expires, exactly as when the worker process dies.

Every delivery, decided or held because the app is misconfigured (``hold_then_abandon``), ends
through one path, ``_settle_and_record``: settle, report a failed settlement, record the
outcome. It never builds its collaborators (the composition root, ``idempotent_consumer.functions``
or an app's own, passes them in, the clock included), and it imports no adapter, no telemetry
and no Azure library.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Protocol

from idempotent_consumer._clock import SYSTEM_CLOCK, Clock
from idempotent_consumer._decision import Decision, IncomingMessage, Outcome
from idempotent_consumer._errors import ConfigurationError
from idempotent_consumer._retry import HELD_BEFORE_ABANDON, RETRIED_IN_DELIVERY, RetryPolicy

# Settles the delivery as the decision says; raises what the settlement raised.
Settle = Callable[[Decision], Awaitable[None]]

# The outcomes a delivery waits on (held, or retried within its lock); every other is final.
_WAITED_ON = HELD_BEFORE_ABANDON | RETRIED_IN_DELIVERY


class ConsumerObserver(Protocol):
    """What the consumer reports. ``processing`` wraps one delivery and yields its W3C
    traceparent (None when tracing is off), which the core stores on the outbox event; the other
    calls happen inside it."""

    def processing(self, message: IncomingMessage) -> AbstractContextManager[str | None]: ...

    def retrying(
        self, message: IncomingMessage, decision: Decision, attempt: int, delay_s: float
    ) -> None: ...

    def settlement_failed(
        self, message: IncomingMessage, decision: Decision, error: Exception
    ) -> None: ...

    def record_outcome(
        self,
        message: IncomingMessage,
        decision: Decision,
        *,
        settled: bool,
        duration_s: float,
        attempts: int = 1,
    ) -> None: ...

    def configuration_invalid(
        self, message: IncomingMessage, error: ConfigurationError
    ) -> None: ...


# A consumer's decision about one delivery: its contract, its effect over its store and its
# outcome table, given the delivery and the W3C traceparent of its processing span (stored on
# what it writes, where it writes events). Never raises for anything a message can cause.
Decide = Callable[[IncomingMessage, str | None], Awaitable[Decision]]


class Consumer:
    """Decide, retry within the delivery while the lock lasts, settle exactly once, report: the
    same for every consumer; what it decides is the consumer's ``Decide``."""

    def __init__(
        self,
        decide: Decide,
        observer: ConsumerObserver,
        *,
        retry_policy: RetryPolicy | None = None,
        clock: Clock = SYSTEM_CLOCK,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._decide = decide
        self._observer = observer
        self._retry_policy = retry_policy or RetryPolicy()
        # One clock for backoff, lock deadlines and acceptedAt: tests and the local stand-in
        # ride out outages on a manual clock.
        self._clock = clock
        self._jitter = jitter

    async def handle(self, incoming: IncomingMessage, settle: Settle) -> Decision:
        started = time.perf_counter()
        # The traceparent is stored on the outbox event: the relay's publish span links it.
        with self._observer.processing(incoming) as traceparent:
            decision, attempts = await self._decide_with_retries(incoming, traceparent)
            await _settle_and_record(
                self._observer, incoming, decision, settle, started=started, attempts=attempts
            )
        return decision

    async def _decide_with_retries(
        self, incoming: IncomingMessage, traceparent: str | None
    ) -> tuple[Decision, int]:
        """Decide; on a transient or systemic failure, retry while the lock lasts; on an
        unexpected one, hold the lock a while (``RetryPolicy``), then give up.

        Retrying is safe: if an earlier attempt committed without us hearing back, the next
        commit meets its marker (or the order's create conflicts) and the stored fingerprint
        matches, so the outcome is a duplicate."""
        policy, clock = self._retry_policy, self._clock
        deadline = incoming.locked_until or (
            clock.now() + timedelta(seconds=policy.budget_without_lock_s)
        )
        attempts = 1
        while True:
            decision = await self._decide(incoming, traceparent)
            if decision.outcome not in _WAITED_ON:
                return decision, attempts  # decided: most deliveries end here
            remaining = (deadline - clock.now()).total_seconds()
            if decision.outcome in HELD_BEFORE_ABANDON:
                await clock.sleep(policy.hold_before_abandon(remaining))
                return decision, attempts
            delay = policy.next_delay(
                attempts, remaining, self._jitter(), retry_after_s=decision.retry_after_s
            )
            if delay is None:
                return decision, attempts
            self._observer.retrying(incoming, decision, attempts, delay)
            await clock.sleep(delay)
            attempts += 1


async def hold_then_abandon(
    incoming: IncomingMessage,
    settle: Settle,
    error: ConfigurationError,
    *,
    observer: ConsumerObserver,
    clock: Clock,
    retry_policy: RetryPolicy,
) -> Decision:
    """A delivery the app cannot even decide: a setting is invalid, so no consumer exists.

    Bad configuration is a systemic failure: the order is healthy, the app is not, so the
    message must survive until an operator fixes the settings. Abandoning at once would cycle
    every message through maxDeliveryCount deliveries in seconds and into the dead-letter queue;
    like any systemic failure, the delivery holds its lock until shortly before it expires (an
    app-settings change restarts the worker anyway), then abandons. It is recorded as any
    systemic outcome is, plus ``configuration_invalid`` (a critical log naming the setting)."""
    started = time.perf_counter()
    decision = Decision(
        Outcome.SYSTEMIC, order_id=incoming.message_id, description=str(error), error=error
    )
    with observer.processing(incoming):
        observer.configuration_invalid(incoming, error)
        await clock.sleep(_hold_seconds(incoming, clock, retry_policy))
        await _settle_and_record(observer, incoming, decision, settle, started=started)
    return decision


def _hold_seconds(incoming: IncomingMessage, clock: Clock, policy: RetryPolicy) -> float:
    if incoming.locked_until is None:
        return policy.budget_without_lock_s
    remaining = (incoming.locked_until - clock.now()).total_seconds()
    return max(0.0, remaining - policy.lock_margin_s)


async def _settle_and_record(
    observer: ConsumerObserver,
    incoming: IncomingMessage,
    decision: Decision,
    settle: Settle,
    *,
    started: float,
    attempts: int = 1,
) -> None:
    """Settle as decided, then record the outcome: the one ending of every delivery."""
    try:
        await settle(decision)
        settled = True
    except Exception as error:  # noqa: BLE001 - lock lost, host gone: never fatal
        settled = False
        observer.settlement_failed(incoming, decision, error)
    observer.record_outcome(
        incoming,
        decision,
        settled=settled,
        duration_s=time.perf_counter() - started,
        attempts=attempts,
    )
