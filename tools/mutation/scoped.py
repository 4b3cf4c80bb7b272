"""mutmut's own command line, with ``[tool.mutmut]`` narrowed for one run: the modules mutated
and the test selection, from ``MUTATION_MODULES`` and ``MUTATION_SELECTION`` (JSON lists, set by
``python -m tools.mutation --modules ... --selection ...``). pyproject.toml is never edited.

mutmut reads its configuration once per process and caches it (``mutmut.configuration.config``);
its workers and its fork server are ``os.fork``-ed from this process, so the narrowed
configuration set here before the command runs is the one every mutant runs under.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

MODULES_ENV = "MUTATION_MODULES"
SELECTION_ENV = "MUTATION_SELECTION"


def narrow() -> None:
    from mutmut import configuration

    narrowed: dict[str, Any] = {}
    if modules := os.environ.get(MODULES_ENV):
        narrowed["only_mutate"] = list(json.loads(modules))
    if selection := os.environ.get(SELECTION_ENV):
        narrowed["pytest_add_cli_args_test_selection"] = list(json.loads(selection))
    if narrowed:
        configuration._config = dataclasses.replace(configuration.config(), **narrowed)


if __name__ == "__main__":
    from mutmut.__main__ import cli

    narrow()
    cli()
