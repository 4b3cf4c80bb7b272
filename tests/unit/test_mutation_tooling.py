"""The mutation tooling (tools/mutation) stays true to today's code: every hand-made mutant
still applies to exactly one place of a measured module and still compiles, so a refactoring
that moves a constant fails here instead of silently measuring nothing in ``make mutation``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.mutation import report, scoped
from tools.mutation.constants import KIT_SOURCES, MUTANTS, ConstantMutant, module_name
from tools.mutation.report import equivalents
from tools.mutation.run import MutationConfig, _mutated_kit_first

REPO = Path(__file__).resolve().parents[2]
CONFIG = MutationConfig.load(REPO / "pyproject.toml")


def test_the_measured_modules_exist_and_are_copied_with_what_the_tests_need() -> None:
    assert CONFIG.modules, "[tool.mutmut] only_mutate lists no module"
    for module in CONFIG.modules:
        assert (REPO / module).is_file(), module
        assert any(module.startswith(path) for path in CONFIG.source_paths), module
    # Microsoft's worker loads the app from the copy's root (local/standins/worker.py REPO_ROOT).
    assert {"function_app.py", "host.json", "local/"} <= set(CONFIG.also_copy)
    assert all((REPO / path).exists() for path in CONFIG.also_copy)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda mutant: mutant.name)
def test_every_constant_mutant_applies_once_and_compiles(mutant: ConstantMutant) -> None:
    assert mutant.module in CONFIG.modules
    mutated = mutant.apply((REPO / mutant.module).read_text())
    compile(mutated, mutant.module, "exec")


def test_constant_mutant_names_are_unique() -> None:
    names = [mutant.name for mutant in MUTANTS]
    assert len(names) == len(set(names))


def test_every_argued_constant_equivalent_is_a_known_mutant() -> None:
    known = {mutant.name for mutant in MUTANTS}
    argued = {name for name in equivalents() if ".const__" in name}
    assert argued <= known, argued - known


def test_a_run_over_some_modules_narrows_only_what_it_names() -> None:
    narrowed = CONFIG.narrowed(["shared/stock/effects.py"], ["tests/stock"])
    assert (narrowed.modules, narrowed.selection) == (
        ("shared/stock/effects.py",),
        ("tests/stock",),
    )
    assert CONFIG.narrowed(None, None) == CONFIG
    with pytest.raises(SystemExit, match=r"shared/nowhere\.py"):
        CONFIG.narrowed(["shared/nowhere.py"], None)


def test_a_numbered_run_replaces_its_own_section_and_keeps_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markdown, data = tmp_path / "report.md", tmp_path / "report.json"
    markdown.write_text(
        "# Mutation report\n\n- **Run 2** (hand-written)\n\n"
        "## Run 2: older\nold two\n### Survivors to kill (1)\n\n## Run 1: oldest\nold one\n"
    )
    data.write_text(json.dumps({"runs": [{"run": 2}, {"run": 1}]}))
    monkeypatch.setattr(report, "REPORT_MD", markdown)
    monkeypatch.setattr(report, "REPORT_JSON", data)
    monkeypatch.setattr(report, "WORK", tmp_path / "no-results")

    for title in ("first try", "newest"):  # run again: its section replaced, not added
        report.write(CONFIG.narrowed(["shared/stock/effects.py"], None), 3, title)

    text = markdown.read_text()
    assert text.startswith("# Mutation report\n\n- **Run 2** (hand-written)\n\n## Run 3: newest\n")
    assert "first try" not in text
    assert text.index("## Run 3") < text.index("## Run 2: older\nold two") < text.index("old one")
    assert "\n### Survivors to kill (0)\n" in text.split("## Run 2")[0]
    assert [run["run"] for run in json.loads(data.read_text())["runs"]] == [3, 2, 1]


def test_a_mutant_is_named_after_the_module_python_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    # mutmut activates a mutant only in the module whose __module__ its name starts with: the
    # kit is imported as idempotent_consumer, never as kit.src.idempotent_consumer.
    from mutmut import __main__ as mutmut_main
    from mutmut.mutation import file_mutation
    from mutmut.utils import format_utils

    for module in (format_utils, file_mutation, mutmut_main):  # restored after the test
        monkeypatch.setattr(module, "get_mutant_name", module.get_mutant_name)
    scoped._name_by_import()

    kit_file = Path("kit/src/idempotent_consumer/cosmos/_store.py")
    named_by_mutation, named_by_main = (
        module.__dict__["get_mutant_name"] for module in (file_mutation, mutmut_main)
    )
    assert named_by_mutation(kit_file, "x_f") == "idempotent_consumer.cosmos._store.x_f"
    assert named_by_main(Path("shared/stock/effects.py"), "x_f") == "shared.stock.effects.x_f"
    from idempotent_consumer import call_key  # defined in the kit's _external module

    assert module_name("kit/src/idempotent_consumer/_external.py") == call_key.__module__
    kit_constants = [mutant for mutant in MUTANTS if mutant.module.startswith("kit/src/")]
    assert kit_constants
    assert all(mutant.name.startswith("idempotent_consumer.") for mutant in kit_constants)


def test_the_mutated_kit_is_imported_though_copied_after_the_interpreter_started(
    tmp_path: Path,
) -> None:
    # mutmut copies the sources into mutants/ from inside its own process: the copy's kit must
    # still be the one imported there, not the original behind it on the path.
    copy = tmp_path / "mutants"
    env = _mutated_kit_first(copy)
    script = (
        "import shutil, sys; "
        f"shutil.copytree({str(REPO / KIT_SOURCES)!r}, {str(copy / KIT_SOURCES)!r}); "
        "import idempotent_consumer; print(idempotent_consumer.__file__)"
    )
    imported = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert imported.stdout.strip() == str(copy / KIT_SOURCES / "__init__.py"), imported.stderr
