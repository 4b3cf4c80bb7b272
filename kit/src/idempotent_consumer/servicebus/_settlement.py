"""The settlement of a received message, exactly as the kit decided it, off the event loop.

``ServiceBusMessageActions`` settles over a blocking gRPC call to the Functions host, with no
deadline (the extension sets none). So settlement runs on its own thread pool, never on the
event loop and never on asyncio's default executor (``cpu_count + 4`` threads, shared with
aiohttp's DNS lookups: 6 on a 2-core instance, fewer than ``maxConcurrentCalls``). The pool has
one thread per concurrent call the host makes (host.json ``maxConcurrentCalls``), so no
settlement queues behind another; and each wait is bounded: a settlement that has not returned
after ``SETTLEMENT_TIMEOUT_S`` is a failed settlement (the caller logs and swallows it, the lock
lapses, the redelivery resolves it).

A hung call keeps its thread for as long as it hangs (nothing can cancel a running thread, and
the gRPC stub has no deadline), so hung calls would in time take every thread and every later
settlement would queue behind them and time out. The damage is bounded and visible: once half
of a pool's threads are hung, new settlements go to a fresh pool (the old one finishes what it
holds and keeps its hung threads until they return); at most ``MAX_POOLS`` pools are ever
created, so the threads stay bounded too, and past that the settler says it is exhausted (the
worker must be restarted). Every hang, replacement and return is reported to the observer
(``SettlementWatcher``): a telemetry adapter counts hung threads and logs each at error level,
and an alert can read either.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from idempotent_consumer import Decision, Settlement
from idempotent_consumer.servicebus._host import max_concurrent_calls


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


# A settlement is one gRPC round trip to the host on the same machine: seconds mean it hangs.
SETTLEMENT_TIMEOUT_S = 10.0


# Pools a settler may create over its life (the first and its replacements): hung threads are
# bounded by MAX_POOLS x max_workers.
MAX_POOLS = 4


@dataclass(frozen=True, slots=True)
class HungSettlements:
    """What a hang (or a hung call's late return) did to the settler."""

    hung: int  # calls past their timeout and still running, now, over every pool
    returned_after_s: float | None = None  # set when a hung call has just returned
    replaced_pool: bool = False  # this hang moved new settlements to a fresh pool
    exhausted: bool = False  # no replacement left: new settlements may queue behind hung ones


SettlementWatcher = Callable[[HungSettlements], None]


class Settler:
    """Settles decisions on its own bounded pool, with a bounded wait (see the module doc)."""

    def __init__(
        self,
        max_workers: int | None = None,
        timeout_s: float = SETTLEMENT_TIMEOUT_S,
        *,
        watcher: SettlementWatcher | None = None,
        max_pools: int = MAX_POOLS,
    ) -> None:
        self.max_workers = max_workers or max_concurrent_calls()
        self.timeout_s = timeout_s
        self._watcher = watcher
        self._max_pools = max_pools
        # A pool is replaced once this many of its threads are hung: half of them, so that a
        # burst of hangs still leaves threads for the settlements in flight meanwhile.
        self._replace_at = max(1, self.max_workers // 2)
        self._lock = threading.Lock()  # hung calls return on pool threads
        self._pools = 1
        self._hung: dict[Future[None], float] = {}  # hung call -> when it was submitted
        self._hung_in_pool = 0
        # Threads start on first use, so an unused settler costs nothing.
        self._pool = self._new_pool()

    def _new_pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(self.max_workers, thread_name_prefix="settlement")

    @property
    def hung(self) -> int:
        """Settlement calls past their timeout that have not returned yet."""
        with self._lock:
            return len(self._hung)

    def bound(self, actions: MessageActions, message: Any) -> Callable[[Decision], Awaitable[None]]:
        """The settlement of one received message, as the consumer service calls it
        (``idempotent_consumer.Settle``)."""
        return functools.partial(self.settle, actions, message)

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
        pool = self._pool
        submitted = time.monotonic()
        future: Future[None] = pool.submit(call)
        try:
            async with asyncio.timeout(self.timeout_s):
                # Cancelling the wait (the timeout) cannot stop a running call: the future
                # keeps running on its thread, and is tracked as hung below.
                await asyncio.wrap_future(future)
        except TimeoutError:
            if not future.done():
                self._hang(future, pool, submitted)
            raise

    def _hang(self, future: Future[None], pool: ThreadPoolExecutor, submitted: float) -> None:
        report: HungSettlements
        with self._lock:
            self._hung[future] = submitted
            replaced = exhausted = False
            if pool is self._pool:
                self._hung_in_pool += 1
                if self._hung_in_pool >= self._replace_at:
                    if self._pools < self._max_pools:
                        # The old pool runs what it holds; its hung threads end when they return.
                        pool.shutdown(wait=False)
                        self._pool = self._new_pool()
                        self._pools += 1
                        self._hung_in_pool = 0
                        replaced = True
                    else:
                        exhausted = True
            report = HungSettlements(len(self._hung), replaced_pool=replaced, exhausted=exhausted)
        future.add_done_callback(self._returned)
        self._report(report)

    def _returned(self, future: Future[None]) -> None:
        with self._lock:
            submitted = self._hung.pop(future, None)
            report = HungSettlements(
                len(self._hung),
                returned_after_s=None if submitted is None else time.monotonic() - submitted,
            )
        self._report(report)

    def _report(self, report: HungSettlements) -> None:
        if self._watcher is not None:
            # Telemetry must never fail a settlement (nor the pool thread that reports a return).
            with contextlib.suppress(Exception):
                self._watcher(report)

    def close(self) -> None:
        # Not waiting: a hung settlement call must not hang the shutdown too.
        self._pool.shutdown(wait=False, cancel_futures=True)
