"""The stand-in with its host side in a process of its own, as in Azure.

In Azure the Functions host (.NET) and the Python worker are two processes: the host receives from
Service Bus, encodes each message into the binding data it sends the worker, and serves settlement
over gRPC; the worker decodes the binding data, runs the function and settles through
``ServiceBusMessageActions`` (a gRPC client). ``local.host.LocalFunctionsHost`` plays both parts in
one process, so on a 2-core machine the host's work (AMQP encoding, the dispatch loop, the gRPC
server's threads and the peek-lock queue model) runs on the worker's CPU and contends for its GIL.

Here the host's part runs in a child process (``python -m bench.split_host SOCKET``): the peek-lock
queue model, the gRPC settlement server, the receive loop with ``maxConcurrentCalls`` and the
encoding (``local.host.delivery_binding_bytes``). It sends each invocation's bytes to the worker
over a Unix socket. The worker's part runs in the benchmark process, unchanged and in full:
``local.host.invoke_function`` decodes the bytes with the extension's converter, binds the real
``ServiceBusMessageActions`` and calls the real function, whose settlement goes over gRPC to the
child. The worker's end of the socket (read a frame, start a task, write a completion) stands in
for the Python worker's gRPC invocation stream, which costs more in Azure than this does.

Frames, both ways: 4-byte big-endian payload length, 1-byte kind, payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import struct
import sys
import tempfile
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = str(Path(__file__).resolve().parent.parent)
_HEADER = struct.Struct(">IB")
ENQUEUE = 1  # benchmark -> host: {"prefix", "count", "lines"}; messages to send to the queue
ENQUEUED = 2  # host -> benchmark: {"sent"}
RUN = 3  # benchmark -> host: {"max_concurrent_calls"}; dispatch until nothing is left
IDLE = 4  # host -> benchmark: the host's statistics of that run
INVOKE = 5  # host -> worker: 8-byte invocation id, then the binding data
DONE = 6  # worker -> host: 8-byte invocation id, then 1 byte: 1 if the function returned


def frame(kind: int, payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), kind) + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    length, kind = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return kind, await reader.readexactly(length)


# --- the host's side: runs in the child process --------------------------------------------------


async def _host_main(socket_path: str) -> None:
    from bench.orders import outgoing
    from local.broker import PeekLockQueue, QueueSettings
    from local.host import delivery_binding_bytes
    from local.settlement_server import SettlementServer

    loop = asyncio.get_running_loop()
    queue = PeekLockQueue(
        QueueSettings.from_messaging_file(duplicate_detection_window=timedelta(0))
    )
    server = SettlementServer(queue, max_workers=16).start()
    wake = asyncio.Event()

    def on_queue_change() -> None:  # called from the gRPC server's threads
        loop.call_soon_threadsafe(wake.set)

    queue.add_listener(on_queue_change)
    in_flight: dict[int, object] = {}
    failed = 0
    connected = asyncio.Event()
    streams: dict[str, Any] = {}

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        streams["reader"], streams["writer"] = reader, writer
        connected.set()

    listener = await asyncio.start_unix_server(on_connect, path=socket_path)
    print(f"ready {server.port}", flush=True)
    await connected.wait()
    reader: asyncio.StreamReader = streams["reader"]
    writer: asyncio.StreamWriter = streams["writer"]

    async def dispatch(max_calls: int) -> dict[str, Any]:
        nonlocal failed
        failed = 0
        invocations = 0
        next_id = 0
        while True:
            wake.clear()
            free = max_calls - len(in_flight)
            for delivery in queue.receive(free) if free > 0 else []:
                next_id += 1
                in_flight[next_id] = delivery
                invocations += 1
                content = delivery_binding_bytes(delivery)
                writer.write(frame(INVOKE, next_id.to_bytes(8, "big") + content))
            if not in_flight:
                break  # nothing running, nothing to receive
            await wake.wait()
        return {
            "invocations": invocations,
            "failed_invocations": failed,
            "dead_letters": len(queue.dead_letters),
            "not_settled": queue.active_count(),
        }

    running: set[asyncio.Task[None]] = set()

    async def run_and_report(max_calls: int) -> None:
        stats = await dispatch(max_calls)
        writer.write(frame(IDLE, json.dumps(stats).encode()))

    try:
        while True:
            try:
                kind, payload = await read_frame(reader)
            except asyncio.IncompleteReadError:
                return  # the benchmark closed the socket
            if kind == DONE:
                in_flight.pop(int.from_bytes(payload[:8], "big"), None)
                if payload[8] != 1:
                    failed += 1
                wake.set()
            elif kind == ENQUEUE:
                order = json.loads(payload)
                sent = 0
                for message in outgoing(order["prefix"], order["count"], lines=order["lines"]):
                    sent += queue.send(message)
                writer.write(frame(ENQUEUED, json.dumps({"sent": sent}).encode()))
            elif kind == RUN:
                task = asyncio.create_task(
                    run_and_report(json.loads(payload)["max_concurrent_calls"])
                )
                running.add(task)
                task.add_done_callback(running.discard)
    finally:
        listener.close()
        server.stop()


# --- the worker's side: runs in the benchmark process --------------------------------------------


class SplitHost:
    """The host's side in a child process; the worker's side on this event loop."""

    def __init__(self, app_settings: Mapping[str, str], max_concurrent_calls: int = 16) -> None:
        import function_app
        from local.host import index_function

        self.function = index_function(function_app.app, app_settings)
        self.max_concurrent_calls = max_concurrent_calls
        self.grpc_port = 0
        self.errors: list[str] = []
        self._process: asyncio.subprocess.Process | None = None
        self._directory = tempfile.TemporaryDirectory(prefix="split-host-")
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._replies: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._pump: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> SplitHost:
        socket_path = os.path.join(self._directory.name, "host.sock")
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.split_host",
            socket_path,
            stdout=asyncio.subprocess.PIPE,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": REPO_ROOT},
        )
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), timeout=60)
        if not line.startswith(b"ready "):
            raise RuntimeError(f"the host process did not start: {line!r}")
        self.grpc_port = int(line.split()[1])
        self._reader, self._writer = await asyncio.open_unix_connection(socket_path)
        self._pump = asyncio.create_task(self._receive())
        return self

    async def stop(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        if self._process is not None:
            if self._process.returncode is None:
                self._process.terminate()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._process.wait(), timeout=10)
            self._process = None
        self._directory.cleanup()

    async def __aenter__(self) -> SplitHost:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def enqueue(self, prefix: str, count: int, lines: int = 10) -> int:
        assert self._writer is not None
        self._writer.write(
            frame(ENQUEUE, json.dumps({"prefix": prefix, "count": count, "lines": lines}).encode())
        )
        kind, payload = await self._replies.get()
        assert kind == ENQUEUED
        sent: int = json.loads(payload)["sent"]
        return sent

    async def run_until_idle(self) -> dict[str, Any]:
        """Dispatch everything queued; returns the host's statistics when nothing is left."""
        assert self._writer is not None
        self._writer.write(
            frame(RUN, json.dumps({"max_concurrent_calls": self.max_concurrent_calls}).encode())
        )
        kind, payload = await self._replies.get()
        assert kind == IDLE
        stats: dict[str, Any] = json.loads(payload)
        return stats

    async def _receive(self) -> None:
        assert self._reader is not None
        while True:
            try:
                kind, payload = await read_frame(self._reader)
            except asyncio.IncompleteReadError:
                return  # the host process has gone
            if kind == INVOKE:
                task = asyncio.create_task(self._invoke(payload[:8], payload[8:]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                self._replies.put_nowait((kind, payload))

    async def _invoke(self, invocation_id: bytes, content: bytes) -> None:
        from local.host import invoke_function

        ok = b"\x01"
        try:
            await invoke_function(self.function, content)
        except Exception as error:  # noqa: BLE001 - reported to the host, as the worker does
            ok = b"\x00"
            self.errors.append(f"{type(error).__name__}: {error}")
        assert self._writer is not None
        self._writer.write(frame(DONE, invocation_id + ok))


if __name__ == "__main__":
    asyncio.run(_host_main(sys.argv[1]))
