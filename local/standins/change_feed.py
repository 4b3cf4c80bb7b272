"""The Functions host's Cosmos DB trigger, emulated over the container's change feed (read
through azure-cosmos's ``ContainerProxy.query_items_change_feed``, served by the local server's
``cosmos_change_feed.js``): read the changes after the lease's continuation, deliver them in
batches to the Cosmos DB-triggered function through Microsoft's worker
(``local.standins.worker.FunctionsWorker``), checkpoint only after a successful invocation,
re-run a failed one as the function's retry policy says.

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
/cosmosdbv4triggeroptions, startFromBeginning). Here "from now" is the feed's own: the lease's
first read asks for the changes from now (``If-None-Match: *``) and keeps the continuation the
service answers, the feed's current LSN, at once.

What a change is (latest-version mode, one lease): the latest version of a created or updated
document ("only the most recent change for a given item" is delivered, and deletes are not,
learn.microsoft.com/azure/cosmos-db/nosql/change-feed-modes, latest version mode), in the
order of modification (the feed's LSN order). The lease keeps one continuation, the SDK's
token after the last batch checkpointed; a read is one page of the feed after it, at most
``maxItemsPerInvocation`` documents (the binding's, as the host reads it; without one, the
host's default of 100: "Azure Cosmos DB | maxItemsPerInvocation | 100",
learn.microsoft.com/azure/azure-functions/functions-target-based-scaling), except that a
transaction's documents (an order and its outbox event, written in one batch) are never split:
"the number of items received could be higher than the specified value so that the items
changed by the same transaction are returned as part of one atomic batch"
(learn.microsoft.com/azure/azure-functions/functions-bindings-cosmosdb-v2-trigger,
maxItemsPerInvocation, in words about stored procedures; a transactional batch's items share
one LSN too: azure-cosmos-dotnet-v3#2644). A document changed twice before it is read is
delivered once, in its latest version; the relay's own marks come back as changes, as in
Azure.

Latency: the local server answers a page in about a millisecond. ``read_round_trip_s`` (0 by
default) is real time slept before each batch's invocation, standing for the rest of a page's
read in Azure: the relay bench (``bench.relay``) sets it, so that a lease's invocations are as
far apart as a feed read makes them (the value is the bench's assumption, stated there).

What it does not reproduce: leases across instances (one consumer owns the whole container, and
its lease lives in memory, not in the ``leases`` container: no lease stealing, no load
balancing, no duplicate delivery during rebalancing), partition splits and merges (one range,
one continuation; the local server has one), the all-versions-and-deletes mode (intermediate
versions, deletes and TTL expiries are never delivered), ``feedPollDelay``, ``startFromTime``,
the moment a "from now" lease stores its continuation (here at its first read; a restart
before its first checkpoint does not start from a later now), and the host's random spread of
retry delays.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
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

# A feed read that cannot reach the server is tried again (``ChangeFeedEmulator._read``).
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
    """The leases container's state for the one range: the continuation checkpointed (the SDK's
    token after the last batch that succeeded; None: none yet, the start position applies).
    ``initialised`` False: no lease exists yet (a first start, a recreated container); the
    trigger's start position applies on its first read, and never again."""

    continuation: str | None = None
    initialised: bool = False


@dataclass
class ChangeFeedStats:
    # The documents in the container when a lease started "from now" (never delivered unless
    # they change): the emulation's own figure, counted once, which the host does not report.
    skipped_at_start: int = 0
    invocations: int = 0
    failed_invocations: int = 0
    delivered_documents: int = 0
    errors: list[str] = field(default_factory=list)  # the worker's messages of failed invocations
    batch_sizes: list[int] = field(default_factory=list)
    stalled: bool = False  # a batch still failed after ``max_attempts_per_batch``


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
        """The next batch after the checkpoint: one page of the feed, oldest change first."""
        batch, _ = await self._read_page()
        return batch

    async def _read_page(self) -> tuple[list[dict[str, Any]], str]:
        """One page after the lease's continuation, and the continuation after it."""
        if not self.lease.initialised:
            await self._initialise_lease()
        return await self._read(self.lease.continuation)

    async def _read(
        self, continuation: str | None, *, from_now: bool = False
    ) -> tuple[list[dict[str, Any]], str]:
        """One read of the feed, tried again after a failure to reach the server. The host's
        trigger runs on the change feed processor, which reports an error of its execution and
        goes on (``ChangeFeedProcessorBuilder.WithErrorNotification``,
        learn.microsoft.com/dotnet/api/microsoft.azure.cosmos.changefeedprocessorbuilder);
        the schedule of its retries is not documented, so here: ``FEED_READ_ATTEMPTS``,
        ``FEED_READ_RETRY_S`` apart, then the error."""
        for attempt in range(1, FEED_READ_ATTEMPTS + 1):
            try:
                feed = (
                    self.container.query_items_change_feed(
                        continuation=continuation, max_item_count=self.max_items
                    )
                    if continuation is not None
                    else self.container.query_items_change_feed(
                        start_time="Now" if from_now else "Beginning",
                        max_item_count=self.max_items,
                    )
                )
                return await self._first_page(feed.by_page())
            except (ServiceRequestError, ServiceResponseError, TimeoutError):
                if attempt == FEED_READ_ATTEMPTS:
                    raise
                await asyncio.sleep(FEED_READ_RETRY_S)
        raise AssertionError("unreachable")

    async def _first_page(
        self, pages: AsyncIterator[AsyncIterator[dict[str, Any]]]
    ) -> tuple[list[dict[str, Any]], str]:
        try:
            page: AsyncIterator[dict[str, Any]] | None = await anext(pages)
        except StopAsyncIteration:  # the SDK ends the iteration on a page with no items (304)
            page = None
        # The continuation after this read, where Learn's pull-model page reads it
        # ("continuation_token = container.client_connection.last_response_headers['etag']",
        # learn.microsoft.com/azure/cosmos-db/nosql/change-feed-pull-model, Python): taken
        # before any other await, so no other request on this client can have replaced it.
        continuation = str(self.container.client_connection.last_response_headers["etag"])
        documents = [document async for document in page] if page is not None else []
        return documents, continuation

    async def _initialise_lease(self) -> None:
        """The first read of a lease with no state: from the beginning (no continuation until
        the first checkpoint), or from now (the feed's current position, kept at once)."""
        if not self.start_from_beginning:
            self.stats.skipped_at_start = len(
                [i async for i in self.container.query_items("SELECT VALUE c.id FROM c")]
            )
            _, self.lease.continuation = await self._read(None, from_now=True)
        self.lease.initialised = True

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
        batches = 0
        while batches < max_batches:
            batch, continuation = await self._read_page()
            if not batch:
                return self.stats
            batches += 1
            self.stats.batch_sizes.append(len(batch))
            if self.read_round_trip_s:
                await asyncio.sleep(self.read_round_trip_s)  # the rest of the page's read
            if not await self._deliver(batch, max_attempts_per_batch):
                self.stats.stalled = True
                return self.stats
            self.lease.continuation = continuation  # checkpoint: only after it succeeded
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
