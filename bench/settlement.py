"""How to call the blocking ``ServiceBusMessageActions`` from the event loop: CPU and wall time
per settlement, against a gRPC Settlement server in another process (as the Functions host is).

The server answers every ``Complete`` at once, so what is left is the worker's own cost: the gRPC
client (C-core and its Python wrapper) and the way the call is taken off the event loop. 16
settlements are kept in flight, as at ``maxConcurrentCalls`` = 16.

``stub.future`` uses the extension's private ``_client`` stub and rebuilds its request: measured to
show what a thread-free call would save, not used by the product. ``inline`` blocks the event loop
for the whole round trip: measured as the floor of the client's CPU, not an option.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from local.settlement_server import bind_message_actions, worker_arguments_restored


def _serve(ports: Any) -> None:  # in the child process
    import grpc
    from azurefunctions.extensions.bindings.protos import settlement_pb2_grpc
    from google.protobuf.empty_pb2 import Empty

    class Immediate(settlement_pb2_grpc.SettlementServicer):  # type: ignore[misc]
        def Complete(self, request: Any, context: Any) -> Empty:  # noqa: N802 (generated name)
            return Empty()

    server = grpc.server(ThreadPoolExecutor(max_workers=16))
    settlement_pb2_grpc.add_SettlementServicer_to_server(Immediate(), server)
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    server.wait_for_termination()


class _Message:
    def __init__(self) -> None:
        self.lock_token = uuid.uuid4()


async def _drain(
    messages: Iterator[_Message], settle: Callable[[_Message], Awaitable[None]]
) -> None:
    for message in messages:
        await settle(message)


async def measure(calls: int = 2_000, concurrency: int = 16) -> dict[str, dict[str, float]]:
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    child = context.Process(target=_serve, args=(ports,), daemon=True)
    child.start()
    executors: list[ThreadPoolExecutor] = []
    with worker_arguments_restored():  # bind_message_actions rewrites sys.argv
        try:
            port = await asyncio.to_thread(ports.get, True, 60)
            actions = bind_message_actions(port)
            loop = asyncio.get_running_loop()
            from azurefunctions.extensions.bindings.protos.settlement_pb2 import CompleteRequest

            stub = actions._client

            async def via_future(message: _Message) -> None:
                request = CompleteRequest()
                request.locktoken = str(message.lock_token)
                done: asyncio.Future[Any] = loop.create_future()

                def resolve(call: Any) -> None:
                    if not done.done():
                        done.set_result(call)

                def finished(call: Any) -> None:  # on a gRPC thread
                    loop.call_soon_threadsafe(resolve, call)

                stub.Complete.future(request).add_done_callback(finished)
                (await done).result()

            async def inline(message: _Message) -> None:
                actions.complete(message)

            def executor(threads: int) -> Callable[[_Message], Awaitable[None]]:
                pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="settle")
                executors.append(pool)
                return lambda message: loop.run_in_executor(pool, actions.complete, message)

            variants: dict[str, Callable[[_Message], Awaitable[None]]] = {
                "asyncio.to_thread, default executor (current)": lambda message: asyncio.to_thread(
                    actions.complete, message
                ),
                "dedicated executor, 1 thread": executor(1),
                "dedicated executor, 4 threads": executor(4),
                "dedicated executor, 16 threads": executor(16),
                "stub.future + call_soon_threadsafe (private API)": via_future,
                "inline blocking call (blocks the loop)": inline,
            }
            results: dict[str, dict[str, list[float]]] = {
                name: {"cpu_us": [], "wall_us": []} for name in variants
            }
            for _ in range(3):  # rounds alternate the variants; the median round is reported
                for name, settle in variants.items():
                    messages = iter([_Message() for _ in range(calls)])
                    cpu, wall = time.process_time(), time.perf_counter()
                    await asyncio.gather(*(_drain(messages, settle) for _ in range(concurrency)))
                    results[name]["cpu_us"].append((time.process_time() - cpu) / calls * 1e6)
                    results[name]["wall_us"].append((time.perf_counter() - wall) / calls * 1e6)
            return {
                name: {
                    "cpu_us_per_call": statistics.median(values["cpu_us"]),
                    "wall_us_per_call": statistics.median(values["wall_us"]),
                }
                for name, values in results.items()
            }
        finally:
            for pool in executors:
                pool.shutdown(wait=False)
            child.kill()
            child.join(10)
