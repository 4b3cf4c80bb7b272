"""The Functions host's gRPC Settlement service, backed by the local PeekLockQueue.

In Azure the Service Bus extension in the Functions host owns the AMQP link and exposes
settlement to the Python worker over gRPC; ``ServiceBusMessageActions`` is only a gRPC
client. Serving the same generated service locally lets the app's settlement code run
unchanged, through the real client, against a broker model whose failures we control.

One service serves every Service Bus trigger of the host (the queue's and each subscription's):
the extension finds the message of a request by its lock token alone, in one cache its
listeners share (azure-sdk-for-net, sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/
src/Grpc/SettlementService.cs: ``_provider.ActionsCache.TryGetValue(request.Locktoken, ...)``);
here, the first entity that issued the token (``serve`` adds one), else the queue, which
refuses it as lost.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, NoReturn, Self

import grpc
from azurefunctions.extensions.bindings.protos import settlement_pb2_grpc
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from google.protobuf.empty_pb2 import Empty

from local.standins.broker import MessageLockLostError, PeekLockQueue

__all__ = [
    "DEFAULT_MAX_MESSAGE_LENGTH",
    "QueueSettlementServicer",
    "SettlementServer",
    "bind_message_actions",
    "worker_arguments_restored",
    "worker_argv",
]

DEFAULT_MAX_MESSAGE_LENGTH = 128 * 1024 * 1024

type _Context = grpc.ServicerContext

# The worker arguments ServiceBusMessageActions reads, each followed by one value.
_WORKER_FLAGS = ("--host", "--port", "--functions-grpc-max-message-length")


class QueueSettlementServicer(settlement_pb2_grpc.SettlementServicer):  # type: ignore[misc]
    """Maps each Settlement RPC onto the queue and broker errors onto gRPC status codes.

    A lost lock becomes FAILED_PRECONDITION so that the client raises (wrapped in its
    SettlementError), exactly the signal the app must handle when its lock lapsed mid-work.
    Method names are dictated by the generated service, hence the N802 suppressions.
    """

    def __init__(self, queue: PeekLockQueue) -> None:
        self.queue = queue
        self.entities: list[PeekLockQueue] = [queue]
        # Fault injection: settlements for these lock tokens never reach the broker, as when
        # the host process dies after the function committed its work but before settling.
        self.lost_settlements: set[uuid.UUID] = set()

    def entity(self, token: uuid.UUID) -> PeekLockQueue:
        """The entity that issued ``token`` (module docstring)."""
        return next((e for e in self.entities if e.knows(token)), self.queue)

    def _lost(self, token: uuid.UUID, context: _Context) -> None:
        if token in self.lost_settlements:
            _abort(context, grpc.StatusCode.UNAVAILABLE, "injected: host stopped before settling")

    def Complete(self, request: Any, context: _Context) -> Empty:  # noqa: N802
        token = _parse_token(request.locktoken, context)
        self._lost(token, context)
        _settle(context, lambda: self.entity(token).complete(token))
        return Empty()

    def Abandon(self, request: Any, context: _Context) -> Empty:  # noqa: N802
        token = _parse_token(request.locktoken, context)
        self._lost(token, context)
        _reject_property_changes(request, context)
        _settle(context, lambda: self.entity(token).abandon(token))
        return Empty()

    def Deadletter(self, request: Any, context: _Context) -> Empty:  # noqa: N802
        token = _parse_token(request.locktoken, context)
        self._lost(token, context)
        _reject_property_changes(request, context)
        # StringValue wrappers distinguish "not given" from "": only HasField tells them apart.
        reason = request.deadletterReason.value if request.HasField("deadletterReason") else None
        description = (
            request.deadletterErrorDescription.value
            if request.HasField("deadletterErrorDescription")
            else None
        )
        _settle(context, lambda: self.entity(token).dead_letter(token, reason, description))
        return Empty()

    def Defer(self, request: Any, context: _Context) -> Empty:  # noqa: N802
        token = _parse_token(request.locktoken, context)
        _reject_property_changes(request, context)
        _settle(context, lambda: self.entity(token).defer(token))
        return Empty()

    def RenewMessageLock(self, request: Any, context: _Context) -> Empty:  # noqa: N802
        token = _parse_token(request.locktoken, context)
        _settle(context, lambda: self.entity(token).renew_lock(token))
        return Empty()

    # The app's queue is not session-enabled; answering these would only hide a bug.

    def GetSessionState(self, request: Any, context: _Context) -> NoReturn:  # noqa: N802
        _sessions_unsupported(context)

    def SetSessionState(self, request: Any, context: _Context) -> NoReturn:  # noqa: N802
        _sessions_unsupported(context)

    def ReleaseSession(self, request: Any, context: _Context) -> NoReturn:  # noqa: N802
        _sessions_unsupported(context)

    def RenewSessionLock(self, request: Any, context: _Context) -> NoReturn:  # noqa: N802
        _sessions_unsupported(context)


def _parse_token(text: str, context: _Context) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"invalid lock token: {text!r}")


def _settle[T](context: _Context, operation: Callable[[], T]) -> T:
    try:
        return operation()
    except MessageLockLostError as error:
        _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"MessageLockLost: {error}")
    except NotImplementedError as error:
        _abort(context, grpc.StatusCode.UNIMPLEMENTED, str(error))


def _reject_property_changes(request: Any, context: _Context) -> None:
    # The real client always sends b""; a non-empty value would be silently ignored here.
    if request.propertiesToModify:
        _abort(context, grpc.StatusCode.UNIMPLEMENTED, "propertiesToModify is not supported")


def _sessions_unsupported(context: _Context) -> NoReturn:
    _abort(context, grpc.StatusCode.UNIMPLEMENTED, "sessions are not modelled locally")


def _abort(context: _Context, code: grpc.StatusCode, details: str) -> NoReturn:
    context.abort(code, details)
    raise AssertionError("grpc.ServicerContext.abort returned")  # abort always raises


class SettlementServer:
    """A gRPC server on a free loopback port that plays the host's settlement endpoint."""

    def __init__(self, queue: PeekLockQueue, host: str = "127.0.0.1", max_workers: int = 8):
        self.queue = queue
        self.host = host
        self._server = grpc.server(ThreadPoolExecutor(max_workers=max_workers))
        self.servicer = QueueSettlementServicer(queue)
        settlement_pb2_grpc.add_SettlementServicer_to_server(self.servicer, self._server)
        self.port: int = self._server.add_insecure_port(f"{host}:0")
        self._started = False

    def serve(self, entity: PeekLockQueue) -> None:
        """Settle the deliveries of ``entity`` too (a subscription with a trigger)."""
        if entity not in self.servicer.entities:
            self.servicer.entities.append(entity)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Self:
        if not self._started:
            self._server.start()
            self._started = True
        return self

    def stop(self, grace: float | None = None) -> None:
        if self._started:
            self._server.stop(grace).wait()
            self._started = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def worker_argv(port: int, max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH) -> list[str]:
    """The command-line arguments the Functions host passes to the Python worker."""
    return [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--functions-grpc-max-message-length",
        str(max_message_length),
    ]


