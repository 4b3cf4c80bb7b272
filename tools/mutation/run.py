"""``make mutation``: mutmut over the product modules' function bodies, then the hand-made
constant mutants (``tools.mutation.constants``), then the report (``tools.mutation.report``).

Everything it needs comes from ``[tool.mutmut]`` in pyproject.toml, the one place that lists the
measured modules, the files the tests need beside them and the test selection. It works in
``mutants/`` (mutmut's own directory name), git-ignored by a ``.gitignore`` of its own, so the
work tree is never touched. What it solves for this project (docs/testing.md "How it runs"):

- Microsoft's worker imports ``function_app.py`` from the app directory, which ``local/`` takes
  to be its own parent: ``local/`` and ``function_app.py`` are copied beside the mutated
  ``shared/`` (``also_copy``), so the worker imports the mutated package, never the original.
- cosmosdb-server is started by ``local/standins/cosmos_server.py`` from ``<copy>/node_modules``: a
  symbolic link to the repo's, or to ``$MUTATION_NODE_MODULES`` (copying 400 MB per run would be
  the alternative). It is checked before the run, and the unmutated selection runs once more
  after each half: mutmut counts any failing run as a kill, so a dependency that went missing
  mid-run (another checkout's ``npm ci`` emptying a shared node_modules) would otherwise pass
  for a perfect score.
- The settlement server is gRPC, which is not fork-safe once used: mutmut forks its workers
  from a fork server that has only collected the tests (``process_isolation = "forkserver"``).
- pytest-asyncio's session loop and the session fixtures start afresh in every worker (each
  mutant is its own ``pytest.main``); hypothesis runs with a fixed seed, so a kill is repeatable.

A fresh run (no mutant names) starts from an empty ``mutants/``: mutmut keeps a survivor's
verdict across runs even when a new test would kill it, so a committed report is only ever
written from a fresh run. With mutant names (globs, as ``mutmut run`` takes them) only those are
run again, on top of the last run's results: the loop for killing one survivor.

``--modules`` and ``--selection`` narrow one run (a fresh one, or the re-runs over it: the run
record keeps them) to some of the measured modules and the tests that reach them, without
editing pyproject.toml: mutmut runs under ``tools.mutation.scoped``, which narrows its
configuration in its own process, and the report covers those modules only.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from typing import Any

from tools.mutation import scoped
from tools.mutation.constants import MUTANTS, ConstantMutant, StaleMutant

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "mutants"  # mutmut's directory; its name is fixed inside mutmut
CONSTANT_RESULTS = WORK / "constant-results.json"
RUN_RECORD = WORK / "run.json"
# A full run of the selection takes under a minute; a mutant that hangs it is a timeout (caught).
CONSTANT_TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class MutationConfig:
    modules: tuple[str, ...]
    source_paths: tuple[str, ...]
    also_copy: tuple[str, ...]
    selection: tuple[str, ...]
    pytest_args: tuple[str, ...]

    @classmethod
    def load(cls, pyproject: Path = REPO / "pyproject.toml") -> MutationConfig:
        table: dict[str, Any] = tomllib.loads(pyproject.read_text())["tool"]["mutmut"]
        return cls(
            modules=tuple(table["only_mutate"]),
            source_paths=tuple(table["source_paths"]),
            also_copy=tuple(table.get("also_copy", [])),
            selection=tuple(table["pytest_add_cli_args_test_selection"]),
            pytest_args=tuple(table.get("pytest_add_cli_args", [])),
        )

    def narrowed(
        self, modules: Sequence[str] | None, selection: Sequence[str] | None
    ) -> MutationConfig:
        """This configuration for one run: ``modules`` a subset of the measured ones."""
        unknown = sorted(set(modules or ()) - set(self.modules))
        if unknown:
            raise SystemExit(f"not in [tool.mutmut] only_mutate: {', '.join(unknown)}")
        return dataclasses.replace(
            self,
            modules=tuple(modules) if modules else self.modules,
            selection=tuple(selection) if selection else self.selection,
        )

    def copied_paths(self) -> tuple[str, ...]:
        """What a copy of the project needs to run the selection (as mutmut copies it)."""
        return (*self.source_paths, *self.also_copy, "tests/", "pyproject.toml")


def prepare(*, fresh: bool) -> None:
    if fresh and WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(exist_ok=True)
    (WORK / ".gitignore").write_text("*\n")
    _link_node_modules(WORK)


def node_modules() -> Path:
    path = Path(os.environ.get("MUTATION_NODE_MODULES") or REPO / "node_modules").resolve()
    if not (path / "@vercel" / "cosmosdb-server" / "lib" / "cli.js").exists():
        raise SystemExit(f"{path} has no @vercel/cosmosdb-server: run `make install` first")
    return path


def _link_node_modules(copy: Path) -> None:
    link = copy / "node_modules"
    if not link.is_symlink() and not link.exists():
        link.symlink_to(node_modules(), target_is_directory=True)


def run_mutmut(config: MutationConfig, names: Sequence[str], max_children: int) -> int:
    """mutmut's progress goes to ``mutants/mutmut.log`` (a spinner line per mutant)."""
    command = [
        *(sys.executable, "-m", "tools.mutation.scoped"),
        *("run", "--max-children", str(max_children), *names),
    ]
    print(f"mutmut: {' '.join(command[3:])} (progress in {WORK.name}/mutmut.log)", flush=True)
    env = {
        **_mutated_kit_first(WORK),
        scoped.MODULES_ENV: json.dumps(config.modules),
        scoped.SELECTION_ENV: json.dumps(config.selection),
    }
    with (WORK / "mutmut.log").open("ab") as log:
        return subprocess.run(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        ).returncode


