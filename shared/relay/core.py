"""The outbox relay: which outbox documents to publish, how each becomes a v1 event message,
and what to do when a send fails. No Azure imports: the topic and the container are
reached through the two ports below (``EventPublisher``, ``OutboxStore``).

Guarantee: every pending outbox document is published at least once, and never skipped silently.
The change-feed trigger checkpoints its lease when an invocation returns; an invocation that
raises is re-run by the function's retry policy (unbounded: ``shared.triggers.RUNTIME_RETRY``), so
a document stays reachable until its invocation succeeds. An invocation therefore returns only
when every pending document of its batch is either published (then marked ``dispatched``) or parked
(``status: parked``, with a reason, for an operator; never skipped).

What a failed send means, by what a retry can fix (as the consumer classifies store errors):

- the event itself (``EventRejected``: the broker refuses this message, e.g. too large; or the
  document does not make a valid v1 event): no retry can fix it: park it at once;
- the moment (``PublishUnavailable``: timeouts, connection loss, a busy namespace, a link or
  session the broker closed) or the system (``PublishMisconfigured``: RBAC, credential, a
  missing, deleted or disabled topic, a full topic): retry, without bound. Parking would turn
  every healthy event of an outage into a manual resubmission, and blocking the lease's range
  costs nothing: every other send of the range would fail too. This is loud: each failed
  attempt is counted (``orders.relay.failed``) and logged at error level, and the relay lag
  grows (alerts in infra/);
- anything else (an exception nobody classified): it may belong to the event, and unbounded
  retries would then block every later order of its lease range behind one poison event; so
  it is counted against the event, and the event parked after ``park_after_attempts`` of its
  own failures. Never the invocation's retry count: after an outage that count is high for
  every healthy event of the batch, and one odd error would park them all.

A fault is charged to an event only when it follows that event and no other: when a publish of
several events reports the event's own fault or an unclassified error (a refused send is
reported for every event in it), each of those events is published again alone, and only what
fails alone counts (``_isolate``). The isolation stops at the first alone send that fails for
the moment or the system: the link is bad, and the others are retried as they are.

The count of an event's own failures lives in the relay's memory, keyed by eventId (one relay
per worker process: the change-feed invocations and the watchdog share it), not on the outbox
document: writing it there would cost a write per failure in an outage, and each write changes
the document's etag, so the change feed would deliver it again as a new version and the batch's
marks in flight would meet a 412. A restart forgets the counts (as a rebalanced lease does):
that only delays parking, it never loses or skips an event. The map is bounded
(``RelayPolicy.max_tracked_failures``, the oldest forgotten first) for the same reason.

Crash windows (each safe; tests/relay/test_crash_windows.py):

- before the send: nothing happened; the lease was not checkpointed, the batch comes back;
- after the send, before the mark: the batch comes back and is published again with the same
  MessageId (= eventId): the topic's duplicate detection drops the copy within its window (P1D),
  and downstream consumers deduplicate on eventId beyond it;
- during the mark: the patch is conditional on the etag the change feed delivered. Committed, the
  replayed batch's stale etag makes the next mark a no-op (412: already dispatched); not
  committed, it is the previous window;
- a mark that fails (the send succeeded): the event counts as published, and the invocation
  still asks for a retry (``RelayIncomplete``), whose republish the topic drops and whose mark
  completes the document. Returning instead would checkpoint past a document left pending.

Marks and parks run concurrently, at most ``RelayPolicy.max_concurrent_updates`` at a time per
relay (one per worker process: every lease's invocation and the watchdog share the bound). The
trigger runs one invocation at a time per lease and one instance per lease ("A lease is owned by
one instance at any time", learn.microsoft.com/azure/cosmos-db/nosql/change-feed-processor,
Dynamic scaling; the processing life cycle reads, delivers, checkpoints, then reads again), so
one patch round trip after another would cap a lease at 1 / round trip events per second
(100/s at Cosmos DB's 10 ms: docs/capacity.md, "The relay at scale"). Concurrency changes no
crash window: each update is still conditional on its own etag, the invocation still waits for
every update before it returns or raises ``RelayIncomplete``, and a crash (a ``BaseException``)
cancels the updates in flight and escapes as itself, leaving the batch to come back whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from idempotent_consumer import SYSTEM_CLOCK, Clock, InvalidMessage, bound

from shared.consumer.contract import (
    EVENT_CONTENT_TYPE,
    ORDER_ACCEPTED_EVENT_TYPE,
    ORDER_ACCEPTED_SCHEMA_VERSION,
    encode_event,
    order_event_v1,
)
from shared.relay.outbox import (
    DISPATCHED_TTL_S,
    OutboxField,
    OutboxRef,
    is_pending_outbox,
    optional_text,
    reference,
)

# Reasons a document is parked with (bounded set, like the consumer's dead-letter reasons).
PARKED_INVALID_EVENT = "InvalidOutboxEvent"
PARKED_REJECTED = "RejectedByBroker"
PARKED_RETRIES_EXHAUSTED = "RetriesExhausted"


# ---- errors the publisher adapter raises, classified by what a retry can fix ----------------


class PublishError(Exception):
    """Base of the errors an ``EventPublisher`` reports for a message."""


class EventRejected(PublishError):
    """The broker refuses this message itself (e.g. larger than the entity allows)."""


class PublishUnavailable(PublishError):
    """Timeouts, connection loss, a busy namespace: the moment is wrong."""


class PublishMisconfigured(PublishError):
    """Authentication, authorisation, a missing/disabled/full topic: the system is wrong."""


class RelayIncomplete(Exception):
    """Raised by an invocation that must be retried: some pending events were not published
    (nor parked). The host re-runs the batch under the function's retry policy."""


