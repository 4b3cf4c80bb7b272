"""The outbox watchdog: which outbox documents are stuck, and publishing them anyway.

The change feed is the relay's only source of work, so a document it never delivers stays
``pending`` for ever, unseen: written before the trigger's leases existed when it started "from
now", behind a lease that stopped moving, or during a relay that does not run at all (a missing
lease container, a removed role, a disabled function). Every few minutes (a timer trigger,
``function_app.py``) the watchdog reads the documents still pending ``min_age_s`` after their
``createdAt``, oldest first, page by page, publishes each page through the same relay core
(``OutboxRelay``: the same message, MessageId = eventId, the same etag-conditional mark), and
reports how many it found and how old the oldest was (the metrics the "oldest pending outbox
document" alert reads: a relay that publishes nothing still has a watchdog that reports).

It is a backstop for stragglers, not a second relay: one instance at a time, at most
``MAX_PAGES_PER_RUN`` pages a run, so at most ``drain_capacity_per_s`` events a second (about 33
with the defaults), below what a dead relay leaves behind at any tier of infra/tiers/ (100 to
10,000 orders/s). The count and the age come from the pages read, never from an aggregate
(whose cost would grow with the backlog it should drain): the first page holds the oldest, and a
run that stops at its page limit with a full page says so (``RunEnd.PAGE_LIMIT``), so the
"watchdog falling behind" alert can tell a backlog growing faster than it drains from one it is
catching up with (infra/app/relay-alerts.bicep, docs/operations.md).

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

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from idempotent_consumer import SYSTEM_CLOCK, Clock

from shared.relay.core import OutboxRelay, RelayReport
from shared.relay.outbox import created_at, is_pending_outbox
from shared.triggers import WATCHDOG_PERIOD_S

# Pages of stuck documents one run republishes at most: a run stays well inside functionTimeout
# (5 min) and the next run takes the rest (bench target 8 times a run of them).
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
        """The rule: an outbox document (any event type) still pending ``min_age_s`` after its
        ``createdAt``. The store's query is held to it (tests/relay/test_watchdog.py)."""
        created = created_at(document)
        return is_pending_outbox(document) and created is not None and created <= self.cutoff(now)

    def drain_capacity_per_s(self) -> float:
        """The most a run publishes, per second of the schedule: what the watchdog can promise
        when the change feed publishes nothing at all (docs/relay.md, docs/capacity.md)."""
        return self.max_documents * MAX_PAGES_PER_RUN / WATCHDOG_PERIOD_S


Page = Sequence[Mapping[str, Any]]


class RunEnd(enum.StrEnum):
    """How a run ended: what tells a watchdog at its capacity from one that drained."""

    DRAINED = "drained"  # it read every stuck document
    PAGE_LIMIT = "page_limit"  # it stopped at MAX_PAGES_PER_RUN full pages: more may be stuck
    FAILED = "failed"  # a page could not be published (RelayIncomplete): the next run retries


class WatchdogObserver(Protocol):
    """What the watchdog reports (``shared.telemetry.relay.RelayTelemetry``)."""

    def watchdog_checked(
        self, stuck: int, oldest_age_s: float, min_age_s: float, end: RunEnd
    ) -> None:
        """One run: how many stuck documents it read, the oldest one's age (0 when none) and
        how it ended; every run whose query answered."""
        ...


class OutboxScanner(Protocol):
    def stuck(self, created_at_or_before: datetime, page_size: int) -> AsyncIterator[Page]:
        """The pending outbox documents (every event type) created at or before the cutoff, oldest
        ``createdAt`` first, in pages of ``page_size`` (the last one shorter; none when nothing
        is stuck). One query for all of them, each page read only when asked for: a caller
        that stops after ``n`` pages has loaded about ``n`` pages, whatever the backlog."""
        ...


@dataclass
class WatchdogReport:
    stuck: int = 0  # the stuck documents this run read (all of them unless end is PAGE_LIMIT)
    oldest_age_s: float = 0.0
    end: RunEnd = RunEnd.DRAINED
    pages: int = 0
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
        """Publish what is stuck, oldest first, page by page, then report what the run read.
        Raises ``RelayIncomplete`` when an event could not be published or marked (it stays
        pending: the next run, or the change feed, takes it); the report's metrics are recorded
        either way, once the query has answered (a query that fails reports nothing: the
        "watchdog silent" alert then sees it)."""
        policy = self._policy
        now = self._clock.now()
        report = WatchdogReport()
        oldest: datetime | None = None
        answered = False
        full_last_page = False
        report.end = RunEnd.FAILED  # until every page read was published
        try:
            async for found in self._scanner.stuck(policy.cutoff(now), policy.max_documents):
                answered = True
                report.pages += 1
                page = [d for d in found if policy.is_stuck(d, now)]
                oldest = min(filter(None, [oldest, *map(created_at, page)]), default=None)
                report.stuck += len(page)
                relayed = await self._relay.relay(page)  # raises RelayIncomplete: stop there
                report.relay_reports.append(relayed)
                report.republished.extend(relayed.published)
                if report.pages == MAX_PAGES_PER_RUN:
                    full_last_page = len(found) == policy.max_documents
                    break
            answered = True  # the query answered, with nothing left (or nothing at all)
            report.end = RunEnd.PAGE_LIMIT if full_last_page else RunEnd.DRAINED
        finally:
            if oldest is not None:
                report.oldest_age_s = max(0.0, (now - oldest).total_seconds())
            if answered:
                self._observer.watchdog_checked(
                    report.stuck, report.oldest_age_s, policy.min_age_s, report.end
                )
        return report
