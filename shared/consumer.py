"""The application service: one delivery in, decided, settled exactly once, and recorded.

This is where the core meets the adapters. It never raises for anything a message can cause;
a failed settlement is logged and swallowed (the lock lapses, the redelivery is recognised as a
duplicate). Only cancellation propagates: then nothing is settled and the lock expires, exactly as
when the worker process dies.
"""

from __future__ import annotations

import time
from typing import Any

from shared.core import Decision, OrderStore, decide
from shared.settlement import MessageActions, settle, to_incoming
from shared.telemetry import ConsumerTelemetry


class OrderConsumer:
    def __init__(
        self, store: OrderStore, telemetry: ConsumerTelemetry, *, outbox_enabled: bool = True
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._outbox_enabled = outbox_enabled

    async def handle(self, message: Any, actions: MessageActions) -> Decision:
        started = time.perf_counter()
        incoming = to_incoming(message)
        with self._telemetry.processing(incoming) as span:
            decision = await decide(incoming, self._store, outbox_enabled=self._outbox_enabled)
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
            )
        return decision