def bind_message_actions(
    port: int, max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH
) -> ServiceBusMessageActions:
    """Point the real ServiceBusMessageActions at a local settlement server.

    The client has no address parameter: it parses --host/--port from ``sys.argv`` (as the
    worker is launched by the host) and caches a process-wide singleton, because one worker
    process talks to exactly one host. Locally we are both host and worker, and tests start
    a server per test on a fresh port, so we rewrite those arguments and drop the cached
    instance. Callers that care (tests) bind inside ``worker_arguments_restored()``.
    """
    argv = list(sys.argv)
    kept: list[str] = argv[:1]
    skip_value = False
    for arg in argv[1:]:
        if skip_value:
            skip_value = False
            continue
        if arg in _WORKER_FLAGS:
            skip_value = True
            continue
        if arg.startswith(tuple(f"{flag}=" for flag in _WORKER_FLAGS)):
            continue
        kept.append(arg)
    sys.argv = kept + worker_argv(port, max_message_length)
    with ServiceBusMessageActions._lock:
        ServiceBusMessageActions._instance = None
    return ServiceBusMessageActions.get_instance()


@contextlib.contextmanager
def worker_arguments_restored() -> Iterator[None]:
    """Put ``sys.argv`` back as it was on exit, however often ``bind_message_actions`` rewrote
    it inside: a test, the demo or a benchmark leaves the process's arguments as it found them."""
    argv = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = argv
