"""The outbox watchdog: which outbox documents are stuck, and publishing them anyway.

The change feed is the relay's only source of work, so a document it never delivers stays
``pending`` for ever, unseen: written before the trigger's leases existed when it started "from
now", behind a lease that stopped moving, or during a relay that does not run at all (a missing
lease container, a removed role, a disabled function). Every few minutes (a timer trigger,
``function_app.py``) the watchdog asks the container for the documents that are still pending
``min_age_s`` after their ``createdAt``, reports how many and how old the oldest is (the metrics
the "oldest pending outbox document" alert reads: a relay that publishes nothing still has a
watchdog that reports), and publishes them through the same relay core (``OutboxRelay``): the
same message, MessageId = eventId, and the same etag-conditional mark.

Safe while the change-feed relay runs at the same moment: both may send the same event, and the
topic's duplicate detection drops the second copy (same MessageId, within its window); both
marks are conditional on the etag each read, so exactly one commits and the other meets a 412
("already marked"). The timer runs one instance at a time across the app's instances (its
storage lock, learn.microsoft.com/azure/azure-functions/functions-bindings-timer, "Scale-out").

What is stuck is decided here (``WatchdogPolicy.is_stuck``), by a rule the store's query
implements (``shared.adapters.cosmos_outbox``); never by the store alone. No Azure imports: the
container is reached through the ``OutboxScanner`` port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.clock import SYSTEM_CLOCK, Clock
from shared.relay.core import OutboxRelay, RelayReport
from shared.relay.outbox import created_at, is_pending_outbox

# Every five minutes (NCronTab, six fields: second minute hour day month day-of-week; UTC),
# as the timer trigger reads it (learn.microsoft.com/azure/azure-functions/functions-bindings-timer,
# "NCRONTAB expressions").
WATCHDOG_SCHEDULE = "0 */5 * * * *"
# Pages of stuck documents one run republishes at most: a run stays well inside functionTimeout
# (5 min) and the next run takes the rest.
MAX_PAGES_PER_RUN = 20


@dataclass(frozen=True, slots=True)
class WatchdogPolicy:
    """When a pending outbox document counts as stuck."""

    min_age_s: float = 300.0
    max_documents: int = 500  # per page

    def cutoff(self, now: datetime) -> datetime:
        """Documents created at or before this are stuck if still pending."""
        return now - timedelta(seconds=self.min_age_s)

    def is_stuck(self, document: Mapping[str, Any], now: datetime) -> bool:
        """The rule: an OrderAccepted outbox document still pending ``min_age_s`` after its
        ``createdAt``. The store's query is held to it (tests/relay/test_watchdog.py)."""
        created = created_at(document)
        return is_pending_outbox(document) and created is not None and created <= self.cutoff(now)


@dataclass(frozen=True, slots=True)
class StuckOutbox:
    """One page of stuck documents, with the count and age of all of them."""

    documents: Sequence[Mapping[str, Any]]  # at most the page size, in no particular order
    count: int  # every stuck document, not only this page's
    oldest_created_at: datetime | None


class WatchdogObserver(Protocol):
    """What the watchdog reports (``shared.telemetry.relay.RelayTelemetry``)."""

    def watchdog_checked(self, stuck: int, oldest_age_s: float, min_age_s: float) -> None:
        """One run: how many are stuck and the oldest one's age (0 when none); every run."""
        ...


class OutboxScanner(Protocol):
    async def stuck(self, created_at_or_before: datetime, limit: int) -> StuckOutbox:
        """The pending OrderAccepted outbox documents created at or before the cutoff: at most
        ``limit`` of them, and the count and oldest ``createdAt`` of all."""
        ...


@dataclass
class WatchdogReport:
    stuck: int = 0
    oldest_age_s: float = 0.0
    republished: list[str] = field(default_factory=list)  # document ids published and marked
    relay_reports: list[RelayReport] = field(default_factory=list)


class OutboxWatchdog:
    def __init__(
        self,
        scanner: OutboxScanner,
        relay: OutboxRelay,
        observer: WatchdogObserver,
        *,
        clock: Clock = SYSTEM_CLOCK,
        policy: WatchdogPolicy | None = None,
    ) -> None:
        self._scanner = scanner
        self._relay = relay
        self._observer = observer
        self._clock = clock
        self._policy = policy or WatchdogPolicy()

    async def run(self) -> WatchdogReport:
        """Report what is stuck, then publish it, page by page. Raises ``RelayIncomplete``
        when an event could not be published or marked (it stays pending: the next run, or
        the change feed, takes it); the report's metrics are recorded first, either way."""
        policy = self._policy
        now = self._clock.now()
        stuck = await self._scanner.stuck(policy.cutoff(now), policy.max_documents)
        report = WatchdogReport(stuck=stuck.count)
        if stuck.oldest_created_at is not None:
            report.oldest_age_s = max(0.0, (now - stuck.oldest_created_at).total_seconds())
        self._observer.watchdog_checked(stuck.count, report.oldest_age_s, policy.min_age_s)
        for _ in range(MAX_PAGES_PER_RUN):
            page = [d for d in stuck.documents if policy.is_stuck(d, now)]
            if not page:
                break
            relayed = await self._relay.relay(page)  # raises RelayIncomplete: stop there
            report.relay_reports.append(relayed)
            report.republished.extend(relayed.published)
            if stuck.count <= len(stuck.documents):
                break  # that was every stuck document
            stuck = await self._scanner.stuck(policy.cutoff(now), policy.max_documents)
        return report
