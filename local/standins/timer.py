"""The Functions host's timer trigger, for a timer-triggered function of a started worker
(``local.standins.worker.FunctionsWorker``): one ``tick`` is one occurrence of its schedule, invoked
through Microsoft's worker as the host invokes it.

It keeps only the host's side, as ``local.standins.host`` and ``local.standins.change_feed`` do:
- finds the timer-triggered function in the worker's metadata (its raw bindings: ``schedule``,
  ``useMonitor``, ``runOnStartup``);
- sends each occurrence as one invocation request whose trigger is the timer object as
  ``json`` typed data: ``{"Schedule": {...}, "ScheduleStatus": {"Last", "Next", "LastUpdated"},
  "IsPastDue": ...}``, the shape Learn documents ("Timer trigger for Azure Functions", Usage:
  learn.microsoft.com/azure/azure-functions/functions-bindings-timer) and the worker's converter
  decodes (azure/functions/timer.py:47-58, ``TimerRequestConverter.decode``: json only);
- a failed invocation is recorded and not retried: "the timer trigger doesn't retry after a
  function fails" (same page, Retry behavior); the next occurrence is the next tick.

Not reproduced: the schedule itself (the caller ticks, on its manual clock), the schedule
monitor's storage (``ScheduleStatus`` comes from the ticks made here, and ``IsPastDue`` only when
the caller says so), the singleton lock across instances (one instance here), ``runOnStartup``,
and ``WEBSITE_TIME_ZONE``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from idempotent_consumer import SYSTEM_CLOCK, Clock

from local.standins.worker import FunctionsWorker, InvocationResult, Json


@dataclass
class TimerStats:
    invocations: int = 0
    failed_invocations: int = 0
    errors: list[str] = field(default_factory=list)  # the worker's messages of failed runs


class TimerTriggerEmulator:
    """The host's timer trigger for one function of a started worker."""

    def __init__(
        self,
        worker: FunctionsWorker,
        *,
        function_name: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.worker = worker
        self.function = worker.triggered_function("timerTrigger", function_name)
        trigger = self.function.trigger
        self.trigger_name = str(trigger["name"])
        self.schedule = str(trigger["schedule"])
        self.clock = clock
        self.stats = TimerStats()
        self._last: datetime | None = None

    async def tick(self, *, past_due: bool = False) -> InvocationResult:
        """One occurrence: the invocation request the host sends when the schedule fires."""
        now = self.clock.now()
        status = {
            "Last": (self._last or now).isoformat(),
            "Next": now.isoformat(),
            "LastUpdated": now.isoformat(),
        }
        self._last = now
        self.stats.invocations += 1
        result = await self.worker.invoke(
            self.function.name,
            {
                self.trigger_name: Json(
                    {
                        "Schedule": {"AdjustForDST": True},
                        "ScheduleStatus": status,
                        "IsPastDue": past_due,
                    }
                )
            },
        )
        if not result.succeeded:
            self.stats.failed_invocations += 1
            self.stats.errors.append(str(result.error))
        return result
