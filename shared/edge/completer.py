"""The request completer: sending the messages of recorded requests that nobody sent.

A request's commit (its record with the message, and the head's version) comes before its send
(``shared.edge.core``, steps 5 and 6). When the instance stops between the two, or the queue
refuses the send for now (the client is answered 503), the record waits ``sent: false``, its ttl
-1 (``shared.edge.requests``), for a retry of the key. A client that never retries leaves an
intent the edge has accepted (its head claims that version: a cancelled order changes no more)
that no consumer hears of, and nothing else would notice. Every minute (a timer trigger,
``function_app.py``) the completer reads the records still ``sent: false`` ``min_age_s`` after
their ``startedAt``, oldest first, page by page, at most ``MAX_PAGES_PER_RUN`` pages a run, and
for each sends its stored message (the same MessageId, Subject and body bytes) and marks it
sent (``shared.edge.delivery.send_then_mark``: the same step the edge takes; the mark sets the
key's 24 h ttl). It reports how many it found, sent and failed and how old the oldest was, on
every run whose query answered (the "oldest unsent request" alert reads it: a completer that
cannot send still reports).

Why ``min_age_s`` is the edge's ``IN_PROGRESS_WINDOW`` plus a margin: within the window the
instance that committed is taken as still delivering (a retry is answered 409), and the queue
sender bounds one send at its lock wait plus its own timeout, about a minute
(``shared.adapters.servicebus_out``: ``LOCK_WAIT_S`` + ``SEND_TIMEOUT_S``); past both, the
committing instance has sent, failed or stopped. Racing it, or a client's retry doing the same
at the same moment, is harmless: both send the same MessageId, which the queue's duplicate
detection drops inside its window and the consumer recognises past it (an OrderPlaced's order
document, a change's inbox marker or version), and both marks set the same fields.

A send the queue refused for now (``SendFailed``: throttled, unreachable, a timeout) ends the
run: the record stays unsent for the next run, and every further send would wait its own
timeout on the same bad link. Any other error of a send (the queue missing, the identity
refused, a message the queue will never take) is this record's alone for all the completer can
tell: it is reported and the run goes on with the next record, so that one record cannot hold
back the others behind it. A record it cannot read is reported the same way. Either leaves the
record unsent, so the run raises ``CompletionIncomplete`` once it has reported, and the oldest
unsent age keeps rising until an operator acts: nothing is lost, nothing stops silently.

One run at a time across the app's instances (the timer's storage lock,
learn.microsoft.com/azure/azure-functions/functions-bindings-timer, "Scale-out").

What is unsent is decided here (``CompleterPolicy.is_unsent``), by a rule the store's query
implements (``shared.adapters.cosmos_requests``); never by the store alone. No Azure imports:
the container is reached through the ``UnsentRequests`` port, the queue through
``MessageSender``, the marks through the kit's ``DocumentStore``.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from idempotent_consumer import SYSTEM_CLOCK, Clock, DocumentStore, StoreError

from shared.edge.delivery import send_then_mark
from shared.edge.requests import (
    IN_PROGRESS_WINDOW,
    REQUEST_TYPE,
    Intent,
    RequestField,
    read_request_record,
)
from shared.edge.sender import MessageSender, SendFailed

# The edge's in-progress window plus the longest a committing instance may still be sending
# (the queue sender's lock wait and its send timeout: 31 + 31 s) and a margin (module docstring).
MIN_AGE = IN_PROGRESS_WINDOW + timedelta(seconds=80)
PAGE_SIZE = 100
# Pages one run sends at most: 1,000 sends through the process's one queue sender stay well
# inside functionTimeout (5 min); the next run takes the rest.
MAX_PAGES_PER_RUN = 10


@dataclass(frozen=True, slots=True)
class CompleterPolicy:
    """When a request record counts as unsent."""

    min_age_s: float = MIN_AGE.total_seconds()
    page_size: int = PAGE_SIZE

    def cutoff(self, now: datetime) -> datetime:
        """Records started at or before this are the completer's if still unsent."""
        return now - timedelta(seconds=self.min_age_s)

    def is_unsent(self, document: Mapping[str, Any], now: datetime) -> bool:
        """The rule: a request record (``type`` edge-request) whose ``sent`` is false and whose
        ``startedAt`` is at or before the cutoff. The store's query is held to it
        (tests/edge/test_completer.py)."""
        started = _started_at(document)
        return (
            document.get(RequestField.TYPE) == REQUEST_TYPE
            and document.get(RequestField.SENT) is False
            and started is not None
            and started <= self.cutoff(now)
        )


Page = Sequence[Mapping[str, Any]]


class RunEnd(enum.StrEnum):
    """How a run ended."""

    DRAINED = "drained"  # it read every unsent record, and sent each
    PAGE_LIMIT = "page_limit"  # it stopped at MAX_PAGES_PER_RUN full pages: more may wait
    FAILED = "failed"  # a record was left unsent (a send failed, a record unreadable)


class UnsentRequests(Protocol):
    def unsent(self, started_at_or_before: datetime, page_size: int) -> AsyncIterator[Page]:
        """The request records ``sent: false`` started at or before the cutoff, oldest
        ``startedAt`` first, in pages of ``page_size`` (the last one shorter; none when there
        are none). One query, each page read only when asked for."""
        ...


