"""The operator tool runs where operators install it: from requirements-ops.txt alone.

No environment can be built here from that file (no package index offline), so the tests hold
it to what the tool really imports, in a fresh interpreter: (1) every module the tool's modules
load (and the Entra ID credential it loads lazily) belongs to a distribution that
requirements-ops.txt names or that one of them requires; (2) with every other distribution made
unimportable, the tool starts and its commands' modules import; (3) its pins are the app's.
Reverting requirements-ops.txt to nothing (the tool's old state: rich only in
requirements-dev.txt) fails (1) and (2).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
OPS_REQUIREMENTS = REPO / "requirements-ops.txt"
# Every module of the tool an operator runs, and what the tool imports only when it needs it
# (DefaultAzureCredential, the aio clients of ``payments``).
TOOL_MODULES = [
    "ops.cli",
    "ops.servicebus",
    "ops.window",
    "ops.cosmos",
    "ops.parked",
    "ops.parked_cli",
    "ops.audit",
    "ops.audit_cli",
    "ops.send",
    "ops.init_cosmos",
    "ops.stock",
    "ops.stock_cli",
    "ops.cosmos_inventory",
    "ops.payments",
    "ops.payments_cli",
    "ops.cosmos_payments",
    "ops.subscriptions",
    "ops.messaging",
    "ops.sample_orders",
    "azure.identity",
    # what ``payments`` opens only when it runs: the app's store and provider adapters, on the
    # aio clients (aiohttp)
    "shared.adapters.cosmos_orders",
    "shared.adapters.payment_provider",
    "azure.cosmos.aio",
    "azure.identity.aio",
]

# Which installed distribution a module comes from: by its top-level package, and for the
# namespace packages several distributions share (azure, opentelemetry) by the module's own file.
_OWNER = """
import functools
from importlib import metadata
_TOPS = metadata.packages_distributions()

@functools.cache
def _files(dist):
    return tuple(str(file) for file in metadata.distribution(dist).files or ())

@functools.cache
def owner(module):
    parts = module.split(".")
    candidates = _TOPS.get(parts[0], [])
    if len(candidates) <= 1:
        return candidates[0].lower() if candidates else None
    stem = "/".join(parts)
    for dist in candidates:
        for file in _files(dist):
            if file == stem + "/__init__.py" or (
                file.startswith(stem + ".") and file.endswith((".py", ".so", ".pyd"))
            ):
                return dist.lower()
    return None
"""

_LOADED_DISTRIBUTIONS = (
    _OWNER
    + """
import importlib, json, sys
before = set(sys.modules)
for name in sys.argv[1:]:
    importlib.import_module(name)
found = {owner(name) for name in set(sys.modules) - before} - {None}
print(json.dumps(sorted(found)))
"""
)

_ONLY_DECLARED = (
    _OWNER
    + """
import importlib.abc, json, sys
allowed = set(json.loads(sys.argv[1]))

class OnlyDeclared(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        dist = owner(name)
        if dist is not None and dist not in allowed:
            raise ImportError(f"{name} is from {dist}: requirements-ops.txt does not bring it")
        return None  # the other finders find it

sys.meta_path.insert(0, OnlyDeclared())
for name in sys.argv[2:]:
    __import__(name)
from ops.cli import main
raise SystemExit(main(["--help"]))
"""
)


def requirement(line: str) -> tuple[str, str]:
    """A requirement line's distribution name and specifier; a local path (``./kit``, the
    kit's distribution) is the project its ``pyproject.toml`` names, at the path."""
    if line.startswith(("./", "../")):
        project = tomllib.loads((REPO / line / "pyproject.toml").read_text())["project"]
        return project["name"].lower(), line
    parsed = Requirement(line)
    return parsed.name.lower(), str(parsed.specifier)


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def declared() -> list[str]:
    return [requirement(line)[0] for line in requirement_lines(OPS_REQUIREMENTS)]


def closure(names: list[str]) -> set[str]:
    """The distributions these bring, by the installed metadata's requirements (no extras)."""
    seen: set[str] = set()
    todo = [name.lower() for name in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower())
    return {metadata.distribution(name).metadata["Name"].lower() for name in seen}


def test_the_declared_requirements_bring_every_module_the_tool_imports() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_DISTRIBUTIONS, *TOOL_MODULES],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded = {name.lower() for name in json.loads(result.stdout)}

    assert loaded, "the probe found nothing: it is broken"
    assert loaded - closure(declared()) == set()


def test_the_tool_starts_with_only_the_declared_distributions_importable() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _ONLY_DECLARED,
            json.dumps(sorted(closure(declared()))),
            *TOOL_MODULES,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr[-2000:]
    for command in (
        "list",
        "resubmit",
        "purge",
        "parked",
        "audit",
        "send",
        "init-cosmos",
        "payments",
    ):
        assert command in result.stdout


def test_the_operator_pins_are_the_apps() -> None:
    def pins(path: Path) -> dict[str, str]:
        return dict(requirement(line) for line in requirement_lines(path))

    ops, app = pins(OPS_REQUIREMENTS), pins(REPO / "requirements.txt")
    assert {name: ops[name] for name in ops if name in app} == {
        name: app[name] for name in ops if name in app
    }
    for name, specifier in ops.items():  # and what this environment runs
        if specifier.startswith("./"):  # the kit, from this clone: the version of its sources
            project = tomllib.loads((REPO / specifier / "pyproject.toml").read_text())
            assert metadata.version(name) == project["project"]["version"], name
        else:
            assert specifier == f"=={metadata.version(name)}", name
    assert "-r requirements-ops.txt" in (REPO / "requirements-dev.txt").read_text()
