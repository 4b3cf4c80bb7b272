"""The Functions host's Cosmos DB trigger, emulated over a container that has no change feed
(cosmosdb-server has none): read the changes, deliver them in batches to the Cosmos DB-triggered
function through Microsoft's worker (``local.standins.worker.FunctionsWorker``), checkpoint only
after a successful invocation, re-run a failed one as the function's retry policy says.

It keeps only the host's side, as ``local.standins.host`` does for the Service Bus trigger:
- finds the Cosmos DB-triggered function in the worker's metadata (its raw bindings), resolves
  ``%COSMOS_CONTAINER%`` from the app settings and checks it is the container it reads;
- sends each batch as one invocation request: the documents as ``json`` typed data (the list the
  trigger delivers), and the retry context (``retry_count``, the policy's ``max_retry_count``);
- reads the retry policy from the worker's metadata (``RpcRetryOptions``: strategy, intervals,
  count), never from a copy of the app's decorator;
- an invocation the worker reports as failed (``succeeded=False``) is a failed batch: no
  checkpoint, re-run with the same documents after the policy's delay, its ``retry_count``
  rising, for ever when ``max_retry_count`` is -1 (the trigger checkpoints when an invocation
  returns and, without a retry policy, does not re-run a failed batch:
  learn.microsoft.com/azure/cosmos-db/nosql/troubleshoot-changefeed-functions; retry policies,
  -1 unbounded: learn.microsoft.com/azure/azure-functions/functions-bindings-error-pages). A
  crashed worker (a ``BaseException`` escaping the invocation) loses its retry count; the batch
  is delivered again from the last checkpoint by the next emulator built on the same ``Lease``.

Where it starts (the trigger's start position): when its lease has no state yet (a first start,
or a recreated ``leases`` container), from the beginning of the container if the binding says
``startFromBeginning: true``, otherwise **from now**: every document written before the lease
existed is never delivered, unless it changes again. This is the Cosmos DB change feed
processor's rule, which the trigger uses: StartFromBeginning "is only used when: (1) Lease
store is not initialized and is ignored if a lease for partition exists and has continuation
token", and "By default it's start from current (false)"
(learn.microsoft.com/dotnet/api/microsoft.azure.documents.changefeedprocessor
.changefeedprocessoroptions.startfrombeginning); for the trigger's own option: "Reading from the
beginning is only effective the first time the trigger starts, as in subsequent runs, the
checkpoints are already stored. Setting this option to true when there are leases already
created has no effect" (learn.microsoft.com/javascript/api/@azure/functions
/cosmosdbv4triggeroptions, startFromBeginning). Here "from now" is taken literally: the lease
is initialised on the emulator's first read, and every document that exists then counts as
seen.

What a change is (latest-version mode, one lease): the latest version of a created or updated
document ("only the most recent change for a given item" is delivered, and deletes are not,
learn.microsoft.com/azure/cosmos-db/nosql/change-feed-modes, latest version mode). The lease
remembers the etag it checkpointed for each document, and a read returns every document whose
etag differs, in order of modification (``_ts``), at most
``maxItemsPerInvocation`` at a time (the binding's, as the host reads it; without one, the
host's default of 100: "Azure Cosmos DB | maxItemsPerInvocation | 100",
learn.microsoft.com/azure/azure-functions/functions-target-based-scaling); a document changed
twice before it is read is delivered once, in its latest version; the relay's own marks come
back as changes, as in Azure.

Latency: cosmosdb-server answers in well under a millisecond, and this emulator reads the feed
once for many batches, where the host reads one page per batch. ``read_round_trip_s`` (0 by
default) is real time slept before each batch's invocation, standing for that page's read: the
relay bench (``bench.relay``) sets it, so that a lease's invocations are as far apart as a
feed read makes them (the value is the bench's assumption, stated there).

What it does not reproduce: leases across instances (one consumer owns the whole container, and
its lease lives in memory, not in the ``leases`` container: no lease stealing, no load
balancing, no duplicate delivery during rebalancing), partition splits and merges (one range,
one continuation), the order of changes within one second of ``_ts`` (cosmosdb-server's ``_ts``
has one-second resolution; the real feed orders by LSN per partition: here, within a second, by
creation, ``_modification_order``, so a document changed in the second of a newer one's creation
may come first), the all-versions-and-
deletes mode (intermediate versions, deletes and TTL expiries are never delivered),
``feedPollDelay``, ``startFromTime``, the lease's continuation tokens (a "from now" start here
marks the existing documents seen; the service starts at the current LSN), and the host's
random spread of retry delays.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import SYSTEM_CLOCK, Clock

from local.standins.host import resolve_setting
from local.standins.worker import FunctionsWorker, IndexedFunction, InvocationResult, Json

# RpcRetryOptions.RetryStrategy.fixed_delay (the host's enum; any other is exponential_backoff)
_FIXED_DELAY = 1
# The trigger's maxItemsPerInvocation when the binding sets none (target-based scaling's table of
# defaults, learn.microsoft.com/azure/azure-functions/functions-target-based-scaling).
DEFAULT_MAX_ITEMS_PER_INVOCATION = 100

# A feed read that cannot reach the server is tried again (``ChangeFeedEmulator._read_since``).
FEED_READ_ATTEMPTS = 5
FEED_READ_RETRY_S = 2.0


@dataclass(frozen=True)
class RetrySchedule:
    """The function's retry policy as the host applies it to a failed invocation."""

    max_retry_count: int  # -1: unbounded; 0: no retry policy
    minimum_s: float
    maximum_s: float
    exponential: bool = True

    @classmethod
    def of(cls, function: IndexedFunction) -> RetrySchedule:
        """From the worker's metadata of ``function`` (its ``RpcRetryOptions``)."""
        options = function.retry_options
        if options is None:
            return cls(0, 0.0, 0.0)
        if options.retry_strategy == _FIXED_DELAY:
            delay = options.delay_interval.ToTimedelta().total_seconds()
            return cls(function.max_retry_count, delay, delay, exponential=False)
        return cls(
            function.max_retry_count,
            options.minimum_interval.ToTimedelta().total_seconds(),
            options.maximum_interval.ToTimedelta().total_seconds(),
        )

    def allows(self, retry_count: int) -> bool:
        return self.max_retry_count < 0 or retry_count <= self.max_retry_count

    def delay_s(self, retry_count: int) -> float:
        """Before retry ``retry_count`` (1-based): the minimum, doubled per retry, capped (or the
        fixed delay)."""
        if not self.exponential:
            return self.minimum_s
        return float(min(self.maximum_s, self.minimum_s * 2 ** (retry_count - 1)))