class CompleterObserver(Protocol):
    """What the completer reports (``shared.telemetry.completer.CompleterTelemetry``)."""

    def request_completed(
        self, order_id: str, message_id: str, age_s: float, mark_error: StoreError | None
    ) -> None:
        """A record's message sent by the completer (and its record marked, unless
        ``mark_error``)."""
        ...

    def request_not_completed(self, record_id: str, order_id: str, error: BaseException) -> None:
        """A record left unsent: its send failed, or it could not be read."""
        ...

    def completer_checked(
        self, found: int, sent: int, failed: int, oldest_age_s: float, end: RunEnd
    ) -> None:
        """One run: the unsent records it read, sent and failed, the oldest one's age (0 when
        none) and how it ended; every run whose query answered."""
        ...


class CompletionIncomplete(Exception):
    """A run left records unsent; they wait for the next run (reported already)."""


@dataclass
class CompleterReport:
    found: int = 0  # the unsent records of the pages read (all of them unless end is PAGE_LIMIT)
    sent: list[str] = field(default_factory=list)  # MessageIds sent, in order
    failed: int = 0
    oldest_age_s: float = 0.0
    pages: int = 0
    end: RunEnd = RunEnd.DRAINED


class RequestCompleter:
    def __init__(
        self,
        requests: UnsentRequests,
        store: DocumentStore,
        sender: MessageSender,
        observer: CompleterObserver,
        *,
        clock: Clock = SYSTEM_CLOCK,
        policy: CompleterPolicy | None = None,
    ) -> None:
        self._requests = requests
        self._store = store
        self._sender = sender
        self._observer = observer
        self._clock = clock
        self._policy = policy or CompleterPolicy()

    async def run(self) -> CompleterReport:
        """Send what is unsent, oldest first, page by page, then report the run. Raises
        ``CompletionIncomplete`` when a record was left unsent (reported first); a query that
        fails raises its own error and reports nothing."""
        policy = self._policy
        now = self._clock.now()
        report = CompleterReport()
        answered = False
        full_last_page = False
        stopped = False
        report.end = RunEnd.FAILED  # until the query has answered to its end
        try:
            async for found in self._requests.unsent(policy.cutoff(now), policy.page_size):
                answered = True
                report.pages += 1
                page = [d for d in found if policy.is_unsent(d, now)]
                if page and not report.found:  # oldest first: the run's oldest age
                    started = _started_at(page[0])
                    assert started is not None  # is_unsent
                    report.oldest_age_s = max(0.0, (now - started).total_seconds())
                report.found += len(page)  # what the page holds, sent or not
                for document in page:
                    if not await self._complete(document, now, report):
                        stopped = True
                        break
                if stopped:
                    break
                if report.pages == MAX_PAGES_PER_RUN:
                    full_last_page = len(found) == policy.page_size
                    break
            answered = True  # the query answered, with nothing left (or nothing at all)
            if stopped or report.failed:
                report.end = RunEnd.FAILED
            else:
                report.end = RunEnd.PAGE_LIMIT if full_last_page else RunEnd.DRAINED
        finally:
            if answered:
                self._observer.completer_checked(
                    report.found, len(report.sent), report.failed, report.oldest_age_s, report.end
                )
        if report.failed:
            raise CompletionIncomplete(
                f"{report.failed} unsent request(s) left for the next run "
                f"(sent {len(report.sent)} of {report.found} found)"
            )
        return report

    async def _complete(
        self, document: Mapping[str, Any], now: datetime, report: CompleterReport
    ) -> bool:
        """Send one record's message and mark it; False when the run must stop (the queue
        refused a send for now)."""
        record_id = str(document.get(RequestField.ID))
        order_id = str(document.get(RequestField.ORDER_ID))
        try:
            intent = stored_intent(document)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            report.failed += 1  # not the edge's shape: an operator's to look at
            self._observer.request_not_completed(record_id, order_id, error)
            return True
        try:
            mark_error = await send_then_mark(self._store, self._sender, intent)
        except SendFailed as error:
            report.failed += 1
            self._observer.request_not_completed(record_id, order_id, error)
            return False
        except Exception as error:  # noqa: BLE001 - this record's, reported; the next one's tried
            report.failed += 1
            self._observer.request_not_completed(record_id, order_id, error)
            return True
        report.sent.append(intent.message_id)
        started = _started_at(document)
        age_s = max(0.0, (now - started).total_seconds()) if started is not None else 0.0
        self._observer.request_completed(order_id, intent.message_id, age_s, mark_error)
        return True


def stored_intent(document: Mapping[str, Any]) -> Intent:
    """The intent a request record holds, as the edge recorded it: its client and key (the
    record's id and its mark's), its message (MessageId, Subject, the exact body bytes) and
    its response. Raises ``KeyError``, ``TypeError`` or ``ValueError`` for another shape."""
    return read_request_record(document).intent(
        str(document[RequestField.CLIENT_ID]),
        str(document[RequestField.IDEMPOTENCY_KEY]),
        str(document[RequestField.ORDER_ID]),
    )


def _started_at(document: Mapping[str, Any]) -> datetime | None:
    value = document.get(RequestField.STARTED_AT)
    if not isinstance(value, str):
        return None
    try:
        started = datetime.fromisoformat(value)
    except ValueError:
        return None
    return started if started.tzinfo is not None else None
