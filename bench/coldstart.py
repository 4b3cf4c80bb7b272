"""Target 4: cold start, two figures.

The first: importing ``function_app`` against importing its third-party dependencies alone, each
in a fresh interpreter, in pairs whose order alternates; the figure is the median of the pairs'
ratios, so that a burst of other load on a shared machine falls inside one pair and moves one
ratio, not a whole side's median.

The second (``first_message``): what a user feels, a fresh interpreter to the first message
settled through Microsoft's worker (the app's import, the worker's indexing and loads, the first
decide, write and settlement: ``bench.first_message`` is the child), the product's app against
the platform floor's (``bench.floor_alone_app``), in fresh children, pairs whose order
alternates, the median of the pairs' CPU-time ratios. It needs a Cosmos DB API: the account
given, else ``COSMOS_EMULATOR_ENDPOINT``'s, else a local server for its duration.

Both sides run with bytecode caches (written by one untimed run each into a directory of this
measurement's own, ``PYTHONPYCACHEPREFIX``), whatever the caller's environment says: with
``PYTHONDONTWRITEBYTECODE`` set, the app's modules would be compiled from source in every run and
the dependencies' read from their installed caches, which measures the compiler, not the imports.

The dependency set is derived from the source: every module-level import statement of
``function_app`` and of the project modules it imports (transitively), keeping those whose top-level
package is neither this repository's nor the standard library's. The same statements are executed
in the baseline process, so both sides load exactly the same third-party code; the difference is
this repository's own modules (and the few standard-library modules only they import).
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from idempotent_consumer import IncomingMessage

from bench.orders import order_bytes
from bench.standin import bench_account
from bench.stats import rounds
from local.assembly.world import CosmosAccount, app_settings
from local.standins.cosmos_server import ensure_container
from shared.adapters.cosmos_orders import create_client
from shared.config import Settings
from shared.consumer.contract import parse_order
from shared.consumer.core import build_documents

REPO_ROOT = Path(__file__).resolve().parent.parent
# The kit (kit/src/idempotent_consumer) is this repository's code too, installed as a package:
# its import time is the app's own, not a dependency's.
PROJECT_PACKAGES = {"function_app", "shared", "local", "bench", "tests", "idempotent_consumer"}
SOURCE_ROOTS = (REPO_ROOT, REPO_ROOT / "kit" / "src")
TARGET_OVERHEAD = 0.10
# The consumer's app from a fresh interpreter to its first message settled, at most 1.25 × the
# platform floor's (docs/benchmarks.md, target 4, says why this bound).
TARGET_FIRST_MESSAGE_RATIO = 1.25

# The import's CPU time (this process's, all threads) and its wall time. The figure reads CPU
# time: an import is CPU-bound once its files are cached, and on a shared machine the wall time
# also counts the moments other processes held the cores, which no code here controls.
_TIMER = (
    "import time\n_c, _w = time.process_time(), time.perf_counter()\n{body}\n"
    "print(repr(time.process_time() - _c), repr(time.perf_counter() - _w))\n"
)


def _module_path(module: str) -> Path | None:
    parts = module.split(".")
    for root in SOURCE_ROOTS:
        for candidate in (
            root.joinpath(*parts).with_suffix(".py"),
            root.joinpath(*parts, "__init__.py"),
        ):
            if candidate.exists():
                return candidate
    return None


def third_party_imports(entry: str = "function_app") -> list[str]:
    """Module-level import statements of third-party code, reached from ``entry``."""
    seen: set[str] = set()
    statements: list[str] = []
    pending = [entry]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_path(module)
        if path is None:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                # A package's own modules (the kit's ``from ._message import ...``): follow them.
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{node.module}" if node.module else package
                pending.append(base)
                pending.extend(f"{base}.{alias.name}" for alias in node.names)
                continue
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
                if node.module.split(".")[0] in PROJECT_PACKAGES:
                    # ``from shared import bootstrap`` imports a module; follow it too.
                    pending.extend(f"{node.module}.{alias.name}" for alias in node.names)
            else:
                continue
            top = names[0].split(".")[0]
            if top in PROJECT_PACKAGES:
                pending.extend(names)
            elif top not in sys.stdlib_module_names and top != "__future__":
                statement = ast.unparse(node)
                if statement not in statements:
                    statements.append(statement)
    return statements


# The deployed app settings that change a cold start, on both sides as in Azure (app settings
# are the worker's environment): infra/app/function.bicep sets them (tests/infra holds the two
# equal).
DEPLOYED_SETTINGS = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


def _environment(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= DEPLOYED_SETTINGS
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def _run(body: str, env: dict[str, str]) -> tuple[float, float]:
    """The CPU and wall seconds of ``body`` in a fresh interpreter."""
    completed = subprocess.run(
        [sys.executable, "-c", _TIMER.format(body=body)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    cpu, wall = completed.stdout.strip().splitlines()[-1].split()
    return float(cpu), float(wall)


def own_module_times(env: dict[str, str]) -> dict[str, float]:
    """Self time (ms) of this repository's modules in one ``-X importtime`` run."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import function_app"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    times: dict[str, float] = {}
    for line in completed.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        fields = [field.strip() for field in line.removeprefix("import time:").split("|")]
        name = fields[2]
        if name.split(".")[0] in PROJECT_PACKAGES and fields[0].isdigit():
            times[name] = int(fields[0]) / 1000
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def imports(runs: int, env: dict[str, str]) -> dict[str, Any]:
    """The first figure: ``function_app``'s import against its third-party imports alone."""
    deps = third_party_imports()
    deps_body = "\n".join(deps)
    app_body = "import function_app"
    # One untimed run each: bytecode caches written, files in the page cache.
    _run(deps_body, env)
    _run(app_body, env)
    app_times: list[tuple[float, float]] = []
    deps_times: list[tuple[float, float]] = []
    for index in range(runs):
        pair = [(app_body, app_times), (deps_body, deps_times)]
        for body, sink in pair if index % 2 == 0 else reversed(pair):
            sink.append(_run(body, env))
    own = own_module_times(env)
    ratios = [app[0] / deps[0] for app, deps in zip(app_times, deps_times, strict=True)]
    overhead = statistics.median(ratios) - 1
    app, dependencies = (rounds([cpu * 1000 for cpu, _ in t]) for t in (app_times, deps_times))
    wall_ratios = [app[1] / deps[1] for app, deps in zip(app_times, deps_times, strict=True)]
    return {
        "runs": runs,
        "dependency_imports": deps,
        "function_app_ms": app,
        "dependencies_ms": dependencies,
        # Each pair's app / dependencies (CPU time), minus one: the spread of the figure.
        "overhead_per_pair": rounds([ratio - 1 for ratio in ratios]),
        "overhead": overhead,
        # The same pairs' wall time, for reference: noisier on a shared machine.
        "wall_overhead": statistics.median(wall_ratios) - 1,
        "function_app_wall_ms": rounds([wall * 1000 for _, wall in app_times]),
        "dependencies_wall_ms": rounds([wall * 1000 for _, wall in deps_times]),
        "own_modules_self_ms": own,
        # Less noisy than the difference of two medians: this repository's modules' own import
        # time (one -X importtime run) against the dependencies' median.
        "own_self_time_share": sum(own.values()) / dependencies["median"],
        "target_overhead": TARGET_OVERHEAD,
        "ok": overhead <= TARGET_OVERHEAD,
    }