@dataclass
class Lease:
    """The leases container's state for the one range: the etag checkpointed per document, and
    the ``_ts`` before which every change is checkpointed (a read skips older documents).
    ``initialised`` False: no lease exists yet (a first start, a recreated container); the
    trigger's start position applies on its first read, and never again."""

    checkpoint: dict[str, str] = field(default_factory=dict)
    since_ts: int = 0
    initialised: bool = False


@dataclass
class ChangeFeedStats:
    skipped_at_start: int = 0  # documents a "from now" start never delivers
    invocations: int = 0
    failed_invocations: int = 0
    delivered_documents: int = 0
    errors: list[str] = field(default_factory=list)  # the worker's messages of failed invocations
    batch_sizes: list[int] = field(default_factory=list)
    stalled: bool = False  # a batch still failed after ``max_attempts_per_batch``


def _modification_order(document: Mapping[str, Any]) -> tuple[int, int]:
    """``_ts`` (seconds), then, within one second, the order of creation: cosmosdb-server
    numbers the documents it creates (``_rid``'s document part, a little-endian int32 at bytes
    8-11: @vercel/cosmosdb-server lib/account/documents.js ``_rid``) and its query answers within
    one ``_ts`` in no order of writing. The real feed orders a partition's changes by LSN: two
    versions of one order committed in the same second reach the relay in commit order, which
    for documents created and not changed since (a pending outbox event) is their creation
    order."""
    try:
        created = int.from_bytes(base64.b64decode(str(document.get("_rid")))[8:12], "little")
    except (ValueError, TypeError):
        created = 0
    return int(document.get("_ts", 0)), created


def _key(document: Mapping[str, Any]) -> str:
    return json.dumps([document.get("orderId"), document["id"]])


