"""Where the consumer's time per ``OrderPlaced`` goes through the worker, beside the floor's: a
sampling profile of target 3's rounds (``python -m bench.path_profile``; not part of
``make bench``, whose figures it explains: docs/benchmarks.md).

``bench/order_path.py`` times each step of the consumer's own path alone, hot, over orders of
its own; through the worker the same code runs between the host's, the worker's, gRPC's and the
SDK's, and costs more. This profile measures it there: a thread samples the event loop's stack
every ``interval_s`` while the rounds of one function run (``bench.throughput``'s rounds, the
sides alternating) and charges the time since its last sample to every function on the stack
(inclusive). The sum per function, divided by the messages of that side, is its wall time per
message on the loop's thread; the loop is busy nearly all the time at the host's concurrency,
so this is close to its CPU. Listed: the functions that differ most between the two sides, and
the consumer's own steps.

What it cannot see, and its biases: the sampler needs the GIL, so a sample lands where the loop
lets it go (between bytecodes, or in a call that releases it); a long call in C (pydantic-core,
hashlib, the SSL socket) is charged to the Python function that made it. The settlement and gRPC
threads are not sampled (the same code on both sides). Sampling slows both sides alike
(``sys.setswitchinterval`` is lowered while it runs): compare the sides, not these figures with
target 3's.

``--repeat`` measures instead why the consumer's steps cost more there: each timed step as the
delivery meets it and made again at once (``first_and_repeated``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import importlib
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType
from typing import Any

from bench import throughput
from bench.standin import Function, StandIn, bench_account, standin

# The consumer's own steps, by function (file suffix, name): what ``bench.order_path`` times.
CONSUMER_STEPS = {
    "to_incoming": ("servicebus/_incoming.py", "to_incoming"),
    "contract (parse_message)": ("consumer/contract.py", "parse_message"),
    "documents (build_documents)": ("consumer/core.py", "build_documents"),
    "decide": ("consumer/core.py", "decide"),
    "store adapter (commit)": ("cosmos/_store.py", "commit"),
    "span (processing)": ("telemetry/_consumer.py", "processing"),
    "record_outcome": ("telemetry/_consumer.py", "record_outcome"),
    "settle": ("servicebus/_settlement.py", "settle"),
    "the whole delivery (handle_delivery)": ("servicebus/_delivery.py", "handle_delivery"),
}
FLOOR_STEPS = {
    "the write (write_documents)": ("bench/floor_app.py", "write_documents"),
    "settle": ("servicebus/_settlement.py", "settle"),
    "the whole delivery (platform_floor)": ("bench/floor_app.py", "platform_floor"),
}


# The consumer's synchronous steps, timed exactly (thread CPU time per call) where the order
# path calls them: (module, attribute) of the name the caller looks up.
TIMED_CALLS = {
    "to_incoming": ("idempotent_consumer.servicebus._delivery", "to_incoming"),
    "contract (parse_message)": ("shared.consumer.core", "parse_message"),
    "documents (build_documents)": ("shared.consumer.core", "build_documents"),
}


@contextmanager
def timed_calls(
    cpu_ns: dict[str, int], calls: dict[str, int], repeated_ns: dict[str, int] | None = None
) -> Iterator[None]:
    """Wrap each of ``TIMED_CALLS`` where it is looked up; their thread CPU time (exact: no
    sampling, and each is synchronous) and calls are added to ``cpu_ns`` and ``calls``. With
    ``repeated_ns``, each call that returned is made once more at once, with the same arguments
    (the three are pure), and that second call's CPU is added there: the step warm, right after
    itself, where the first figure is the step as the delivery meets it."""
    originals: list[tuple[Any, str, Any]] = []
    for step, (module_name, attribute) in TIMED_CALLS.items():
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)

        def timed(*args: Any, _step: str = step, _call: Any = original, **kwargs: Any) -> Any:
            started = time.thread_time_ns()
            try:
                result = _call(*args, **kwargs)
            finally:
                cpu_ns[_step] += time.thread_time_ns() - started
                calls[_step] += 1
            if repeated_ns is not None:
                again = time.thread_time_ns()
                _call(*args, **kwargs)
                repeated_ns[_step] += time.thread_time_ns() - again
            return result

        originals.append((module, attribute, original))
        setattr(module, attribute, timed)
    try:
        yield
    finally:
        for module, attribute, original in originals:
            setattr(module, attribute, original)


def _name(code: CodeType) -> str:
    path = code.co_filename.split("site-packages/")[-1]
    return f"{path}:{code.co_name}"


class Sampler:
    """Inclusive wall time per function on one thread, charged to the side being measured."""

    def __init__(self, thread_id: int, interval_s: float) -> None:
        self._thread_id = thread_id
        self._interval_s = interval_s
        self.side: Function | None = None
        self.seconds: dict[str, dict[str, float]] = collections.defaultdict(
            lambda: collections.defaultdict(float)
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="path-sampler", daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(self._interval_s):
            now, side = time.perf_counter(), self.side
            elapsed, last = now - last, now
            frame = sys._current_frames().get(self._thread_id)
            if side is None or frame is None:
                continue
            charged = self.seconds[side]
            seen: set[str] = set()
            while frame is not None:
                name = _name(frame.f_code)
                if name not in seen:  # recursion: once per stack
                    seen.add(name)
                    charged[name] += elapsed
                frame = frame.f_back

    @contextmanager
    def running(self) -> Iterator[None]:
        switch = sys.getswitchinterval()
        sys.setswitchinterval(self._interval_s)
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join()
            sys.setswitchinterval(switch)


def _us_per_message(seconds: dict[str, float], suffix: str, name: str, messages: int) -> float:
    return (
        sum(value for key, value in seconds.items() if key.endswith(f"{suffix}:{name}"))
        * 1e6
        / max(messages, 1)
    )


async def profile(
    rounds: int = 6, messages: int = 500, interval_s: float = 0.0003
) -> dict[str, Any]:
    sampler = Sampler(threading.get_ident(), interval_s)
    counted: collections.Counter[str] = collections.Counter()
    cpu_ns: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    with bench_account() as account:
        async with standin(account) as world:
            for function in throughput.FUNCTIONS:  # warm-up, unsampled
                await throughput._round(world, function, 50)
            with sampler.running(), timed_calls(cpu_ns, calls):
                for index in range(rounds):
                    order = throughput.FUNCTIONS if index % 2 == 0 else throughput.FUNCTIONS[::-1]
                    for function in order:
                        await _sampled_round(world, sampler, function, messages)
                        counted[function] += messages
    consumer, floor = sampler.seconds["consumer"], sampler.seconds["floor"]
    steps = {
        "consumer": {
            step: _us_per_message(consumer, *where, counted["consumer"])
            for step, where in CONSUMER_STEPS.items()
        },
        "floor": {
            step: _us_per_message(floor, *where, counted["floor"])
            for step, where in FLOOR_STEPS.items()
        },
    }
    # Code both sides run (the worker, the SDK, gRPC, asyncio): where the platform's own work
    # differs between the sides. The functions only one side runs are its steps, above.
    shared_code = sorted(
        (
            (
                (consumer[n] / counted["consumer"] - floor[n] / counted["floor"]) * 1e6,
                consumer[n] * 1e6 / counted["consumer"],
                floor[n] * 1e6 / counted["floor"],
                n,
            )
            for n in set(consumer) & set(floor)
        ),
        key=lambda row: -abs(row[0]),
    )
    return {
        "rounds": rounds,
        "messages_per_round": messages,
        "interval_s": interval_s,
        "steps_us": steps,
        # Exact, beside the sampled figures above: thread CPU per call through the worker.
        "step_cpu_us": {step: cpu_ns[step] / 1000 / max(calls[step], 1) for step in TIMED_CALLS},
        "shared_code_differences_us": [
            {"function": n, "consumer": c, "floor": f, "difference": d}
            for d, c, f, n in shared_code[:30]
        ],
    }


async def first_and_repeated(rounds: int = 6, messages: int = 500) -> dict[str, Any]:
    """The consumer's timed steps through the worker, thread CPU per call, each as the delivery
    meets it and made again at once (``timed_calls``' ``repeated_ns``): consumer rounds only,
    unsampled. The gap between the two is what the step pays for running cold, its code and data
    evicted by the platform's code since the previous delivery; the repeat is near the step's
    cost alone (``bench.order_path``)."""
    cpu_ns: collections.Counter[str] = collections.Counter()
    repeated_ns: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    with bench_account() as account:
        async with standin(account) as world:
            await throughput._round(world, "consumer", 50)  # warm-up, untimed
            with timed_calls(cpu_ns, calls, repeated_ns):
                for _ in range(rounds):
                    await throughput._round(world, "consumer", messages)
    return {
        "rounds": rounds,
        "messages_per_round": messages,
        "steps_us": {
            step: {
                "first": cpu_ns[step] / 1000 / max(calls[step], 1),
                "repeated": repeated_ns[step] / 1000 / max(calls[step], 1),
            }
            for step in TIMED_CALLS
        },
    }


async def _sampled_round(
    world: StandIn, sampler: Sampler, function: Function, messages: int
) -> None:
    @contextmanager
    def sampled() -> Iterator[None]:
        sampler.side = function
        try:
            yield
        finally:
            sampler.side = None

    await throughput._round(world, function, messages, timed=sampled)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.path_profile", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6, help="rounds per function")
    parser.add_argument("--messages", type=int, default=500, help="per round")
    parser.add_argument(
        "--repeat",
        action="store_true",
        help="instead: each timed step's CPU as the delivery meets it and made again at once",
    )
    arguments = parser.parse_args(argv)
    if arguments.repeat:
        repeated = asyncio.run(first_and_repeated(arguments.rounds, arguments.messages))
        print(f"{'thread CPU µs per call through the worker':44s} {'first':>8s} {'again':>8s}")
        for step, us in repeated["steps_us"].items():
            print(f"  {step:42s} {us['first']:8.1f} {us['repeated']:8.1f}")
        return 0
    found = asyncio.run(profile(arguments.rounds, arguments.messages))
    consumer, floor = found["steps_us"]["consumer"], found["steps_us"]["floor"]
    whole_c = consumer["the whole delivery (handle_delivery)"]
    whole_f = floor["the whole delivery (platform_floor)"]
    write_c, write_f = consumer["store adapter (commit)"], floor["the write (write_documents)"]
    rows = [
        ("the whole delivery", whole_c, whole_f),
        ("  the write (the store adapter / the floor's)", write_c, write_f),
        ("  settle", consumer["settle"], floor["settle"]),
        (
            "  the rest: each side's own code",
            whole_c - write_c - consumer["settle"],
            whole_f - write_f - floor["settle"],
        ),
    ]
    rows += [
        (f"    {step}", consumer[step], 0.0)
        for step in (
            "to_incoming",
            "contract (parse_message)",
            "documents (build_documents)",
            "span (processing)",
            "record_outcome",
        )
    ]
    print(f"{'µs per message on the loop thread':50s} {'consumer':>9s} {'floor':>9s} {'diff':>9s}")
    for label, c, f in rows:
        print(f"{label:50s} {c:9.1f} {f:9.1f} {c - f:9.1f}")
    print("the same steps' CPU per call through the worker (thread CPU time, exact):")
    for step, us in found["step_cpu_us"].items():
        print(f"  {step:48s} {us:9.1f}")
    print("code both sides run, largest differences (consumer - floor, µs per message):")
    for row in found["shared_code_differences_us"]:
        print(
            f"  {row['difference']:8.1f}  (consumer {row['consumer']:8.1f}, floor "
            f"{row['floor']:8.1f})  {row['function']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
