"""The doubles of the ports, at most one per port: for unit tests, the benchmark and anything else
that needs a port's semantics without its outside system.

Each double is held to its port by the same contract suite as the real adapter
(``tests/contracts/``), so it cannot drift from what the core relies on; each docstring says what
it does not reproduce. A double records what a test needs to read back (requests, settlement
calls); a test that needs another behaviour scripts it through the double's own knobs
(``fail_next``; ``expected``, ``before``, ``hold``), never with a second fake of the same port.

Owns: ``InMemoryOrderStore`` (``shared.consumer.core.OrderStore``, on the kit's
``idempotent_consumer.testing.InMemoryDocumentStore``) and ``RecordingActions``
(``idempotent_consumer.servicebus.MessageActions``). The relay's ports (``OutboxStore``,
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

from idempotent_consumer.testing import InMemoryDocumentStore

from shared.consumer.errors import OrderAlreadyExists, OrphanedDocument

# ---- the order store -------------------------------------------------------------------------


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