class FailureKind(enum.StrEnum):
    EVENT = "event"
    TRANSIENT = "transient"
    SYSTEMIC = "systemic"
    UNEXPECTED = "unexpected"


def classify(error: BaseException) -> FailureKind:
    if isinstance(error, EventRejected | InvalidMessage):
        return FailureKind.EVENT
    if isinstance(error, PublishUnavailable):
        return FailureKind.TRANSIENT
    if isinstance(error, PublishMisconfigured):
        return FailureKind.SYSTEMIC
    return FailureKind.UNEXPECTED


@dataclass(frozen=True, slots=True)
class RelayPolicy:
    """When a failed event is parked instead of retried, and how many outbox updates (marks and
    parks) one relay keeps in flight (see the module docstring)."""

    # An event's own unclassified failures (each a send of it alone) before it is parked:
    # ~25 min of the runtime's 5 s..5 min exponential backoff when it fails on every retry.
    park_after_attempts: int = 10
    # Events whose failures are counted at once (the oldest forgotten beyond it: a restart's
    # effect, a delayed park). Far above one process's pending events with unclassified errors.
    max_tracked_failures: int = 10_000
    # Patches in flight per worker process, every lease's invocation and the watchdog together.
    # An invocation of up to 300 documents (function_app.py, max_items_per_invocation) carries
    # about 100 events: 64 at a time mark them in two round trips. The bound keeps them, with
    # the consumer's 16 concurrent deliveries (host.json maxConcurrentCalls) should they share
    # an instance, under the 100 connections of the app's one Cosmos client (aiohttp's
    # TCPConnector default limit; azure-core opens a plain aiohttp.ClientSession,
    # azure/core/pipeline/transport/_aiohttp.py:196), so no patch waits for a connection.
    max_concurrent_updates: int = 64

    def __post_init__(self) -> None:
        if self.max_concurrent_updates < 1:
            raise ValueError("max_concurrent_updates must be at least 1")
        if self.max_tracked_failures < 1:
            raise ValueError("max_tracked_failures must be at least 1")

    def should_park(self, kind: FailureKind, failures: int) -> bool:
        """``failures``: the event's own failures of ``kind`` so far, this one included, each a
        send of the event alone (see the module docstring); never the invocation's retries."""
        if kind is FailureKind.EVENT:
            return True
        if kind is FailureKind.UNEXPECTED:
            return failures >= self.park_after_attempts
        return False


