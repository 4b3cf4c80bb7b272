"""Every resource property in infra/ is one the published schema of its type and API version has.

The schemas: the azure-mgmt-* models pinned in requirements-infra.txt, dumped by
``sdk_schema_dump.py`` under ``.venv-infra`` (``make test`` installs it first), and for Service
Bus, Log Analytics and diagnostic settings the REST spec extracts in ``schemas/`` (sources.json
says which type comes from where and why). The check itself is ``arm_schema.py``.

Each injected-fault test below edits a copy of a real template and shows the check reports it:
a misspelt property (SDK schema and REST extract), a read-only property, an out-of-enum value and
a wrong discriminator.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.infra.arm_schema import Schemas, Violation, check_document, resource_types, sources
from tests.infra.infra_support import INFRA, REPO, parse_bicep

INFRA_PYTHON = REPO / ".venv-infra" / "bin" / "python"
DUMPER = Path(__file__).resolve().parent / "sdk_schema_dump.py"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))


@cache
def _sdk_dump() -> dict[str, Any]:
    if not INFRA_PYTHON.exists():
        pytest.fail("the infra venv is missing: run `make install-infra` (make test does)")
    done = subprocess.run(
        [str(INFRA_PYTHON), str(DUMPER)], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    dump: dict[str, Any] = json.loads(done.stdout)
    return dump


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas(_sdk_dump())


def _check_text(tmp_path: Path, name: str, text: str, schemas: Schemas) -> list[Violation]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return check_document(parse_bicep(path), schemas, name)


def _edited(relative: str, old: str, new: str, count: int = 1) -> str:
    text = (INFRA / relative).read_text(encoding="utf-8")
    assert text.count(old) == count, f"{old!r} must occur {count} time(s) in {relative}"
    return text.replace(old, new)


def test_every_sdk_schema_is_of_the_api_version_the_bicep_uses() -> None:
    """The dumper proves each model set's version (folder name or api-version default)."""
    dump = _sdk_dump()
    expected = {key for key, entry in sources().items() if "sdk" in entry}
    assert set(dump["resources"]) == expected
    for key, entry in dump["resources"].items():
        version = key.split("@")[1].split("#")[0]
        assert version in entry["evidence"] or version.replace("-", "_") in entry["evidence"], key


@pytest.mark.parametrize(
    ("key", "entry", "refusal"),
    [
        (  # a multi-API package: the models folder names another version
            "Microsoft.Web/sites@2023-12-01",
            {"package": "azure-mgmt-web", "sdk": "azure.mgmt.web.v2024_04_01.models:Site"},
            "folder is for 2024-04-01",
        ),
        (  # a single-API package: its operations default to another version
            "Microsoft.Insights/actionGroups@2024-10-01-preview",
            {
                "package": "azure-mgmt-monitor",
                "sdk": "azure.mgmt.monitor.models:ActionGroupResource",
                "operations": "azure.mgmt.monitor.operations._action_groups_operations",
            },
            "api-version defaults {'2023-01-01'}",
        ),
    ],
)
def test_models_of_another_api_version_are_refused(
    tmp_path: Path, key: str, entry: dict[str, str], refusal: str
) -> None:
    if not INFRA_PYTHON.exists():
        pytest.fail("the infra venv is missing: run `make install-infra` (make test does)")
    mapping = tmp_path / "sources.json"
    mapping.write_text(json.dumps({"resources": {key: entry}}), encoding="utf-8")
    done = subprocess.run(
        [str(INFRA_PYTHON), str(DUMPER)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "ARM_SCHEMA_SOURCES": str(mapping)},
    )
    assert done.returncode != 0
    assert refusal in done.stderr


def test_every_deployed_resource_type_has_a_registered_schema() -> None:
    registered = set(sources())
    used = {key for path in BICEP_FILES for key in resource_types(parse_bicep(path))}
    assert used <= registered, sorted(used - registered)


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_property_is_in_the_published_schema(path: Path, schemas: Schemas) -> None:
    violations = check_document(parse_bicep(path), schemas, str(path.relative_to(INFRA)))
    assert not violations, "\n".join(map(str, violations))


def test_a_misspelt_property_is_caught_against_the_sdk_models(
    tmp_path: Path, schemas: Schemas
) -> None:
    text = _edited("app/function.bicep", "httpsOnly: true", "httpsOnlyy: true")
    violations = _check_text(tmp_path, "function.bicep", text, schemas)
    assert [(v.resource, v.path) for v in violations] == [("functionApp", "properties.httpsOnlyy")]
    assert "unknown property" in violations[0].problem


def test_a_misspelt_property_is_caught_against_the_rest_extract(
    tmp_path: Path, schemas: Schemas
) -> None:
    text = _edited(
        "app/servicebus.bicep",
        "deadLetteringOnMessageExpiration: true\n    requiresSession",  # the queue's
        "deadLetteringOnMessageExpirations: true\n    requiresSession",
    )
    violations = _check_text(tmp_path, "servicebus.bicep", text, schemas)
    assert [(v.resource, v.path) for v in violations] == [
        ("queue", "properties.deadLetteringOnMessageExpirations")
    ]


