"""The mutation tooling (tools/mutation) stays true to today's code: every hand-made mutant
still applies to exactly one place of a measured module and still compiles, so a refactoring
that moves a constant fails here instead of silently measuring nothing in ``make mutation``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.mutation.constants import MUTANTS, ConstantMutant
from tools.mutation.report import equivalents
from tools.mutation.run import MutationConfig

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