# ---- what is published ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboundEvent:
    """One v1 event message (OrderAccepted, OrderAmended, OrderCancelled), transport-neutral;
    the publisher adapter turns it into a ``ServiceBusMessage`` (MessageId = ``event_id``)."""

    event_id: str
    order_id: str
    reference: OutboxRef  # the outbox document's version it was built from: marked or parked
    body: bytes
    created_at: datetime
    correlation_id: str | None
    causation_id: str | None
    application_properties: Mapping[str, str | int]
    subject: str = ORDER_ACCEPTED_EVENT_TYPE
    order_version: int = 1
    content_type: str = EVENT_CONTENT_TYPE
    # The consumer's trace context, if the outbox document carries it: the publish span links it.
    stored_traceparent: str | None = None

    @property
    def document_id(self) -> str:
        return self.reference.document_id

    def with_traceparent(self, traceparent: str | None) -> OutboundEvent:
        if traceparent is None:
            return self
        properties = {**self.application_properties, "traceparent": traceparent}
        return dataclasses.replace(self, application_properties=properties)


def build_event(document: Mapping[str, Any]) -> OutboundEvent:
    """The v1 message of one pending outbox document (OrderAccepted, OrderAmended or
    OrderCancelled, by its ``eventType``), or ``InvalidMessage``. Its Subject is the event type."""
    payload = document.get(OutboxField.PAYLOAD)
    if (
        document.get(OutboxField.EVENT_TYPE) == ORDER_ACCEPTED_EVENT_TYPE
        and isinstance(payload, Mapping)
        and "orderVersion" not in payload
    ):
        # Written before the lifecycle: an OrderAccepted is version 1, and says so on the wire.
        payload = {**payload, "orderVersion": 1}
    body = order_event_v1(
        {
            "schemaVersion": ORDER_ACCEPTED_SCHEMA_VERSION,
            "eventId": document.get(OutboxField.EVENT_ID),
            "eventType": document.get(OutboxField.EVENT_TYPE),
            "occurredAt": document.get(OutboxField.CREATED_AT),
            "payload": payload,
        }
    )
    order_id = body["payload"]["orderId"]
    stored_order_id = document.get(OutboxField.ORDER_ID)
    if stored_order_id != order_id:
        raise InvalidMessage(
            "InvalidPayload",
            f"outbox document's orderId {bound(str(stored_order_id), 80)!r} differs "
            f"from its payload's {order_id!r}",
        )
    properties: dict[str, str | int] = {
        "eventType": body["eventType"],
        "schemaVersion": body["schemaVersion"],
    }
    causation_id = optional_text(document.get(OutboxField.CAUSATION_ID))
    if causation_id is not None:
        properties["causationId"] = causation_id
    return OutboundEvent(
        event_id=body["eventId"],
        order_id=order_id,
        reference=reference(document),
        body=encode_event(body),
        created_at=datetime.fromisoformat(body["occurredAt"]),
        correlation_id=optional_text(document.get(OutboxField.CORRELATION_ID)),
        causation_id=causation_id,
        application_properties=properties,
        subject=body["eventType"],
        order_version=int(body["payload"]["orderVersion"]),
        stored_traceparent=optional_text(document.get(OutboxField.TRACEPARENT)),
    )


def in_version_order(events: Sequence[OutboundEvent]) -> list[OutboundEvent]:
    """The batch's events with each order's in increasing ``orderVersion``, the orders in the
    order they first appear. The change feed delivers one partition's changes in the order they
    were committed, and an order's events commit in increasing versions (each with its change,
    on the condition that the stored version is older), so this is the feed's own order; sorted
    anyway, so that no source of a batch (the watchdog's query, a feed read merged across
    ranges) can send a later version first."""
    first_seen: dict[str, int] = {}
    for position, event in enumerate(events):
        first_seen.setdefault(event.order_id, position)
    return sorted(events, key=lambda event: (first_seen[event.order_id], event.order_version))


# ---- ports ----------------------------------------------------------------------------------


class EventPublisher(Protocol):
    async def publish(self, events: Sequence[OutboundEvent]) -> list[BaseException | None]:
        """Send the events in as few sends as their size allows; one entry per event, aligned:
        None when its send succeeded, else the error (``PublishError`` when classified; a
        refused send's error for each of its events: the relay, not the publisher, tells whose
        fault it was by publishing them alone)."""
        ...


