"""The Key Vault of the payment provider's key (issue 36, finding 10): its audit logs reach the
workspace (who read the secret), and the key is written once, by the deployment that is given it,
never again by a later `azd up`, so a key rotated in the vault is not rolled back.

`provision` below plays what azd and ARM do with the parsed templates, no more: azd substitutes
`${VAR}` / `${VAR=default}` in main.parameters.json from the azd environment, deploys, and writes
every output of main.bicep into the environment (azure-dev, cli/azd/pkg/infra/provisioning/
provisioning.go, UpdateEnvironment: DotenvSet for each output); ARM deploys a conditional module
only when its condition holds, and in incremental mode leaves a resource the template does not
declare as it is (Learn: Azure Resource Manager deployment modes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.infra.infra_support import (
    REPO,
    accessor,
    body,
    doc,
    is_secure,
    main_parameter_mapping,
)

KEY_VARIABLE = "PAYMENT_PROVIDER_API_KEY"
SECRET_TYPE = "Microsoft.KeyVault/vaults/secrets"


def _condition_parameter(condition: Any) -> str:
    """The parameter of the condition `!empty(<parameter>)`."""
    operand = condition["operator"]["operands"]["bool_value"]["function"]
    assert condition["operator"]["type"] == "not" and operand["type"] == "empty", condition
    return str(operand["parameters"]["item_to_test"])


@dataclass
class Vault:
    """The secret's versions, as the vault keeps them (a write adds a version; the latest is what
    a reference without a version resolves to)."""

    versions: list[str]

    @property
    def latest(self) -> str | None:
        return self.versions[-1] if self.versions else None


def provision(environment: dict[str, str], vault: Vault) -> dict[str, str]:
    """One `azd up` with the parsed templates: the key parameter from the environment, the
    secret written when keyvault.bicep's condition holds for it, then the outputs written back
    into the environment. Returns the environment after the deployment."""
    variable, default = main_parameter_mapping()["paymentProviderApiKey"]
    assert variable == KEY_VARIABLE
    key = environment.get(variable, default if default is not None else "")
    main_module = body(doc("main")["modules"]["keyVault"])
    assert main_module["params"]["paymentProviderApiKey"] == "paymentProviderApiKey"
    keyvault = doc("keyvault")
    module = keyvault["modules"]["paymentProviderApiKeySecret"]
    # The module's condition is on the parameter main passes the key in.
    assert _condition_parameter(module["config"]["condition"]) == "paymentProviderApiKey"
    if key != "":
        assert body(module)["params"]["value"] == "paymentProviderApiKey"
        vault.versions.append(key)
    after = dict(environment)
    for name, output in doc("main")["outputs"].items():
        value = output["value"]
        if isinstance(value, str) and not value.startswith("${"):
            after[name] = value  # a constant output
    return after


def test_the_vault_s_audit_logs_go_to_the_workspace() -> None:
    """Who read the provider's key: the vault's `audit` category group (AuditEvent) into the
    workspace's resource-specific table AZKVAuditLogs (Learn: Supported logs for
    Microsoft.KeyVault/vaults). Fails on the Bicep before issue 36 (no diagnostic setting on the
    vault: nothing recorded a read of the secret)."""
    diagnostics = doc("diagnostics")
    settings = {
        name: body(resource)
        for name, resource in diagnostics["resources"].items()
        if resource["type"] == "Microsoft.Insights/diagnosticSettings"
        and diagnostics["resources"][body(resource)["scope"]]["type"] == "Microsoft.KeyVault/vaults"
    }
    assert list(settings) == ["keyVaultDiagnostics"]
    setting = settings["keyVaultDiagnostics"]
    vault = diagnostics["resources"][setting["scope"]]
    assert vault["existing"] is True
    assert body(vault)["name"] == "keyVaultName"
    properties = setting["properties"]
    assert properties["workspaceId"] == "logAnalyticsWorkspaceId"
    assert properties["logs"] == [{"categoryGroup": "audit", "enabled": True}]
    assert properties["logAnalyticsDestinationType"] == "Dedicated"  # AZKVAuditLogs
    params = body(doc("main")["modules"]["diagnostics"])["params"]
    assert accessor(params["keyVaultName"]) == ("keyVault", "outputs", "name")


def test_a_key_rotated_in_the_vault_survives_every_later_azd_up() -> None:
    """The first `azd up` is given the key and writes it; it leaves the azd environment without
    it; the key is rotated in the vault; the next `azd up`s write nothing, and the reference
    (no version) still resolves to the rotated key. Fails on the Bicep before issue 36, which
    wrote the environment's key on every `azd up` and rolled the rotation back."""
    vault = Vault(versions=[])
    environment = {KEY_VARIABLE: "key-one", "PAYMENT_PROVIDER_BASE_URL": "https://p.example"}
    environment = provision(environment, vault)
    assert vault.versions == ["key-one"]
    assert environment[KEY_VARIABLE] == ""  # the plain key is gone from .azure/<env>/.env
    vault.versions.append("key-two")  # az keyvault secret set: the operator rotates it
    for _ in range(2):
        environment = provision(environment, vault)
    assert vault.versions == ["key-one", "key-two"]
    assert vault.latest == "key-two"


def test_the_secret_is_declared_only_behind_the_condition() -> None:
    """No other path writes the secret: keyvault.bicep declares no secret of its own (a secret
    resource there would be written on every deployment), the one secret resource is in
    keyvault-secret.bicep, deployed by keyvault.bicep alone, and main.bicep hands the key to the
    Key Vault module only."""
    keyvault = doc("keyvault")
    assert not [r for r in keyvault["resources"].values() if r["type"] == SECRET_TYPE]
    assert set(keyvault["modules"]) == {"paymentProviderApiKeySecret"}
    assert keyvault["modules"]["paymentProviderApiKeySecret"]["detail"]["path"] == (
        "keyvault-secret.bicep"
    )
    secret_module = doc("keyvault-secret")
    secrets = [r for r in secret_module["resources"].values() if r["type"] == SECRET_TYPE]
    assert len(secrets) == 1 and "condition" not in secrets[0]["config"]
    assert is_secure(secret_module["parameters"]["value"])
    for name in ("main", "keyvault"):
        parameter = doc(name)["parameters"]["paymentProviderApiKey"]
        assert is_secure(parameter) and parameter["default"] == "", name
    infra = REPO / "infra"
    writers = [
        path.name
        for path in sorted(infra.rglob("*.bicep"))
        if f"'{SECRET_TYPE}@" in path.read_text(encoding="utf-8")
        and path.name not in {"keyvault-secret.bicep", "rbac.bicep"}
    ]
    assert not writers, writers  # rbac.bicep only references the secret (existing) for its role
    rbac_secret = doc("rbac")["resources"]["paymentProviderApiKeySecret"]
    assert rbac_secret["existing"] is True


def test_the_rotation_runbook_rotates_in_the_vault_only() -> None:
    """docs/operations.md rotates with a new secret version, says how the reference picks it
    up, and never tells the operator to put the key back into the azd environment. Fails on the
    runbook before issue 36 ("azd env set PAYMENT_PROVIDER_API_KEY '<the new key>'")."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text[text.index("### The provider credential") :].split("\n### ", 1)[0]
    rotation = section[section.index("**Rotating the key") :].split("\n**", 1)[0]
    assert "az keyvault secret set" in rotation
    assert "azd env set PAYMENT_PROVIDER_API_KEY" not in rotation
    assert "within 24 hours" in rotation and "app-service-key-vault-references" in rotation
    assert "AZKVAuditLogs" in section