def _mutated_kit_first(copy: Path) -> dict[str, str]:
    """The environment with the copy's kit sources first on the path: the app imports the kit
    as an installed distribution (requirements.txt: ./kit), which would otherwise shadow the
    mutated copy."""
    kit = copy / "kit" / "src"
    # Made before the interpreter starts: a path entry that does not exist when Python first
    # looks there is cached as having no modules (sys.path_importer_cache: None) for the life
    # of the process and of every fork of it, and the kit is then imported from the next entry
    # (the unmutated one: every kit mutant "no tests"), though mutmut copies it there later.
    kit.mkdir(parents=True, exist_ok=True)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(kit) if not path else f"{kit}{os.pathsep}{path}"}


def selected_constants(config: MutationConfig, names: Sequence[str]) -> list[ConstantMutant]:
    measured = [m for m in MUTANTS if m.module in config.modules]
    if not names:
        return measured
    return [m for m in measured if any(fnmatch.fnmatchcase(m.name, name) for name in names)]


def run_constants(
    config: MutationConfig, mutants: Iterable[ConstantMutant], workers: int
) -> dict[str, dict[str, Any]]:
    """Each mutant applied to a copy of the project, the selection run there with ``-x``."""
    results: dict[str, dict[str, Any]] = (
        json.loads(CONSTANT_RESULTS.read_text()) if CONSTANT_RESULTS.exists() else {}
    )
    todo = list(mutants)
    copies: Queue[Path] = Queue()
    for index in range(max(1, min(workers, len(todo)))):
        copies.put(_project_copy(config, WORK / "constants" / f"worker-{index}"))

    def run_one(mutant: ConstantMutant) -> tuple[str, dict[str, Any]]:
        copy = copies.get()
        try:
            return mutant.name, _run_constant(config, mutant, copy)
        finally:
            copies.put(copy)

    print(f"constant mutants: {len(todo)} on {copies.qsize()} copies", flush=True)
    with ThreadPoolExecutor(copies.qsize()) as pool:
        for done, (name, result) in enumerate(pool.map(run_one, todo), start=1):
            results[name] = result
            print(f"  [{done}/{len(todo)}] {result['status']:8} {name}", flush=True)
            CONSTANT_RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


def _project_copy(config: MutationConfig, copy: Path) -> Path:
    if copy.exists():
        shutil.rmtree(copy)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for relative in config.copied_paths():
        source = REPO / relative
        if source.is_dir():
            shutil.copytree(source, copy / relative, ignore=ignore)
        elif source.exists():
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / relative)
    _link_node_modules(copy)
    return copy


def _run_constant(config: MutationConfig, mutant: ConstantMutant, copy: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"module": mutant.module, "old": mutant.old, "new": mutant.new}
    target = copy / mutant.module
    original = target.read_text()
    try:
        target.write_text(mutant.apply(original))
    except StaleMutant as stale:
        return {**result, "status": "stale", "detail": str(stale)}
    try:
        return {**result, **_run_selection(config, copy)}
    finally:
        target.write_text(original)