class OutboxStore(Protocol):
    """Conditional updates of outbox documents, each on the version read (``OutboxRef``: the
    etag the change feed or the watchdog's query delivered); the fields are
    ``shared.relay.outbox``'s patches."""

    async def mark_dispatched(
        self, document: OutboxRef, *, dispatched_at: datetime, ttl_s: int
    ) -> bool:
        """Set ``status: dispatched``, ``dispatchedAt`` and ``ttl``; False when the document
        changed since it was read (412: already marked by an earlier run) or is gone."""
        ...

    async def park(
        self, document: OutboxRef, *, parked_at: datetime, reason: str, description: str
    ) -> bool:
        """Set ``status: parked``, ``parkedAt``, ``parkedReason``, ``parkedDescription``; False
        when the document changed since it was read (or is gone)."""
        ...


class PublishObservation(Protocol):
    """One event's publish, as the observer follows it: started before the message is built."""

    @property
    def traceparent(self) -> str | None:
        """The W3C trace context the message carries (None: tracing is off)."""
        ...

    def published(self, lag_s: float) -> None:
        """Sent; ``lag_s`` from the order's acceptance to now."""
        ...

    def failed(self, error: BaseException, *, parked: bool = False) -> None:
        """Not sent; ``parked``: it will not be retried (``RelayObserver.parked`` follows)."""
        ...


class RelayObserver(Protocol):
    """What the relay reports (``shared.telemetry.relay.RelayTelemetry``: spans, metrics, logs).
    The core hands over facts and trace-context strings, never a span."""

    def start_publish(
        self, event_id: str, order_id: str, stored_traceparent: str | None = None
    ) -> PublishObservation:
        """``stored_traceparent``: the consumer's, from the outbox document, to link to."""
        ...

    def parked(self, event_id: str, order_id: str, reason: str, description: str) -> None: ...

    def mark_failed(self, event_id: str, order_id: str, error: BaseException) -> None:
        """Marking (or parking) an outbox document failed: the batch comes back."""
        ...

    def already_marked(self, document_id: str, event_id: str, order_id: str) -> None: ...

    def not_parked_again(self, document_id: str, event_id: str, order_id: str) -> None: ...


# ---- the application service ----------------------------------------------------------------


@dataclass
class RelayReport:
    """What one invocation did, by document id (tests and logs)."""

    published: list[str] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)
    retry: list[str] = field(default_factory=list)
    mark_failed: list[str] = field(default_factory=list)

    def in_batch_order(self, document_ids: Sequence[str]) -> None:
        """Order each list as the batch was (concurrent updates finish in any order)."""
        position = {document_id: index for index, document_id in enumerate(document_ids)}
        for ids in (self.published, self.parked, self.retry, self.mark_failed):
            ids.sort(key=lambda document_id: position.get(document_id, len(position)))


class _Update(enum.Enum):
    """What one conditional update of an outbox document came to."""

    DONE = "done"  # committed
    ALREADY = "already"  # changed since it was read (412) or gone: nothing to do
    FAILED = "failed"  # not committed: the batch must come back


