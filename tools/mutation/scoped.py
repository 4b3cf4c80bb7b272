"""mutmut's own command line, with two changes made in its process before it runs (its workers
and its fork server are ``os.fork``-ed from it, so they inherit both); pyproject.toml is never
edited:

- **The kit's mutants are named by the module Python imports.** mutmut names a mutant after its
  file's path, dropping a leading ``src/`` only (``mutmut.utils.format_utils.get_mutant_name``),
  so ``kit/src/idempotent_consumer/_external.py`` would be ``kit.src.idempotent_consumer.
  _external``; its trampoline activates a mutant only in the module whose ``__module__`` has
  that name, and records the stats by ``__module__`` too. The kit is imported as
  ``idempotent_consumer``: under the path's name no kit mutant ever ran (every one "no tests").
  Everything up to a ``src/`` folder is dropped (``tools.mutation.constants.module_name``).
- **One run narrowed**: the modules mutated and the test selection, from ``MUTATION_MODULES``
  and ``MUTATION_SELECTION`` (JSON lists, set by ``python -m tools.mutation --modules ...
  --selection ...``). mutmut reads its configuration once per process and caches it
  (``mutmut.configuration.config``).

Any mutmut command runs through it (``python -m tools.mutation.scoped results``, ``show``), so
that the names it prints are the ones it runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from tools.mutation.constants import module_name

MODULES_ENV = "MUTATION_MODULES"
SELECTION_ENV = "MUTATION_SELECTION"


def _name_by_import() -> None:
    from mutmut import __main__ as mutmut_main
    from mutmut.mutation import file_mutation
    from mutmut.utils import format_utils

    def get_mutant_name(relative_source_path: Path, mutant_method_name: str) -> str:
        module = module_name(relative_source_path.as_posix())
        return f"{module}.{mutant_method_name}".replace(".__init__.", ".")

    for module in (format_utils, file_mutation, mutmut_main):
        module.get_mutant_name = get_mutant_name  # type: ignore[attr-defined]


def narrow() -> None:
    from mutmut import configuration

    narrowed: dict[str, Any] = {}
    if modules := os.environ.get(MODULES_ENV):
        narrowed["only_mutate"] = list(json.loads(modules))
    if selection := os.environ.get(SELECTION_ENV):
        narrowed["pytest_add_cli_args_test_selection"] = list(json.loads(selection))
    if narrowed:
        configuration._config = dataclasses.replace(configuration.config(), **narrowed)
    _name_by_import()


if __name__ == "__main__":
    from mutmut.__main__ import cli

    narrow()
    cli()