def _run_selection(config: MutationConfig, copy: Path) -> dict[str, Any]:
    """The selection in ``copy``: survived (all passed), killed, or timeout."""
    # No bytecode is read or written: a mutant and its restored original may share an mtime.
    env = {**_mutated_kit_first(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MUTANT_UNDER_TEST", None)
    command = [
        sys.executable,
        *("-m", "pytest", "-x", "-q", "-p", "no:randomly"),
        *config.pytest_args,
        *config.selection,
    ]
    started = time.monotonic()
    result: dict[str, Any] = {}
    try:
        completed = subprocess.run(
            command, cwd=copy, env=env, capture_output=True, timeout=CONSTANT_TIMEOUT_S
        )
        # pytest: 0 all passed, 1 a test failed, 2 interrupted (e.g. the mutant broke an import
        # at collection), 3 internal error: everything but 0 is a test run the mutant broke.
        result["status"] = "survived" if completed.returncode == 0 else "killed"
        output = completed.stdout.decode("utf-8", "replace").strip().splitlines()
        failed = [line for line in output if line.startswith(("FAILED", "ERROR"))]
        result["evidence"] = failed[0] if failed else (output[-1] if output else "")
    except subprocess.TimeoutExpired:
        result["status"] = "timeout"
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def clean_run(config: MutationConfig, when: str) -> dict[str, Any]:
    """The unmutated selection must pass, or no kill of the run means anything."""
    result = _run_selection(config, _project_copy(config, WORK / "constants" / "clean"))
    passed = result["status"] == "survived"
    print(f"clean run {when}: {'passed' if passed else 'FAILED: ' + result.get('evidence', '')}")
    return {"when": when, "passed": passed, "evidence": result.get("evidence", "")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mutation", description=__doc__)
    parser.add_argument(
        "mutants", nargs="*", help="mutant name globs to run again (default: a fresh full run)"
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--modules", nargs="+", help="only these of only_mutate (kept for the re-runs over it)"
    )
    parser.add_argument(
        "--selection", nargs="+", help="these tests instead of the configured selection"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report from the last results"
    )
    parser.add_argument(
        "--run", type=int, help="the report's run number for this run (keeps the other runs)"
    )
    parser.add_argument("--title", default="", help="with --run: its section's title")
    args = parser.parse_args(argv)
    from tools.mutation import report  # imports mutmut's own modules

    names: list[str] = args.mutants
    # --modules starts a fresh run; with mutant names too, only those of its modules run (the
    # others can follow by name, over its results).
    fresh = bool(args.modules) or not (names or args.report_only)
    record: dict[str, Any] = (
        json.loads(RUN_RECORD.read_text()) if RUN_RECORD.exists() and not fresh else {}
    )
    config = MutationConfig.load().narrowed(
        args.modules or record.get("modules"), args.selection or record.get("selection")
    )
    if args.report_only:
        report.write(config, args.run, args.title)
        return 0
    node_modules()
    prepare(fresh=fresh)
    started = time.time()
    # Written before mutmut starts: a run stopped midway still says what it measured.
    RUN_RECORD.write_text(
        json.dumps({**record, "modules": config.modules, "selection": config.selection})
    )
    checks: list[dict[str, Any]] = [] if fresh else record.get("clean_runs", [])
    mutmut_names = [n for n in names if ".const__" not in n]
    if fresh or mutmut_names:
        code = run_mutmut(config, mutmut_names, args.max_children)
        if code != 0:
            print(f"mutmut failed ({code}): see {WORK.name}/mutmut.log", file=sys.stderr)
            return code
        checks.append(clean_run(config, "after mutmut"))
    constants = selected_constants(config, names)
    if constants:
        run_constants(config, constants, args.max_children)
        checks.append(clean_run(config, "after the constant mutants"))
    if fresh:
        record = {"started": started, "seconds": round(time.time() - started)}
    record.update(modules=config.modules, selection=config.selection)
    record["clean_runs"] = checks
    if not fresh:
        record.setdefault("reruns", []).append(names)
    RUN_RECORD.write_text(json.dumps(record))
    report.write(config, args.run, args.title)
    return 0 if all(check["passed"] for check in checks) else 1