class OutboxRelay:
    def __init__(
        self,
        publisher: EventPublisher,
        store: OutboxStore,
        observer: RelayObserver,
        *,
        clock: Clock = SYSTEM_CLOCK,
        policy: RelayPolicy | None = None,
        dispatched_ttl_s: int = DISPATCHED_TTL_S,
    ) -> None:
        self._publisher = publisher
        self._store = store
        self._observer = observer
        self._clock = clock  # the composition root's one clock (dispatchedAt, parkedAt, lag)
        self._policy = policy or RelayPolicy()
        self._ttl_s = dispatched_ttl_s
        # The bound of updates in flight, shared by every invocation of this relay (one relay
        # per event loop: the composition root builds it on the loop that uses it).
        self._updates = asyncio.Semaphore(self._policy.max_concurrent_updates)
        # eventId -> its own unclassified failures so far (see the module docstring).
        self._failures: OrderedDict[str, int] = OrderedDict()

    async def relay(self, documents: Sequence[Mapping[str, Any]]) -> RelayReport:
        """Publish the batch's pending outbox documents; raise ``RelayIncomplete`` if any must be
        retried (after marking what was sent, so the retry republishes as little as possible)."""
        report = RelayReport()
        events: list[OutboundEvent] = []
        invalid: list[tuple[Mapping[str, Any], str]] = []
        for document in documents:
            if not is_pending_outbox(document):
                continue
            try:
                events.append(build_event(document))
            except InvalidMessage as error:
                invalid.append((document, error.description))
        # Invalid documents are parked with the marks, after the send: one round of concurrent
        # updates per invocation, and nothing about them depends on the send.
        updates: list[Callable[[], Awaitable[None]]] = [
            self._parking(
                reference(document),
                PARKED_INVALID_EVENT,
                description,
                report,
                event_id=optional_text(document.get(OutboxField.EVENT_ID)),
                order_id=str(document.get(OutboxField.ORDER_ID)),
            )
            for document, description in invalid
        ]
        if events:
            updates += await self._publish(in_version_order(events), report)
        await self._run_bounded(updates)
        report.in_batch_order([str(document.get(OutboxField.ID)) for document in documents])
        self._raise_if_incomplete(report)
        return report

    async def _publish(
        self, events: Sequence[OutboundEvent], report: RelayReport
    ) -> list[Callable[[], Awaitable[None]]]:
        """Send the events in batches; the updates their results call for (marks, parks)."""
        observations = [
            self._observer.start_publish(event.event_id, event.order_id, event.stored_traceparent)
            for event in events
        ]
        stamped = [
            event.with_traceparent(observation.traceparent or event.stored_traceparent)
            for event, observation in zip(events, observations, strict=True)
        ]
        try:
            results = await self._publisher.publish(stamped)
            if len(stamped) > 1:
                results = await self._isolate(stamped, results)
        except BaseException as error:
            # The publisher reports per event; an escape (cancellation, a bug) ends every one.
            for observation in observations:
                observation.failed(error)
            raise

        now = self._clock.now()
        updates: list[Callable[[], Awaitable[None]]] = []
        for event, observation, failure in zip(stamped, observations, results, strict=True):
            if failure is None:
                self._failures.pop(event.event_id, None)
                observation.published((now - event.created_at).total_seconds())
                report.published.append(event.document_id)
                updates.append(self._marking(event, report))
                continue
            kind = classify(failure)
            failures = self._count_failure(event.event_id) if kind is FailureKind.UNEXPECTED else 1
            if self._policy.should_park(kind, failures):
                self._failures.pop(event.event_id, None)
                reason = PARKED_REJECTED if kind is FailureKind.EVENT else PARKED_RETRIES_EXHAUSTED
                description = f"{type(failure).__name__}: {failure}"
                if kind is FailureKind.UNEXPECTED:
                    description += f" ({failures} failures of this event sent alone)"
                description = bound(description)
                observation.failed(failure, parked=True)
                updates.append(
                    self._parking(
                        event.reference,
                        reason,
                        description,
                        report,
                        event_id=event.event_id,
                        order_id=event.order_id,
                    )
                )
            else:
                observation.failed(failure)
                report.retry.append(event.document_id)
        return updates

    async def _isolate(
        self, events: Sequence[OutboundEvent], results: list[BaseException | None]
    ) -> list[BaseException | None]:
        """Publish alone each event of a multi-event publish whose failure would be charged to
        it (its own fault, or unclassified): a refused send names no culprit, so only what fails
        alone is the event's. Stops at the first alone send that fails for the moment or the
        system: the link is bad, and the rest keep that error (retried, not charged).

        An order's events go out in version order (docs/events.md): once one of them is not
        published, the later ones of the same order in this batch are held (unavailable: sent
        again with it), never sent ahead of it, unless it is parked now (set aside for an
        operator; its republish comes after them). The adapter keeps that order for one publish
        (its batches go in order, and it stops at the first that fails)."""
        isolated = list(results)
        suspects = [
            index
            for index, failure in enumerate(results)
            if failure is not None
            and classify(failure) in (FailureKind.EVENT, FailureKind.UNEXPECTED)
        ]
        unpublished_orders: set[str] = set()
        for position, index in enumerate(suspects):
            event = events[index]
            if event.order_id in unpublished_orders:
                isolated[index] = PublishUnavailable(
                    f"held: an earlier event of order {event.order_id} was not published"
                )
                continue
            [alone] = await self._publisher.publish([event])
            isolated[index] = alone
            if alone is None:
                continue
            kind = classify(alone)
            # One that is parked now is set aside for good: the later versions go on.
            if not self._policy.should_park(kind, self._failures.get(event.event_id, 0) + 1):
                unpublished_orders.add(event.order_id)
            if kind in (FailureKind.TRANSIENT, FailureKind.SYSTEMIC):
                for rest in suspects[position + 1 :]:
                    isolated[rest] = alone
                break
        return isolated

    def _count_failure(self, event_id: str) -> int:
        """One more unclassified failure of this event sent alone; its count so far."""
        failures = self._failures.pop(event_id, 0) + 1
        self._failures[event_id] = failures  # the most recent last
        while len(self._failures) > self._policy.max_tracked_failures:
            self._failures.popitem(last=False)
        return failures

    async def _run_bounded(self, updates: Sequence[Callable[[], Awaitable[None]]]) -> None:
        """Run every update, at most ``max_concurrent_updates`` of this relay at once; return
        when all are done. Each update handles its own errors; what escapes one (a crash,
        cancellation) cancels the others and is re-raised as itself, not as a group."""
        if not updates:
            return
        pending = iter(updates)

        async def worker() -> None:
            for update in pending:  # shared: each update is taken by one worker
                async with self._updates:
                    await update()

        workers = min(len(updates), self._policy.max_concurrent_updates)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
        except BaseExceptionGroup as escaped:
            raise escaped.exceptions[0] from None

    def _marking(self, event: OutboundEvent, report: RelayReport) -> Callable[[], Awaitable[None]]:
        async def mark() -> None:
            if await self._mark_dispatched(event) is _Update.FAILED:
                report.mark_failed.append(event.document_id)

        return mark

    def _parking(
        self,
        document: OutboxRef,
        reason: str,
        description: str,
        report: RelayReport,
        *,
        event_id: str | None,
        order_id: str,
    ) -> Callable[[], Awaitable[None]]:
        async def park() -> None:
            outcome = await self._park(
                document, reason, description, event_id=event_id, order_id=order_id
            )
            if outcome is _Update.DONE:
                report.parked.append(document.document_id)
            elif outcome is _Update.FAILED:
                report.retry.append(document.document_id)

        return park

    async def _mark_dispatched(self, event: OutboundEvent) -> _Update:
        try:
            marked = await self._store.mark_dispatched(
                event.reference, dispatched_at=self._clock.now(), ttl_s=self._ttl_s
            )
        except Exception as error:  # noqa: BLE001 - sent: the retry's republish is dropped
            self._observer.mark_failed(event.event_id, event.order_id, error)
            return _Update.FAILED
        if not marked:
            self._observer.already_marked(event.document_id, event.event_id, event.order_id)
            return _Update.ALREADY
        return _Update.DONE

    async def _park(
        self,
        document: OutboxRef,
        reason: str,
        description: str,
        *,
        event_id: str | None,
        order_id: str,
    ) -> _Update:
        document_id = document.document_id
        event_id = event_id or document_id
        try:
            parked = await self._store.park(
                document, parked_at=self._clock.now(), reason=reason, description=description
            )
        except Exception as error:  # noqa: BLE001 - not parked: it must be retried, never skipped
            self._observer.mark_failed(event_id, order_id, error)
            return _Update.FAILED
        if not parked:
            # Changed since it was read: a retry of this batch meets the document an earlier
            # run parked (counting it again would page twice), or an operator's newer version,
            # which the change feed delivers on its own.
            self._observer.not_parked_again(document_id, event_id, order_id)
            return _Update.ALREADY
        self._observer.parked(event_id, order_id, reason, description)
        return _Update.DONE

    @staticmethod
    def _raise_if_incomplete(report: RelayReport) -> None:
        """Retry the batch if an event was neither published nor parked, or was published but
        not marked. Returning would checkpoint the lease past a document left ``pending`` for
        ever (without ttl); the retry instead republishes it, which the topic's duplicate
        detection drops, and marks it."""
        unfinished = report.retry + report.mark_failed
        if unfinished:
            raise RelayIncomplete(
                f"{len(report.retry)} outbox event(s) not published and {len(report.mark_failed)}"
                " not marked, retrying the batch: " + bound(", ".join(unfinished), 300)
            )
