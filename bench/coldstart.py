"""Target 4: cold start. Importing ``function_app`` against importing its third-party
dependencies alone, each in a fresh interpreter, in pairs whose order alternates; the figure is the
median of the pairs' ratios, so that a burst of other load on a shared machine falls inside one
pair and moves one ratio, not a whole side's median.

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
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.stats import rounds

REPO_ROOT = Path(__file__).resolve().parent.parent
# The kit (kit/src/idempotent_consumer) is this repository's code too, installed as a package:
# its import time is the app's own, not a dependency's.
PROJECT_PACKAGES = {"function_app", "shared", "local", "bench", "tests", "idempotent_consumer"}
SOURCE_ROOTS = (REPO_ROOT, REPO_ROOT / "kit" / "src")
TARGET_OVERHEAD = 0.15

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


def _environment(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
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


def measure(runs: int = 25) -> dict[str, Any]:
    deps = third_party_imports()
    deps_body = "\n".join(deps)
    app_body = "import function_app"
    with tempfile.TemporaryDirectory(prefix="coldstart-pycache-") as cache:
        env = _environment(cache)
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