def measure(
    runs: int = 40, first_message_rounds: int = 10, account: CosmosAccount | None = None
) -> dict[str, Any]:
    """Both figures, with bytecode caches of their own; ``first_message_rounds`` 0 skips the
    second (and its Cosmos DB account: ``account``, else ``COSMOS_EMULATOR_ENDPOINT``'s, else a
    local server for the duration)."""
    with tempfile.TemporaryDirectory(prefix="coldstart-pycache-") as cache:
        env = _environment(cache)
        results = imports(runs, env)
        if first_message_rounds:
            results["first_message"] = first_message(first_message_rounds, env, account)
    results["ok"] = results["ok"] and results.get("first_message", {}).get("ok", True)
    return results


# The second figure: a fresh interpreter to the first message settled, the consumer's app against
# the platform floor's (bench.first_message is the child).
FIRST_MESSAGE_SIDES = ("consumer", "floor")


def _first_message_order(side: str) -> dict[str, Any]:
    """A new order for one child (a new id each run: every first message is a new order), with
    the documents the consumer writes for it, which the floor writes as given."""
    order_id = f"cold-{side}-{uuid.uuid4().hex[:12]}"
    body = order_bytes(order_id)
    documents = build_documents(
        parse_order(body, order_id),
        IncomingMessage(order_id, body, f"corr-{order_id}"),
        outbox_enabled=True,
        accepted_at=datetime.now(UTC),
    )
    return {"message_id": order_id, "body": body.decode("utf-8"), "documents": documents}


