"""Importing the kit costs a cold start only what the registered consumers need: the top-level
package (a consumer's definition, the decision machinery) imports no Azure library, no
OpenTelemetry and no adapter subpackage; ``idempotent_consumer.servicebus`` (the body reading an
operator's tool shares) imports no Azure library either. Each import runs in a fresh interpreter,
as a worker's first import does.

Checked to fail: with ``from idempotent_consumer import cosmos`` added to the package's
``__init__``, the first test lists azure.cosmos, aiohttp and the subpackage.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("azure", "azurefunctions", "opentelemetry", "aiohttp")
ADAPTERS = tuple(
    f"idempotent_consumer.{name}"
    for name in ("cosmos", "servicebus", "telemetry", "functions", "testing")
)


def modules_after(statement: str) -> set[str]:
    probe = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(result.stdout))


def loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in prefixes or m.startswith(prefixes))


def test_importing_the_kit_loads_no_azure_no_opentelemetry_and_no_adapter() -> None:
    modules = modules_after("import idempotent_consumer")

    assert "idempotent_consumer._consumer" in modules  # the probe saw the package load
    assert loaded(modules, HEAVY) == []
    assert [m for m in modules if m.startswith(ADAPTERS)] == []


def test_the_service_bus_reading_loads_no_azure() -> None:
    modules = modules_after("import idempotent_consumer.servicebus")

    assert "idempotent_consumer.servicebus._settlement" in modules
    assert loaded(modules, HEAVY) == []


@pytest.mark.parametrize(
    ("subpackage", "brings"),
    [
        ("cosmos", "azure.cosmos"),
        ("telemetry", "opentelemetry.trace"),
        ("functions", "azure.functions"),
    ],
)
def test_each_adapter_brings_its_library_only_when_imported(subpackage: str, brings: str) -> None:
    # The other side of the boundary: the subpackage is where the library comes in.
    assert brings in modules_after(f"import idempotent_consumer.{subpackage}")
