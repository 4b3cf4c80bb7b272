"""The doubles of the ports, at most one per port: for unit tests, the benchmark and anything else
that needs a port's semantics without its outside system.

Each double is held to its port by the same contract suite as the real adapter
(``tests/contracts/``), so it cannot drift from what the core relies on; each docstring says what
it does not reproduce. A double records what a test needs to read back (requests, settlement
calls); a test that needs another behaviour scripts it through the double's own knobs
(``fail_next``; ``expected``, ``before``, ``hold``), never with a second fake of the same port.

Owns: ``InMemoryOrderStore`` (``shared.consumer.core.OrderStore``) and ``RecordingActions``
(``shared.adapters.servicebus_in.MessageActions``). The relay's ports (``OutboxStore``,
``EventPublisher``) and the dead-letter tool's (``ops.port.DeadLetterQueue``) have no double: no
test, demo or benchmark fakes them (each runs the real adapter over cosmosdb-server, the topic
model or the broker model, all fast and local), and a double nobody uses would be a second
implementation to keep true for nothing. One added later subclasses its port's contract suite.

Imports only ``shared``'s errors and write shapes; never an SDK.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic_core
from idempotent_consumer import (
    ConditionFailed,
    Create,
    DocumentExists,
    DocumentMissing,
    PatchOperation,
    StoreError,
    Write,
)

from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument

# ---- the order store -------------------------------------------------------------------------


class InMemoryDocumentStore:
    """The kit's ``DocumentStore`` port in memory: atomic commits in one partition (all or
    nothing, the first refused write decides, as a transactional batch answers), point reads.

    Documents are copied in and out through a JSON round trip (pydantic-core, in Rust), as a
    real store serialises what it is given and parses what it returns: the caller's dicts and
    the stored ones never alias, and only JSON values can be stored. ``requests`` logs each
    request (``create``, ``batch``, ``read``); ``fail_next`` scripts the next requests' failures,
    in order (None lets that request through). Tests may read and edit ``documents`` (keyed by
    partition key and id) to set up a stored state.

    Given a ``clock`` (seconds), it keeps Cosmos DB's per-item time to live: each write stamps
    ``_ts`` (the clock's whole seconds, as the service's ``_ts`` is), and a document whose
    ``ttl`` is a positive integer is gone once ``_ts + ttl`` is reached: "items expire ... after
    the time period, since the time they were last modified"; "an item no longer appears ...
    immediately after the TTL expires, even if it hasn't yet been permanently deleted"
    (learn.microsoft.com/azure/cosmos-db/nosql/time-to-live), so a read returns nothing, a
    create takes its id and a patch finds no document. ``ttl`` -1 or absent never expires (the
    container's ``defaultTtl`` is -1: infra/app/cosmos.bicep). An expired document stays in
    ``documents`` until its id is written again, for a test to tell it from one never written
    (``expired``). What the service answers for a point read of an expired item it has not yet
    deleted is not documented; this answers as for a deleted one.

    Does not reproduce: the system fields a store adds (``_etag``, ``_rid``; ``_ts`` only with a
    clock), request charges, throttling, timeouts and every other failure unless scripted, the
    2 MB document limit, the 10-operation limit of a patch, the SDK's error types (it raises
    the port's errors), concurrency between processes.
    """

    def __init__(
        self, *, keep: int | None = None, clock: Callable[[], float] | None = None
    ) -> None:
        self.documents: dict[tuple[str, str], dict[str, Any]] = {}  # (partition, id) -> doc
        self.requests: list[str] = []
        # Scripted failures for the next requests, in order; None lets that request through.
        self.fail_next: list[StoreError | Exception | None] = []
        self._keep = keep
        self._clock = clock

    def expired(self, document: Mapping[str, Any]) -> bool:
        """Whether ``document`` is past its ttl now (always False without a clock)."""
        ttl, written = document.get("ttl"), document.get("_ts")
        if self._clock is None or not isinstance(ttl, int) or ttl <= 0:
            return False
        return isinstance(written, int) and written + ttl <= self._clock()

    def _stored(self, key: tuple[str, str]) -> dict[str, Any] | None:
        document = self.documents.get(key)
        return None if document is None or self.expired(document) else document

    async def read(self, partition_key: str, document_id: str) -> Mapping[str, Any] | None:
        self._request("read")
        document = self._stored((partition_key, document_id))
        return self._copy(document) if document is not None else None

    async def commit(self, partition_key: str, writes: Sequence[Write]) -> None:
        """All or nothing, as a transactional batch: each write is checked against the state
        the earlier writes of the same commit left, and the first refused one decides."""
        self._request("create" if len(writes) == 1 and isinstance(writes[0], Create) else "batch")
        staged: dict[str, dict[str, Any]] = {}
        for index, write in enumerate(writes):
            key = (partition_key, write.document_id)
            current = staged.get(write.document_id, self._stored(key))
            if isinstance(write, Create):
                if current is not None:
                    raise DocumentExists(index, write.document_id)
                staged[write.document_id] = self._copy(write.document)
                continue
            if current is None:
                raise DocumentMissing(index, write.document_id)
            if write.condition is not None and not write.condition.holds_for(current):
                raise ConditionFailed(index, write.document_id)
            staged[write.document_id] = _patched(current, write.operations)
        for document_id, document in staged.items():
            if self._clock is not None:
                document["_ts"] = int(self._clock())
            self.documents[(partition_key, document_id)] = document

    def _request(self, name: str) -> None:
        if self._keep is None:
            self.requests.append(name)
        failure = self.fail_next.pop(0) if self.fail_next else None
        if failure is not None:
            raise failure

    def _copy(self, document: Mapping[str, Any]) -> dict[str, Any]:
        plain = document if isinstance(document, dict) else dict(document)
        if self._keep is not None:
            return plain
        copied: dict[str, Any] = pydantic_core.from_json(pydantic_core.to_json(plain))
        return copied


class InMemoryOrderStore(InMemoryDocumentStore):
    """The order consumer's ``OrderStore`` in memory: the kit's store, and the OrderPlaced path's
    atomic create of an order's documents (all or none), ``OrderAlreadyExists`` when the order
    exists, ``OrphanedDocument`` when another of its documents (its outbox event) exists without
    it, and the order's point read.

    ``keep``: the benchmark's store, which keeps only the last ``keep`` orders (their partitions)
    and nothing else: no request log, no copies, so neither its own work nor its growth is
    charged to the consumer it measures.
    """

    def __init__(self, *, keep: int | None = None) -> None:
        super().__init__(keep=keep)
        self._partitions: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()

    async def create(self, documents: Sequence[Mapping[str, Any]]) -> None:
        self._request("create" if len(documents) == 1 else "batch")
        partition_key = str(documents[0]["orderId"])
        keys = [(str(document["orderId"]), str(document["id"])) for document in documents]
        # As a transactional batch answers: the first operation that fails decides, and the
        # order is the first one (shared.adapters.cosmos_orders.CosmosOrderStore.create).
        for index, key in enumerate(keys):
            if key in self.documents:
                if index == 0:
                    raise OrderAlreadyExists(partition_key)
                raise OrphanedDocument(partition_key, key[1])
        for key, document in zip(keys, documents, strict=True):
            self.documents[key] = self._copy(document)
        if self._keep is not None:
            self._partitions[partition_key] = keys
            while len(self._partitions) > self._keep:
                for key in self._partitions.popitem(last=False)[1]:
                    self.documents.pop(key, None)

    async def read_order(self, order_id: str) -> Mapping[str, Any] | None:
        return await self.read(order_id, order_id)


def _patched(document: Mapping[str, Any], operations: Sequence[PatchOperation]) -> dict[str, Any]:
    """A copy of ``document`` with the top-level patch operations applied (set, add, replace,
    remove, incr: learn.microsoft.com/azure/cosmos-db/partial-document-update)."""
    patched = dict(pydantic_core.from_json(pydantic_core.to_json(document)))
    for operation in operations:
        name = str(operation["path"]).removeprefix("/")
        kind = operation["op"]
        if kind in ("set", "add", "replace"):
            patched[name] = pydantic_core.from_json(pydantic_core.to_json(operation["value"]))
        elif kind == "remove":
            patched.pop(name, None)
        elif kind == "incr":
            patched[name] = patched.get(name, 0) + operation["value"]
        else:
            raise ValueError(f"patch operation {kind!r} is not modelled")
    return patched


# ---- the settlement actions ------------------------------------------------------------------

COMPLETE = "complete"
ABANDON = "abandon"
DEADLETTER = "deadletter"


class SettlementRefused(Exception):
    """The message was settled already: its lock is no longer held (the host answers a second
    settlement with a failed precondition, which the extension's client raises as its
    ``SettlementError``; ``local.standins.settlement_server``)."""


@dataclass(frozen=True, slots=True)
class SettlementCall:
    """One settlement the double accepted."""

    operation: str  # COMPLETE, ABANDON or DEADLETTER
    message: Any
    deadletter_reason: str | None = None
    deadletter_error_description: str | None = None


class RecordingActions:
    """The ``MessageActions`` port (the Functions extension's ``ServiceBusMessageActions``),
    recording each settlement in ``calls``, in the order accepted; thread-safe, since the
    consumer settles on its own thread pool (``shared.adapters.servicebus_in.Settler``).

    A message is settled once: a second settlement of the same message object raises
    ``SettlementRefused`` and records nothing, as the host refuses a lock already released.

    What a test scripts, in the order applied: ``expected``, the operations it allows (any other
    raises ``AssertionError`` on the settling thread); ``before(operation)``, run on the calling
    thread (wait at a barrier, raise a failure); ``hold``, how many settlements (None: every
    one) wait until ``release`` is set, at most ``hold_timeout_s`` (a hung settlement). ``keep``:
    remember only the last ``keep`` calls (the benchmark's, so its growth is not charged to the
    consumer); a message whose call was forgotten could be settled again.

    Does not reproduce: the gRPC round trip to the host and its errors (``SettlementError``
    around a ``grpc.RpcError``), lock expiry and renewal, what the broker does next (the
    redelivery of an abandoned message, the dead-letter sub-queue), defer, sessions, property
    changes.
    """

    def __init__(
        self,
        *,
        expected: Collection[str] | None = None,
        before: Callable[[str], object] | None = None,
        hold: int | None = 0,
        release: threading.Event | None = None,
        hold_timeout_s: float = 60.0,
        keep: int | None = None,
    ) -> None:
        self.calls: deque[SettlementCall] = deque(maxlen=keep)
        self.release = release or threading.Event()
        self._expected = expected
        self._before = before
        self._holds = hold  # still to hold; None: all
        self._hold_timeout_s = hold_timeout_s
        self._lock = threading.Lock()
        self._settled: dict[int, SettlementCall] = {}  # id(message) -> its call (kept in calls)

    @property
    def operations(self) -> list[str]:
        with self._lock:
            return [call.operation for call in self.calls]

    @property
    def completed(self) -> int:
        """How many ``complete`` calls were accepted."""
        with self._lock:
            return sum(1 for call in self.calls if call.operation == COMPLETE)

    def complete(self, message: Any) -> None:
        self._settle(SettlementCall(COMPLETE, message))

    def abandon(self, message: Any) -> None:
        self._settle(SettlementCall(ABANDON, message))

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        self._settle(
            SettlementCall(DEADLETTER, message, deadletter_reason, deadletter_error_description)
        )

    def _settle(self, call: SettlementCall) -> None:
        if self._expected is not None and call.operation not in self._expected:
            raise AssertionError(f"{call.operation} not expected")
        if self._before is not None:
            self._before(call.operation)
        with self._lock:
            held = self._holds is None or self._holds > 0
            if self._holds:
                self._holds -= 1
        if held:
            self.release.wait(timeout=self._hold_timeout_s)
        with self._lock:
            if id(call.message) in self._settled:
                raise SettlementRefused(f"{call.operation}: the message was settled already")
            if self.calls.maxlen is not None and len(self.calls) == self.calls.maxlen:
                if self.calls.maxlen == 0:
                    return
                self._settled.pop(id(self.calls[0].message), None)
            self.calls.append(call)
            # The call keeps the message alive, so its id cannot be reused while remembered.
            self._settled[id(call.message)] = call