def _first_message_run(side: str, env: dict[str, str], directory: Path) -> dict[str, Any]:
    """One child: its CPU seconds by phase (its own report) and the wall seconds from spawning it
    to its report, the line it prints the moment the message is settled."""
    order_file = directory / f"{side}.json"
    order_file.write_text(json.dumps(_first_message_order(side)))
    with tempfile.TemporaryFile("w+") as errors:
        started = time.perf_counter()
        with subprocess.Popen(
            [sys.executable, "-m", "bench.first_message", side, str(order_file)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        ) as child:
            assert child.stdout is not None
            line = child.stdout.readline()
            wall = time.perf_counter() - started
            child.stdout.read()
        if child.returncode != 0 or not line:
            errors.seek(0)
            raise RuntimeError(f"first message, {side}: {errors.read()[-3000:]}")
    report: dict[str, Any] = json.loads(line)
    report["wall_s"] = wall
    return report


@contextmanager
def _account(given: CosmosAccount | None) -> Iterator[CosmosAccount]:
    if given is not None:
        yield given
        return
    with bench_account() as account:
        yield account


@contextmanager
def _orders_container(given: CosmosAccount | None) -> Iterator[tuple[CosmosAccount, str]]:
    """The account (``_account``) and a new container in it, deleted at the end."""
    name = f"bench-cold-{uuid.uuid4().hex[:10]}"
    with _account(given) as account:
        settings = Settings.from_env(app_settings(account, container=name))

        async def container(create: bool) -> None:
            async with create_client(settings) as client:
                if create:
                    await ensure_container(client, settings.cosmos_database, name)
                else:
                    database = client.get_database_client(settings.cosmos_database)
                    await database.delete_container(name)

        asyncio.run(container(create=True))
        try:
            yield account, name
        finally:
            asyncio.run(container(create=False))


def first_message(
    rounds_count: int,
    env: dict[str, str],
    account: CosmosAccount | None = None,
    *,
    warm_up: bool = True,
) -> dict[str, Any]:
    """The consumer's app and the floor's, each from a fresh interpreter to its first message
    settled, in pairs whose order alternates; one untimed child per side first (bytecode caches
    written, files in the page cache) unless ``warm_up`` is off (a test's). ``env``: the
    children's environment, to which the app settings are added (the consumer composes itself
    from them on its first message)."""
    reports: dict[str, list[dict[str, Any]]] = {side: [] for side in FIRST_MESSAGE_SIDES}
    with (
        _orders_container(account) as (account, container),
        tempfile.TemporaryDirectory() as directory,
    ):
        env = {**env, **app_settings(account, container=container)}
        for side in FIRST_MESSAGE_SIDES if warm_up else ():
            _first_message_run(side, env, Path(directory))
        for index in range(rounds_count):
            order = FIRST_MESSAGE_SIDES if index % 2 == 0 else FIRST_MESSAGE_SIDES[::-1]
            for side in order:
                reports[side].append(_first_message_run(side, env, Path(directory)))
    consumer, floor = reports["consumer"], reports["floor"]
    ratios = [c["cpu_s"] / f["cpu_s"] for c, f in zip(consumer, floor, strict=True)]
    wall_ratios = [c["wall_s"] / f["wall_s"] for c, f in zip(consumer, floor, strict=True)]
    ratio = statistics.median(ratios)

    def ms(side: str, key: str) -> dict[str, Any]:
        return rounds([report[key] * 1000 for report in reports[side]])

    return {
        "rounds": rounds_count,
        "consumer_ms": ms("consumer", "cpu_s"),
        "floor_ms": ms("floor", "cpu_s"),
        # Each pair's consumer / floor (CPU time, the child's from its start): the figure's spread.
        "ratio_per_pair": rounds(ratios),
        "ratio": ratio,
        "phases_ms": {
            side: {
                phase: statistics.median([r[f"{phase}_cpu_s"] * 1000 for r in reports[side]])
                for phase in ("harness", "worker_start", "first_message")
            }
            for side in FIRST_MESSAGE_SIDES
        },
        # The app's modules (``shared.*``) each side's worker loaded: the floor's must be none.
        "app_modules": {side: reports[side][-1]["app_modules"] for side in FIRST_MESSAGE_SIDES},
        "consumer_wall_ms": ms("consumer", "wall_s"),
        "floor_wall_ms": ms("floor", "wall_s"),
        "wall_ratio": statistics.median(wall_ratios),
        "target_ratio": TARGET_FIRST_MESSAGE_RATIO,
        "ok": ratio <= TARGET_FIRST_MESSAGE_RATIO,
    }
