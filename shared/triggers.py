"""The trigger bindings' values that ``function_app.py`` binds and the code behind them relies
on: the two timers' schedules (and the periods their capacity and alerts are stated in), the
relay trigger's batch bound and its retry policy.

Owned here, apart from the cores that use them, so that indexing the app (the worker imports
``function_app.py`` at a cold start) loads none of the relay's, the watchdog's or the request
completer's modules (docs/benchmarks.md, target 4). Imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

# NCronTab, six fields: second minute hour day month day-of-week; UTC, as the timer trigger
# reads it (learn.microsoft.com/azure/azure-functions/functions-bindings-timer, "NCRONTAB
# expressions").
# The outbox watchdog: every five minutes.
WATCHDOG_SCHEDULE = "0 */5 * * * *"
WATCHDOG_PERIOD_S = 300  # the schedule's period
# The request completer: every minute. An intent a client gave up on reaches the consumer within
# about its minimum age + a minute, and a quiet run is one index-served query (a few RU).
COMPLETER_SCHEDULE = "0 * * * * *"
COMPLETER_PERIOD_S = 60  # the schedule's period

# The relay trigger's maxItemsPerInvocation (function_app.py says why 300).
RELAY_MAX_ITEMS_PER_INVOCATION = 300


@dataclass(frozen=True, slots=True)
class RuntimeRetry:
    """The relay function's ``@app.retry`` (exponential backoff). ``max_retry_count`` -1 =
    unbounded: with a bounded policy the host, once the retries are spent, checkpoints past the
    batch and never delivers it again: its pending documents would be lost without a trace. The
    bound that parks an event is the relay's own (``shared.relay.core.RelayPolicy``), applied
    inside an invocation."""

    strategy: str = "exponential_backoff"
    max_retry_count: int = -1
    minimum_interval: str = "00:00:05"
    maximum_interval: str = "00:05:00"


RUNTIME_RETRY = RuntimeRetry()