@pytest.mark.parametrize(
    ("relative", "old", "new", "resource", "path"),
    [
        (  # a subscription rule (Service Bus REST extract, Rules.json)
            "app/servicebus.bicep",
            "sqlExpression: orderEventsFilter\n    }\n  }\n}\n\nresource paymentsRule",
            "sqlExpresion: orderEventsFilter\n    }\n  }\n}\n\nresource paymentsRule",
            "inventoryRule",
            "properties.sqlFilter.sqlExpresion",
        ),
        (  # the vault (Key Vault REST extract, keyvault.json)
            "app/keyvault.bicep",
            "enablePurgeProtection: true",
            "enablePurgeProtections: true",
            "vault",
            "properties.enablePurgeProtections",
        ),
        (  # the secret (Key Vault REST extract, secrets.json), written once by its own module
            "app/keyvault-secret.bicep",
            "contentType: 'text/plain'",
            "contentTypes: 'text/plain'",
            "secret",
            "properties.contentTypes",
        ),
        (  # the app's custom Cosmos DB role (azure-mgmt-cosmosdb models)
            "app/rbac.bicep",
            "roleName: 'orders app data",
            "roleNames: 'orders app data",
            "cosmosAppDataRole",
            "properties.roleNames",
        ),
        (  # the partition-size alert (azure-mgmt-monitor models)
            "app/cosmos-alerts.bicep",
            "metricMeasureColumn: 'LargestKeyGb'",
            "metricMeasureColumns: 'LargestKeyGb'",
            "partitionKeySizeAlert",
            "properties.criteria.allOf[0].metricMeasureColumns",
        ),
    ],
)
def test_a_misspelt_property_of_the_downstream_consumers_resources_is_caught(
    tmp_path: Path, schemas: Schemas, relative: str, old: str, new: str, resource: str, path: str
) -> None:
    """The subscriptions' rules and the Key Vault of issues 27 and 28 are held to their REST
    extracts like the rest (a schema with every property allowed would pass anything)."""
    text = _edited(relative, old, new)
    violations = _check_text(tmp_path, relative.split("/")[-1], text, schemas)
    assert [(v.resource, v.path) for v in violations] == [(resource, path)]
    assert "unknown property" in violations[0].problem


def test_a_read_only_property_is_caught(tmp_path: Path, schemas: Schemas) -> None:
    text = _edited(
        "app/function.bicep", "httpsOnly: true", "httpsOnly: true\n    defaultHostName: 'x'"
    )
    violations = _check_text(tmp_path, "function.bicep", text, schemas)
    assert [(v.path, v.problem.split(":")[0]) for v in violations] == [
        ("properties.defaultHostName", "read-only property")
    ]


def test_an_out_of_enum_value_is_caught_in_both_kinds_of_schema(
    tmp_path: Path, schemas: Schemas
) -> None:
    storage = _edited("app/storage.bicep", "TlsVersion: 'TLS1_2'", "TlsVersion: '1.2'")
    (violation,) = _check_text(tmp_path, "storage.bicep", storage, schemas)
    assert violation.path == "properties.minimumTlsVersion"
    assert "TLS1_2" in violation.problem
    servicebus = _edited("app/servicebus.bicep", "TlsVersion: '1.2'", "TlsVersion: '1.3'")
    (violation,) = _check_text(tmp_path, "servicebus.bicep", servicebus, schemas)
    assert violation.path == "properties.minimumTlsVersion"


def test_a_parameter_whose_allowed_values_leave_the_enum_is_caught(
    tmp_path: Path, schemas: Schemas
) -> None:
    """Values reach properties through parameters: their @allowed lists are held to the enum."""
    text = _edited(
        "app/rbac.bicep", "'Group'\n])\nparam principalType", "'Groups'\n])\nparam principalType"
    )
    violations = _check_text(tmp_path, "rbac.bicep", text, schemas)
    assert violations
    assert all("'Groups'" in v.problem for v in violations)


def test_a_wrong_discriminator_is_caught(tmp_path: Path, schemas: Schemas) -> None:
    """Polymorphic models: the metric alert criteria's odata.type picks the schema."""
    right = "Monitor.SingleResourceMultipleMetricCriteria'"
    alerts = parse_bicep(INFRA / "app" / "alerts.bicep")
    metric_alerts = {
        name
        for name, resource in alerts["resources"].items()
        if resource["type"] == "Microsoft.Insights/metricAlerts"
    }
    text = _edited(
        "app/alerts.bicep",
        right,
        "Monitor.SingleResourceMultipleMetricCriterion'",
        len(metric_alerts),
    )
    violations = _check_text(tmp_path, "alerts.bicep", text, schemas)
    assert {v.resource for v in violations} == metric_alerts
    assert {v.path for v in violations} == {"properties.criteria.odata.type"}
