"""What `azd up`, `azd provision --no-prompt` and a pipeline made by `azd pipeline config` need
from the templates before anything is deployed: site properties Flex Consumption accepts, a
region that offers Flex, no parameter left to a prompt, and every azd variable carried into
pipelines. Each test names the defect of 223dafd it catches.
"""

from __future__ import annotations

import re
from typing import Any

from tests.infra.infra_support import (
    AZD_OWN_VARIABLES,
    INFRA,
    REPO,
    body,
    decorator_argument,
    doc,
    is_secure,
    load_yaml,
    main_parameter_mapping,
    parameter_violations,
    typed,
)

# The regions the official Flex Consumption azd quickstart allows for `location`
# (Azure-Samples/functions-quickstart-python-http-azd, infra/main.bicep at commit
# 0bb0f1062c51605e3fdeea59c4f669b550acf92e), less its canary region eastus2euap, which ordinary
# subscriptions cannot deploy to.
QUICKSTART_FLEX_REGIONS = [
    "australiaeast",
    "australiasoutheast",
    "brazilsouth",
    "canadacentral",
    "centralindia",
    "centralus",
    "eastasia",
    "eastus",
    "eastus2",
    "francecentral",
    "germanywestcentral",
    "italynorth",
    "japaneast",
    "koreacentral",
    "northcentralus",
    "northeurope",
    "norwayeast",
    "southafricanorth",
    "southcentralus",
    "southeastasia",
    "southindia",
    "spaincentral",
    "swedencentral",
    "uaenorth",
    "uksouth",
    "ukwest",
    "westcentralus",
    "westeurope",
    "westus",
    "westus2",
    "westus3",
]


# What a deployment must be given, on purpose without a default (issue 28): the payment provider
# it charges. `azd provision --no-prompt` stops naming it when it is not set; a pipeline gets it
# from azure.yaml's pipeline variables.
REQUIRED_DEPLOYMENT_INPUTS = {"PAYMENT_PROVIDER_BASE_URL"}
# Given to the first deployment of an environment only, then cleared from the azd environment
# and never carried into a pipeline: the provider's key, written once to Key Vault (issue 36).
WRITTEN_ONCE_INPUTS = {"PAYMENT_PROVIDER_API_KEY"}


def _site() -> dict[str, Any]:
    resources = doc("function")["resources"]
    return body(resources["functionApp"])


def test_flex_site_config_holds_only_what_flex_accepts() -> None:
    """Flex Consumption rejects siteConfig.ftpsState (ARM 51021); the official Flex azd samples
    set neither http20Enabled nor scmMinTlsVersion. Fails on 223dafd (all three were set)."""
    site_config = _site()["properties"]["siteConfig"]
    assert set(site_config) == {"minTlsVersion"}
    text = (INFRA / "app" / "function.bicep").read_text(encoding="utf-8")
    code = "\n".join(line.split("//")[0] for line in text.splitlines())
    for rejected in ("ftpsState", "http20Enabled", "scmMinTlsVersion"):
        assert rejected not in code, rejected
    # FTP stays off without ftpsState: basic-auth publishing over FTP is disabled.
    policies = doc("function")["resources"]
    assert body(policies["ftpPolicy"])["properties"]["allow"] is False
    # checkov flags the missing settings; each skip says why (test_every_checkov_skip_is_...).
    for check in ("CKV_AZURE_67", "CKV_AZURE_78", "CKV_AZURE_18"):
        assert f"//checkov:skip={check}:" in text, check


def test_location_allows_only_the_flex_regions_of_the_official_quickstart() -> None:
    """A region without Flex Consumption fails half-way through `azd up`. Fails on 223dafd
    (free text)."""
    location = doc("main")["parameters"]["location"]
    assert decorator_argument(location, "allowed") == QUICKSTART_FLEX_REGIONS
    assert decorator_argument(location, "metadata") == {"azd": {"type": "location"}}


def test_no_parameter_is_left_to_a_prompt() -> None:
    """`azd provision --no-prompt` and pipelines stop on a parameter with neither a default nor
    a value: every such parameter must come from a variable azd sets itself, or be one of the
    inputs a deployment must be given (the payment provider), which pipelines carry. Fails on
    223dafd (alertEmail: no default, ${ALERT_EMAIL} without one)."""
    parameters = doc("main")["parameters"]
    mapping = main_parameter_mapping()
    for name, definition in parameters.items():
        if definition.get("default") is not None:
            continue
        assert name in mapping, f"{name}: no default and no main.parameters.json value"
        variable, default = mapping[name]
        assert (
            variable in AZD_OWN_VARIABLES
            or variable in REQUIRED_DEPLOYMENT_INPUTS
            or default is not None
        ), name
    for name, (variable, default) in mapping.items():
        if variable not in AZD_OWN_VARIABLES | REQUIRED_DEPLOYMENT_INPUTS:
            assert default is not None, f"{name}: ${{{variable}}} without a default makes azd ask"
    pipeline = load_yaml(REPO / "azure.yaml")["pipeline"]
    assert set(pipeline["variables"]) >= REQUIRED_DEPLOYMENT_INPUTS


def test_substitution_defaults_are_valid_parameter_values() -> None:
    """The ${VAR=default} values pass the parameter's own type, @allowed and @min/@maxValue, and
    equal the Bicep default (one default per parameter)."""
    parameters = doc("main")["parameters"]
    for name, (variable, default) in main_parameter_mapping().items():
        assert name in parameters, f"main.parameters.json maps an undeclared parameter {name}"
        if default is None:
            continue
        definition = parameters[name]
        value = typed(definition, default)
        assert not parameter_violations(definition, value), (name, variable)
        if "default" in definition and definition["type"] in ("int", "bool", "string"):
            bicep_default = definition["default"]
            if isinstance(bicep_default, dict):  # pycep's form of a negative literal
                bicep_default = -bicep_default["operator"]["operands"]["integer_value"]
            assert value == bicep_default, (name, value, bicep_default)


def test_pipelines_carry_every_azd_variable_the_parameters_read() -> None:
    """A pipeline made by `azd pipeline config` gets only azd's own variables unless azure.yaml
    lists the others under pipeline.variables (Learn: azd pipeline advanced features). Fails on
    223dafd (no pipeline section)."""
    pipeline = load_yaml(REPO / "azure.yaml")["pipeline"]
    listed = list(pipeline["variables"])
    assert len(listed) == len(set(listed)), "listed twice"
    read = {variable for variable, _ in main_parameter_mapping().values()}
    assert set(listed) == read - AZD_OWN_VARIABLES - WRITTEN_ONCE_INPUTS
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", name) for name in listed)
    assert set(pipeline) == {"variables"}


def test_the_provider_key_is_never_carried_into_a_pipeline() -> None:
    """The one @secure() parameter's variable is the key written once to Key Vault: a pipeline
    secret would hand it to every pipeline run, each writing it again and rolling a key rotated
    in the vault back. Fails on the templates before issue 36 (a pipeline secret)."""
    parameters = doc("main")["parameters"]
    secure = {
        variable
        for name, (variable, _) in main_parameter_mapping().items()
        if is_secure(parameters[name])
    }
    assert secure == WRITTEN_ONCE_INPUTS
    pipeline = load_yaml(REPO / "azure.yaml")["pipeline"]
    carried = {*pipeline.get("variables", []), *(pipeline.get("secrets") or [])}
    assert not carried & WRITTEN_ONCE_INPUTS