class ChangeFeedEmulator:
    """The host's Cosmos DB trigger for one function of a started worker, on one container."""

    def __init__(
        self,
        container: ContainerProxy,
        worker: FunctionsWorker,
        *,
        app_settings: Mapping[str, str] | None = None,
        function_name: str | None = None,
        lease: Lease | None = None,
        clock: Clock = SYSTEM_CLOCK,
        max_items_per_invocation: int | None = None,
        start_from_beginning: bool | None = None,
        read_round_trip_s: float = 0.0,
    ) -> None:
        self.container = container
        self.worker = worker
        self.function = worker.triggered_function("cosmosDBTrigger", function_name)
        trigger = self.function.trigger
        self.trigger_name = str(trigger["name"])
        if app_settings is not None:
            watched = resolve_setting(str(trigger["containerName"]), app_settings)
            if watched != container.id:
                raise LookupError(
                    f"function watches {watched!r}, the container is {container.id!r}"
                )
        self.retry = RetrySchedule.of(self.function)
        # The binding's ``startFromBeginning`` (the host's default: false), unless a caller
        # reproduces another deployment's start on purpose.
        self.start_from_beginning = (
            bool(trigger.get("startFromBeginning", False))
            if start_from_beginning is None
            else start_from_beginning
        )
        self.lease = lease or Lease()
        self.clock = clock
        # The binding's maxItemsPerInvocation, unless a caller bounds batches on purpose.
        self.max_items = (
            int(trigger.get("maxItemsPerInvocation") or DEFAULT_MAX_ITEMS_PER_INVOCATION)
            if max_items_per_invocation is None
            else max_items_per_invocation
        )
        self.read_round_trip_s = read_round_trip_s
        self.stats = ChangeFeedStats()

    async def read_changes(self) -> list[dict[str, Any]]:
        """The next batch after the checkpoint (latest versions, oldest modification first)."""
        return (await self._changes_after_checkpoint())[: self.max_items]

    async def _changes_after_checkpoint(self) -> list[dict[str, Any]]:
        if not self.lease.initialised:
            await self._initialise_lease()
        documents = await self._read_since(self.lease.since_ts)
        changed = [d for d in documents if self.lease.checkpoint.get(_key(d)) != d.get("_etag")]
        changed.sort(key=_modification_order)
        return changed

    async def _read_since(self, since_ts: int) -> list[dict[str, Any]]:
        """One read of the feed, tried again after a failure to reach the server. The host's
        trigger runs on the change feed processor, which reports an error of its execution and
        goes on (``ChangeFeedProcessorBuilder.WithErrorNotification``,
        learn.microsoft.com/dotnet/api/microsoft.azure.cosmos.changefeedprocessorbuilder);
        the schedule of its retries is not documented, so here: ``FEED_READ_ATTEMPTS``,
        ``FEED_READ_RETRY_S`` apart, then the error. A read here is a query that scans the local
        container (the server has no change feed and no index), which a busy machine with a
        large container can make slower than a connection timeout."""
        for attempt in range(1, FEED_READ_ATTEMPTS + 1):
            try:
                return [
                    document
                    async for document in self.container.query_items(
                        "SELECT * FROM c WHERE c._ts >= @since",
                        parameters=[{"name": "@since", "value": since_ts}],
                    )
                ]
            except (ServiceRequestError, ServiceResponseError, TimeoutError):
                if attempt == FEED_READ_ATTEMPTS:
                    raise
                await asyncio.sleep(FEED_READ_RETRY_S)
        raise AssertionError("unreachable")

    async def _initialise_lease(self) -> None:
        """The first read of a lease with no state: from the beginning, or from now (every
        existing document counts as seen; only a later change of it is delivered)."""
        self.lease.initialised = True
        if self.start_from_beginning:
            return
        async for document in self.container.query_items("SELECT * FROM c"):
            self.lease.checkpoint[_key(document)] = str(document.get("_etag"))
            self.lease.since_ts = max(self.lease.since_ts, int(document.get("_ts", 0)))
            self.stats.skipped_at_start += 1

    async def invoke(
        self, documents: list[dict[str, Any]], *, retry_count: int = 0
    ) -> InvocationResult:
        """One invocation request for one batch, as the host sends it; no checkpoint. A failed
        invocation is recorded in ``stats``."""
        self.stats.invocations += 1
        self.stats.delivered_documents += len(documents)
        result = await self.worker.invoke(
            self.function.name,
            {self.trigger_name: Json(documents)},
            retry_count=retry_count,
        )
        if not result.succeeded:
            self.stats.failed_invocations += 1
            self.stats.errors.append(str(result.error))
        return result

    async def drain(
        self, *, max_attempts_per_batch: int | None = None, max_batches: int = 10_000
    ) -> ChangeFeedStats:
        """Deliver batches until no change is left. A batch that fails is retried per the policy;
        ``max_attempts_per_batch`` bounds the emulation (not the host) so a test can observe a
        stuck lease: the run then stops with ``stalled`` set and the lease not advanced."""
        # One read of the feed is a page, delivered in batches of ``max_items``, each checkpointed
        # after its invocation succeeds; the next read starts after the checkpoint. Reading the
        # feed anew for every batch would cost a scan of the container per batch here
        # (cosmosdb-server's ``_ts`` filter is coarse), quadratic in the container's size.
        batches = 0
        while batches < max_batches:
            changes = await self._changes_after_checkpoint()
            if not changes:
                return self.stats
            for start in range(0, len(changes), self.max_items):
                if batches == max_batches:
                    break
                batches += 1
                batch = changes[start : start + self.max_items]
                self.stats.batch_sizes.append(len(batch))
                if self.read_round_trip_s:
                    await asyncio.sleep(self.read_round_trip_s)  # the page's read, in real time
                if not await self._deliver(batch, max_attempts_per_batch):
                    self.stats.stalled = True
                    return self.stats
                for document in batch:  # checkpoint: only after the invocation succeeded
                    self.lease.checkpoint[_key(document)] = str(document.get("_etag"))
                # The batch is the oldest changes: all before its last ``_ts`` are now
                # checkpointed (later changes of a document get a newer ``_ts``); equal ones may
                # remain.
                self.lease.since_ts = max(self.lease.since_ts, int(batch[-1].get("_ts", 0)))
        raise RuntimeError(f"change feed not drained after {max_batches} batches")

    async def _deliver(self, batch: list[dict[str, Any]], max_attempts: int | None) -> bool:
        retry_count = 0
        while True:
            result = await self.invoke(batch, retry_count=retry_count)
            if result.succeeded:
                return True
            retry_count += 1
            if max_attempts is not None and retry_count >= max_attempts:
                return False
            if not self.retry.allows(retry_count):
                # No policy, or a bounded one exhausted: the host checkpoints past the batch,
                # which is lost (the relay's policy is unbounded for exactly this reason).
                return True
            await self.clock.sleep(self.retry.delay_s(retry_count))
