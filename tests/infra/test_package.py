"""The deployment package: `.funcignore` ships what the app needs at run time and nothing else.

What ships is computed from `.funcignore` as azd computes it: gitignore syntax (pathspec's
``GitIgnoreSpec``, which follows git's own rules), over the tree walked top down, a directory
that is excluded never entered (git's rule, and how azd copies the service folder before it
zips it). Sources: the Learn page and the azure-dev pull request cited in `.funcignore` itself.
Core Tools' own reading (`func azure functionapp publish`) is held to the same boundary.

Checked to fail: both "ships the app" tests with the `.funcignore` of before (a deny list that
left out tests/, local/, infra/, docs/ and bench/ but shipped ops/, tools/, requirements-ops.txt,
mutants/ and the linter's cache); those two and the closure test with `!/shared/` dropped; the
closure test with function_app.py importing a module of ops/. The kit (kit/, a distribution of
its own that requirements.txt installs from its path, ``./kit``): the path-requirement test and
the closure test fail with `!/kit/` dropped from `.funcignore`.

A local build's leftovers in kit/ (``kit/build/``, ``kit/dist/``, ``*.egg-info``): azd's reading
excludes them; Core Tools' cannot (its `!/kit/` wins over every exclusion), and a stale module in
``kit/build/lib`` enters the wheel the remote build makes from ``./kit`` (shown below through
pip). So none may be left in the tree: the kit's builds leave none (``make install`` removes
pip's in-tree build, tests/kit/test_fresh_app.py builds from a copy), and the tree is checked.
Checked to fail: the leftover check with a ``kit/build/lib`` file present (what pip's in-tree
build of ``./kit`` leaves, as the stale-module test shows, and ``make install`` left before it
removed it).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pathspec

from shared import config
from tests.infra.infra_support import REPO

FUNCIGNORE = REPO / ".funcignore"

# What the app reads at run time: its entry point, the host's configuration (which
# shared/config.py also reads), the requirements the remote build installs, and the package.
APP_FILES = {"function_app.py", "host.json", "requirements.txt"}
APP_PACKAGE = "shared"
# The kit's distribution: requirements.txt installs it from this path (``./kit``), so the remote
# build (Oryx runs ``pip install -r requirements.txt`` in the deployed folder) needs its sources.
KIT = "kit"
KIT_SOURCES = REPO / KIT / "src"
# What a local build of the kit leaves in its folder: never shipped, never built from.
KIT_LEFTOVERS = ("kit/build/", "kit/dist/")

# Never shipped. Some exist only on some machines (a mutation run's copy, the linter's cache, an
# azd environment, a developer's settings): they are checked as if present.
NOT_SHIPPED = [
    "local/",
    "tests/",
    "bench/",
    "ops/",
    "tools/",
    "infra/",
    "docs/",
    "emulators/",
    "node_modules/",
    ".venv/",
    ".venv-infra/",
    "mutants/",
    ".import_linter_cache/",
    ".azure/",
    ".python_packages/",
    "requirements-dev.txt",
    "requirements-ops.txt",
    "requirements-infra.txt",
    "local.settings.json",
    "local.settings.json.template",
    "pyproject.toml",
    "Makefile",
    "azure.yaml",
    "README.md",
    "mkdocs.yml",
    "site/",
    ".funcignore",
    *KIT_LEFTOVERS,
    "kit/src/idempotent_consumer_azure.egg-info/",
]
ABSENT_EXAMPLES = [
    "mutants/shared/config.py",
    ".import_linter_cache/graph.data",
    ".azure/dev/.env",
    ".python_packages/lib/site-packages/x.py",
    "local.settings.json",
    ".venv/lib/python3.13/site-packages/azure/cosmos/__init__.py",
    "node_modules/@vercel/cosmosdb-server/package.json",
    "shared/__pycache__/config.cpython-313.pyc",
    "shared/relay/__pycache__/core.cpython-313.pyc",
    "site/index.html",
    "kit/build/lib/idempotent_consumer/_removed_long_ago.py",
    "kit/dist/idempotent_consumer_azure-0.1.0-py3-none-any.whl",
    "kit/src/idempotent_consumer_azure.egg-info/PKG-INFO",
    "kit/src/idempotent_consumer/__pycache__/_decision.cpython-313.pyc",
]


def azd_spec() -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(FUNCIGNORE.read_text().splitlines())


def candidate_files() -> set[str]:
    """Every file of this checkout, relative and with "/", plus ABSENT_EXAMPLES. A directory the
    azd reading excludes is not entered (.venv alone holds tens of thousands of files): one
    representative file stands for it."""
    spec = azd_spec()
    files = set(ABSENT_EXAMPLES)
    for top, dirs, names in os.walk(REPO, followlinks=True):
        relative_top = Path(top).relative_to(REPO).as_posix()
        prefix = "" if relative_top == "." else relative_top + "/"
        kept = []
        for name in dirs:
            if spec.match_file(prefix + name + "/"):
                files.add(prefix + name + "/x")
            else:
                kept.append(name)
        dirs[:] = kept
        files.update(prefix + name for name in names)
    return files


def shipped_by_azd(files: Iterable[str]) -> set[str]:
    """gitignore over a walk: a file ships when no ancestor directory and not the file itself is
    excluded (the last matching line decides, `!` re-including)."""
    spec = azd_spec()

    def ships(path: str) -> bool:
        parts = path.split("/")
        ancestors = ("/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1))
        return not any(spec.match_file(d) for d in ancestors) and not spec.match_file(path)

    return {path for path in files if ships(path)}


def core_tools_regex(pattern: str) -> str:
    # GitIgnoreParser.PrepareRegexPattern (azure-functions-core-tools
    # src/Azure.Functions.Cli/Common/GitIgnoreParser.cs): escape, "**" -> "(.+)", "*" -> "([^/]+)".
    escaped = re.sub(r"[\-\[\]/{}()+?.\\^$|]", lambda m: "\\" + m.group(0), pattern)
    return escaped.replace("**", "(.+)").replace("*", "([^\\/]+)")


def shipped_by_core_tools(files: Iterable[str]) -> set[str]:
    """Core Tools' reading (GitIgnoreParser.cs): lines trimmed, "#" lines dropped, a leading "!"
    makes a line a re-inclusion and a leading "/" is dropped; every pattern is a regex anchored
    at the start only; a file ships when a re-inclusion matches or no exclusion does. It checks
    every file (no directory is pruned)."""
    excluded: list[str] = []
    included: list[str] = []
    for raw in FUNCIGNORE.read_text().split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        target = included if line.startswith("!") else excluded
        target.append(core_tools_regex(line.removeprefix("!").removeprefix("/")))

    def anchored(patterns: list[str]) -> re.Pattern[str]:
        return re.compile("^((" + ")|(".join(sorted(patterns)) + "))" if patterns else "$^")

    excludes, includes = anchored(excluded), anchored(included)
    return {p for p in files if includes.match(p) or not excludes.match(p)}


def is_build_output(path: str) -> bool:
    parts = path.split("/")
    return (
        "__pycache__" in parts
        or path.endswith((".pyc", ".pyo"))
        or any(part.endswith(".egg-info") for part in parts)
        or path.startswith(KIT_LEFTOVERS)
    )


def expected_package(files: Iterable[str]) -> set[str]:
    """The app: its three files, every file of shared/ and of the kit's distribution but the
    build outputs (bytecode caches, a local build's leftovers)."""
    return {
        path
        for path in files
        if path in APP_FILES
        or (path.startswith((APP_PACKAGE + "/", KIT + "/")) and not is_build_output(path))
    }


def under(path: str, entry: str) -> bool:
    return path.startswith(entry) if entry.endswith("/") else path == entry


def test_azd_ships_the_app_and_nothing_else() -> None:
    files = candidate_files()
    shipped = shipped_by_azd(files)

    assert shipped >= APP_FILES
    assert {p for p in files if p.startswith("shared/") and p.endswith(".py")} <= shipped
    for entry in NOT_SHIPPED:
        assert not [p for p in shipped if under(p, entry)], f"{entry} ships"
    assert shipped == expected_package(files)


def test_core_tools_ships_the_app_and_none_of_the_rest() -> None:
    """Core Tools' parser re-includes all of shared/, bytecode caches too (its `!` lines win over
    `__pycache__/`): harmless; everything else is as azd ships it."""
    files = candidate_files()
    shipped = shipped_by_core_tools(files)

    assert expected_package(files) <= shipped
    for entry in NOT_SHIPPED:
        if entry.startswith(KIT + "/"):
            continue  # its `!/kit/` wins too: a local build's leftovers would ship (below)
        assert not [p for p in shipped if under(p, entry)], f"{entry} ships"
    assert {p for p in shipped if not p.startswith(("shared/", KIT + "/"))} == APP_FILES


def repo_module_file(name: str) -> Path | None:
    """The file of a module of this repository: the app's, or the kit's (its sources)."""
    for root in (REPO, KIT_SOURCES):
        base = root.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def imported_names(path: Path, module: str) -> set[str]:
    """The modules one file imports, at any depth of its body (TYPE_CHECKING blocks included:
    conservative), relative imports resolved against its package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            names.add(origin)
            names.update(f"{origin}.{alias.name}" for alias in node.names)
    return names


def import_closure(entry: Path) -> set[str]:
    """The files of this repository that importing ``entry`` runs: every module it imports
    transitively, and the ``__init__.py`` of each package on the way."""
    seen: dict[str, Path] = {}
    queue = [(entry.stem, entry)]
    while queue:
        module, path = queue.pop()
        for name in imported_names(path, module):
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):
                prefix = ".".join(parts[:depth])
                found = repo_module_file(prefix)
                if found is not None and prefix not in seen:
                    seen[prefix] = found
                    queue.append((prefix, found))
    return {path.relative_to(REPO).as_posix() for path in [entry, *seen.values()]}


def test_every_module_function_app_imports_ships() -> None:
    closure = import_closure(REPO / "function_app.py")
    shipped = shipped_by_azd(candidate_files())

    # the walk reaches the whole app: the composition root, both cores, every adapter
    assert {
        "shared/__init__.py",
        "shared/bootstrap.py",
        "shared/consumer/core.py",
        "shared/relay/core.py",
        "shared/adapters/cosmos_orders.py",
        "kit/src/idempotent_consumer/servicebus/_settlement.py",
        "kit/src/idempotent_consumer/cosmos/_store.py",
        "shared/telemetry/exporters.py",
        "kit/src/idempotent_consumer/__init__.py",
        "kit/src/idempotent_consumer/_service.py",
    } <= closure
    assert sorted(closure - shipped) == []


def test_each_path_requirement_ships_with_what_its_build_reads() -> None:
    """requirements.txt installs the kit from ``./kit``: the remote build runs pip there, in the
    deployed folder, so the distribution's project file, README (its long description) and every
    source file must ship, and none of a local build's leftovers."""
    lines = [
        line.split("#", 1)[0].strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
    ]
    paths = [line for line in lines if line.startswith("./")]
    files = candidate_files()
    shipped = shipped_by_azd(files)

    assert paths == ["./" + KIT]
    for path in paths:
        root = path.removeprefix("./")
        sources = {p for p in files if p.startswith(root + "/src/") and not is_build_output(p)}
        assert {f"{root}/pyproject.toml", f"{root}/README.md"} <= shipped
        assert f"{root}/src/idempotent_consumer/py.typed" in sources
        assert sources <= shipped
        assert not [p for p in shipped if p.startswith(root + "/") and is_build_output(p)]


def test_the_files_the_app_reads_at_run_time_ship() -> None:
    """shared/config.py reads host.json (maxConcurrentCalls) next to the package; nothing in
    shared/ reads infra/ (infra/messaging.json is ops/'s and local/'s)."""
    shipped = shipped_by_azd(candidate_files())

    assert config.HOST_JSON.relative_to(REPO).as_posix() in shipped


def kit_leftovers(root: Path) -> list[str]:
    """What a local build leaves in the kit's folder: ``build/``, ``dist/``, ``*.egg-info``."""
    kit = root / KIT
    found = [kit / "build", kit / "dist", *kit.rglob("*.egg-info")]
    return sorted(path.relative_to(root).as_posix() for path in found if path.exists())


def test_no_build_leftover_is_in_the_kit_a_publish_could_ship() -> None:
    """Core Tools would ship them (its `!/kit/` wins): the tree holds none. A leftover here
    comes from a build run in kit/ itself (``python -m build kit``, ``pip install ./kit``):
    remove it (``rm -rf kit/build kit/dist kit/src/*.egg-info``) before publishing."""
    assert kit_leftovers(REPO) == []


def test_a_stale_module_left_in_kit_build_enters_the_wheel_built_from_it(tmp_path: Path) -> None:
    """Why a leftover must never ship: pip builds ``./kit`` in its tree (as the remote build
    does from requirements.txt), and setuptools copies the sources into ``build/lib`` without
    clearing it, so a module removed from the sources but left there is installed."""
    sources = tmp_path / KIT
    shutil.copytree(
        REPO / KIT, sources, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info")
    )
    stale = sources / "build" / "lib" / "idempotent_consumer" / "_removed_long_ago.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("REMOVED = True\n", encoding="utf-8")
    wheels = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index"]
    command += ["--no-build-isolation", "--wheel-dir", str(wheels), str(sources)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]

    [wheel] = wheels.glob("*.whl")
    assert "idempotent_consumer/_removed_long_ago.py" in zipfile.ZipFile(wheel).namelist()
    assert kit_leftovers(tmp_path) == ["kit/build", "kit/src/idempotent_consumer_azure.egg-info"]
