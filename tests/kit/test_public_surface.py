"""The kit's public surface is what its packages export (``__all__`` of ``idempotent_consumer``
and of each public subpackage); every underscore module is private. An example, a doc (every
```python fence of a Markdown file) or any module of this app that imports a private name of
the kit fails here, naming the file and line: this app depends on the kit exactly as a user's
app would.

Checked to fail: ``examples/units_sold.py`` importing ``Again`` from
``idempotent_consumer._apply`` (the first test's checker on that text, and the repository scan).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import idempotent_consumer
import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = "idempotent_consumer"
# Where the app's code and docs live (the kit's own sources are checked by their __all__ below).
SOURCE_ROOTS = ("shared", "tests", "local", "ops", "bench", "tools", "examples")
SKIPPED_PARTS = {"node_modules", ".venv", ".venv-infra", "mutants", "__pycache__", "kit"}
_PYTHON_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def private_imports(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) of each import of a private kit module or name in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == KIT and _private_path(alias.name):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != KIT:
                continue
            if _private_path(node.module):
                yield node.lineno, node.module
                continue
            exported = set(getattr(importlib.import_module(node.module), "__all__", ()))
            submodules = _public_subpackages(node.module)
            for alias in node.names:
                if alias.name not in exported and alias.name not in submodules:
                    yield node.lineno, f"{node.module}.{alias.name}"


def _private_path(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _public_subpackages(module: str) -> set[str]:
    package = importlib.import_module(module)
    paths = getattr(package, "__path__", None)
    if paths is None:
        return set()
    return {info.name for info in pkgutil.iter_modules(paths) if not info.name.startswith("_")}


def python_files() -> Iterator[Path]:
    yield REPO / "function_app.py"
    for root in SOURCE_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if not SKIPPED_PARTS & set(path.relative_to(REPO).parts):
                yield path


def markdown_files() -> Iterator[Path]:
    for path in sorted(REPO.rglob("*.md")):
        if not (SKIPPED_PARTS - {"kit"}) & set(path.relative_to(REPO).parts):
            yield path


def test_the_checker_finds_a_private_import() -> None:
    source = (
        "from idempotent_consumer._apply import Again\n"
        "from idempotent_consumer import decide, _consumer\n"
        "import idempotent_consumer.cosmos._store\n"
        "from idempotent_consumer.cosmos import CosmosDocumentStore, _within_deadline\n"
        "from idempotent_consumer import ConsumerDefinition, cosmos\n"
    )
    assert list(private_imports(source)) == [
        (1, "idempotent_consumer._apply"),
        (2, "idempotent_consumer._consumer"),
        (3, "idempotent_consumer.cosmos._store"),
        (4, "idempotent_consumer.cosmos._within_deadline"),
    ]


def test_no_module_of_this_app_imports_a_private_name_of_the_kit() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in python_files()
        for line, what in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_no_python_example_of_a_doc_imports_a_private_name_of_the_kit() -> None:
    found: list[str] = []
    fences = 0
    for path in markdown_files():
        for fence in _PYTHON_FENCE.finditer(path.read_text(encoding="utf-8")):
            fences += 1
            try:
                imports = list(private_imports(fence.group(1)))
            except SyntaxError:
                continue  # a fragment, not a program: it imports nothing checkable
            found += [f"{path.relative_to(REPO)}: {what}" for _, what in imports]
    assert fences, "no ```python fence found: the scan is broken"
    assert found == []


def public_packages() -> list[str]:
    names = [KIT]
    for info in pkgutil.iter_modules(idempotent_consumer.__path__):
        if not info.name.startswith("_"):
            assert info.ispkg, f"{info.name}: a public module of the kit must be a package"
            names.append(f"{KIT}.{info.name}")
    return names


@pytest.mark.parametrize("name", public_packages())
def test_each_public_package_exports_exactly_its_all(name: str) -> None:
    package = importlib.import_module(name)
    exported = package.__all__
    assert sorted(exported) == sorted(set(exported)), "a name listed twice"
    assert [n for n in exported if not hasattr(package, n)] == []
    assert [n for n in exported if n.startswith("_") and n != "__version__"] == []
    # Every other module of the package is private: the public ones are its subpackages.
    modules = pkgutil.iter_modules(package.__path__)
    assert [m.name for m in modules if not m.name.startswith("_") and not m.ispkg] == []
