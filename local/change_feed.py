"""The Cosmos DB trigger's contract, emulated over a container that has no change feed
(cosmosdb-server has none): read the changes, deliver them in batches to a function, checkpoint
only after a successful invocation, re-run a failed one as the function's retry policy says.

What it reproduces (latest-version mode, one lease):
- a change is the latest version of a created or updated document: the lease remembers the etag
  it checkpointed for each document, and a read returns every document whose etag differs, in
  order of modification (``_ts``), at most ``max_items_per_invocation`` at a time; a document
  changed twice before it is read is delivered once, in its latest version; the relay's own marks
  come back as changes, as in Azure;
- the lease is checkpointed only when the invocation returns; a failed invocation is re-run with
  the same documents after the policy's exponential backoff (without the host's small random
  spread), its ``retry_count`` rising, for ever when ``max_retry_count`` is -1; a crashed worker
  (``BaseException`` escaping, e.g. cancellation) loses its retry count and the batch is
  delivered again from the last checkpoint by the next emulator built on the same ``Lease``.

What it does not reproduce: leases across instances (one consumer owns the whole container:
no lease stealing, no load balancing, no duplicate delivery during rebalancing), partition splits
and merges (one range, one continuation), the order of changes within one second of ``_ts``
(cosmosdb-server's ``_ts`` has one-second resolution; the real feed orders by LSN per partition),
the all-versions-and-deletes mode (intermediate versions, deletes and TTL expiries are never
delivered), ``feedPollDelay`` and ``startFromBeginning``/``startFromTime`` (it always starts from
the lease, initially the beginning).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import azure.functions as func
from azure.cosmos.aio import ContainerProxy
from azure_functions_runtime.bindings.context import Context  # type: ignore[import-untyped]
from azure_functions_runtime.bindings.retrycontext import RetryContext  # type: ignore[import-untyped]
from azure_functions_runtime.bindings.tracecontext import TraceContext  # type: ignore[import-untyped]

from local.host import indexed_functions
from shared.relay import RUNTIME_RETRY, RuntimeRetry


@dataclass(frozen=True)
class RetryAttempt:
    """What the host tells an invocation about its retries (``context.retry_context``)."""

    retry_count: int  # 0 on the first run of a batch
    max_retry_count: int  # -1: unbounded


# The invoker: one function invocation for one batch of documents (as JSON objects), raising what
# the function raised. The change feed depends on nothing else of the host.
BatchInvoker = Callable[[list[dict[str, Any]], RetryAttempt], Awaitable[None]]


class Sleeper(Protocol):
    async def sleep(self, seconds: float) -> None: ...


class _RealTime:
    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _seconds(interval: str) -> float:
    hours, minutes, seconds = (float(part) for part in interval.split(":"))
    return timedelta(hours=hours, minutes=minutes, seconds=seconds).total_seconds()


@dataclass(frozen=True)
class RetrySchedule:
    """The function's retry policy as the host applies it to a failed invocation."""

    max_retry_count: int
    minimum_s: float
    maximum_s: float

    @classmethod
    def of(cls, policy: RuntimeRetry = RUNTIME_RETRY) -> RetrySchedule:
        if policy.strategy != "exponential_backoff":
            raise ValueError(f"only exponential_backoff is emulated, not {policy.strategy}")
        return cls(
            policy.max_retry_count,
            _seconds(policy.minimum_interval),
            _seconds(policy.maximum_interval),
        )

    def allows(self, retry_count: int) -> bool:
        return self.max_retry_count < 0 or retry_count <= self.max_retry_count

    def delay_s(self, retry_count: int) -> float:
        """Before retry ``retry_count`` (1-based): minimum, doubled per retry, capped."""
        return float(min(self.maximum_s, self.minimum_s * 2 ** (retry_count - 1)))


@dataclass
class Lease:
    """The leases container's state for the one range: the etag checkpointed per document, and
    the ``_ts`` before which every change is checkpointed (a read skips older documents)."""

    checkpoint: dict[str, str] = field(default_factory=dict)
    since_ts: int = 0


@dataclass
class ChangeFeedStats:
    batches: int = 0
    invocations: int = 0
    failed_invocations: int = 0
    delivered_documents: int = 0
    errors: list[str] = field(default_factory=list)
    stalled: bool = False  # a batch still failed after ``max_attempts_per_batch``


def _key(document: dict[str, Any]) -> str:
    return json.dumps([document.get("orderId"), document["id"]])


class ChangeFeedEmulator:
    def __init__(
        self,
        container: ContainerProxy,
        invoke: BatchInvoker,
        *,
        lease: Lease | None = None,
        retry: RetrySchedule | None = None,
        clock: Sleeper | None = None,
        max_items_per_invocation: int = 100,
    ) -> None:
        self.container = container
        self.invoke = invoke
        self.lease = lease or Lease()
        self.retry = retry or RetrySchedule.of()
        self.clock: Sleeper = clock or _RealTime()
        self.max_items = max_items_per_invocation
        self.stats = ChangeFeedStats()

    async def read_changes(self) -> list[dict[str, Any]]:
        """The next batch after the checkpoint (latest versions, oldest modification first)."""
        documents = [
            document
            async for document in self.container.query_items(
                "SELECT * FROM c WHERE c._ts >= @since",
                parameters=[{"name": "@since", "value": self.lease.since_ts}],
            )
        ]
        changed = [d for d in documents if self.lease.checkpoint.get(_key(d)) != d.get("_etag")]
        changed.sort(key=lambda d: int(d.get("_ts", 0)))
        return changed[: self.max_items]

    async def drain(
        self, *, max_attempts_per_batch: int | None = None, max_batches: int = 10_000
    ) -> ChangeFeedStats:
        """Deliver batches until no change is left. A batch that fails is retried per the policy;
        ``max_attempts_per_batch`` bounds the emulation (not the host) so a test can observe a
        stuck lease: the run then stops with ``stalled`` set and the lease not advanced."""
        for _ in range(max_batches):
            batch = await self.read_changes()
            if not batch:
                return self.stats
            self.stats.batches += 1
            if not await self._deliver(batch, max_attempts_per_batch):
                self.stats.stalled = True
                return self.stats
            for document in batch:  # checkpoint: only after the invocation succeeded
                self.lease.checkpoint[_key(document)] = str(document.get("_etag"))
            # The batch is the oldest changes: all before its last ``_ts`` are now checkpointed
            # (later changes of a document get a newer ``_ts``); equal ones may remain.
            self.lease.since_ts = max(self.lease.since_ts, int(batch[-1].get("_ts", 0)))
        raise RuntimeError(f"change feed not drained after {max_batches} batches")

    async def _deliver(self, batch: list[dict[str, Any]], max_attempts: int | None) -> bool:
        retry_count = 0
        while True:
            self.stats.invocations += 1
            self.stats.delivered_documents += len(batch)
            try:
                await self.invoke(
                    [dict(document) for document in batch],
                    RetryAttempt(retry_count, self.retry.max_retry_count),
                )
                return True
            except Exception as error:  # noqa: BLE001 - the host logs it and applies the policy
                self.stats.failed_invocations += 1
                self.stats.errors.append(f"{type(error).__name__}: {error}")
            retry_count += 1
            if max_attempts is not None and retry_count >= max_attempts:
                return False
            if not self.retry.allows(retry_count):
                # A bounded policy, exhausted: the host checkpoints past the batch. (The relay's
                # policy is unbounded for exactly this reason.)
                return True
            await self.clock.sleep(self.retry.delay_s(retry_count))


def function_invoker(app: func.FunctionApp, function_name: str = "relay_outbox") -> BatchInvoker:
    """Invoke a Cosmos DB-triggered function as today's local host does: the user function found
    through ``app.get_functions()``, the documents as the trigger's JSON parsed into a
    ``func.DocumentList``, and the worker's own ``Context`` carrying the ``RetryContext``.
    Moving to the runtime-backed host (CONTRACTS.md section 4) replaces this one callable."""
    for name, function_json, user_function in indexed_functions(app):
        if name != function_name:
            continue
        bindings = json.loads(function_json)["bindings"]
        trigger = next(b for b in bindings if b["type"] == "cosmosDBTrigger")
        takes_context = "context" in inspect.signature(user_function).parameters
        break
    else:
        raise LookupError(f"no function named {function_name} in the app")

    async def invoke(documents: list[dict[str, Any]], attempt: RetryAttempt) -> None:
        wire = json.dumps(documents)  # the host sends the documents as JSON
        kwargs: dict[str, Any] = {
            trigger["name"]: func.DocumentList(
                [func.Document.from_dict(document) for document in json.loads(wire)]
            )
        }
        if takes_context:
            kwargs["context"] = Context(
                function_name,
                "",
                str(uuid.uuid4()),
                threading.local(),
                TraceContext("", "", {}),
                RetryContext(attempt.retry_count, attempt.max_retry_count, None),
            )
        result = user_function(**kwargs)
        if inspect.isawaitable(result):
            await result

    return invoke
