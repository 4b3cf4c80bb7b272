"""The parameters that take the deployment from 100 to 10,000 orders/s (docs/capacity.md), their
tested defaults, and the three tier parameter sets in infra/tiers/. Each test names the defect of
223dafd it catches (none of these parameters existed there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.infra.infra_support import (
    INFRA,
    REPO,
    accessor,
    body,
    decorator_argument,
    doc,
    main_parameter_mapping,
    parameter_violations,
)

TIERS = sorted((INFRA / "tiers").glob("orders-*-per-second.parameters.json"))
TIER_RATE = re.compile(r"orders-(\d+)-per-second")
CAPACITY_DOC = REPO / "docs" / "capacity.md"

# main.bicep parameter -> the module parameter it feeds (module, parameter).
WIRING = {
    "serviceBusSku": ("serviceBus", "sku"),
    "serviceBusMessagingUnitsPerPartition": ("serviceBus", "messagingUnitsPerPartition"),
    "serviceBusPremiumPartitions": ("serviceBus", "premiumMessagingPartitions"),
    "serviceBusZoneRedundant": ("serviceBus", "zoneRedundant"),
    "serviceBusMaxSizeInMegabytes": ("serviceBus", "maxSizeInMegabytes"),
    "cosmosLeasesAutoscaleMaxThroughput": ("cosmos", "leasesAutoscaleMaxThroughput"),
    "functionInstanceMemoryMB": ("functionApp", "instanceMemoryMB"),
    "functionAlwaysReadyInstances": ("functionApp", "alwaysReadyInstances"),
    "functionMaximumInstanceCount": ("functionApp", "maximumInstanceCount"),
    "logAnalyticsDailyQuotaGb": ("monitoring", "dailyQuotaGb"),
    "cosmosDataPlaneLogs": ("diagnostics", "cosmosDataPlaneLogs"),
}
MODULE_FILES = {
    "serviceBus": "servicebus",
    "cosmos": "cosmos",
    "functionApp": "function",
    "monitoring": "monitoring",
    "diagnostics": "diagnostics",
}


def _tier(path: Path) -> dict[str, Any]:
    values: dict[str, Any] = {
        name: entry["value"]
        for name, entry in json.loads(path.read_text(encoding="utf-8"))["parameters"].items()
    }
    return values


def _env_value(value: Any) -> str:
    """How `azd env set` spells a parameter value (booleans lower-case, as main.parameters.json)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _rate(path: Path) -> int:
    match = TIER_RATE.search(path.name)
    assert match, path
    return int(match[1])


def _effective(values: dict[str, Any]) -> dict[str, Any]:
    """The tier's values over the Bicep defaults of main.bicep."""
    parameters = doc("main")["parameters"]
    merged = {
        name: definition["default"]
        for name, definition in parameters.items()
        if "default" in definition and not isinstance(definition["default"], dict)
    }
    merged.update(values)
    return merged


@pytest.mark.parametrize(("main_param", "target"), sorted(WIRING.items()))
def test_capacity_parameter_is_wired_with_the_same_constraints(
    main_param: str, target: tuple[str, str]
) -> None:
    module, module_param = target
    main = doc("main")
    assert body(main["modules"][module])["params"][module_param] == main_param
    outer = main["parameters"][main_param]
    inner = doc(MODULE_FILES[module])["parameters"][module_param]
    assert outer["type"] == inner["type"]
    assert decorator_argument(outer, "allowed") == decorator_argument(inner, "allowed")
    assert outer.get("default") == inner.get("default"), main_param
    assert main_param in main_parameter_mapping(), "no azd variable: `azd env set` cannot reach it"


def test_service_bus_premium_takes_messaging_units_partitions_and_zones() -> None:
    """Capacity = MUs per partition x partitions, so it is always a valid Premium capacity
    ({1, 2, 4, 8, 16} times the partitions: the SBSku spec). Premium-only properties are sent on
    Premium only."""
    servicebus = doc("servicebus")
    parameters = servicebus["parameters"]
    assert decorator_argument(parameters["messagingUnitsPerPartition"], "allowed") == [
        1,
        2,
        4,
        8,
        16,
    ]
    assert decorator_argument(parameters["premiumMessagingPartitions"], "allowed") == [1, 2, 4]
    assert parameters["zoneRedundant"]["default"] is True
    namespace = body(servicebus["resources"]["namespace"])
    premium_sku = namespace["sku"]["operator"]["operands"]["true_value"]
    capacity = premium_sku["capacity"]["operator"]
    assert capacity["type"] == "multiply"
    assert set(capacity["operands"].values()) == {
        "messagingUnitsPerPartition",
        "premiumMessagingPartitions",
    }
    union = namespace["properties"]["function"]["parameters"]
    premium_only = union["arg_2"]["operator"]["operands"]
    assert premium_only["condition"] == "premium"
    assert premium_only["true_value"] == {
        "premiumMessagingPartitions": "premiumMessagingPartitions",
        "zoneRedundant": "zoneRedundant",
    }
    assert premium_only["false_value"] == {}


def test_entities_are_partitioned_exactly_when_the_namespace_is() -> None:
    """A partitioned Premium namespace accepts partitioned entities only (Learn: enable
    partitioning for a Service Bus Premium namespace)."""
    servicebus = doc("servicebus")
    for name in ("queue", "topic"):
        props = body(servicebus["resources"][name])["properties"]
        expression = props["enablePartitioning"]["operator"]
        assert expression["type"] == "and"
        operands = expression["operands"]
        assert operands["operand_1"] == "premium"
        assert operands["operand_2"]["operator"]["type"] == "greater_than"
        assert props["maxSizeInMegabytes"] == "entityMaxSizeInMegabytes", name


def test_queue_size_is_a_parameter_capped_at_the_standard_limit() -> None:
    """Standard entities hold at most 5 GB; Premium up to 80 GB (Service Bus quotas). Fails on
    223dafd (fixed 1024 MB: about three hours of backlog at 100 orders/s)."""
    servicebus = doc("servicebus")
    allowed = decorator_argument(servicebus["parameters"]["maxSizeInMegabytes"], "allowed")
    assert min(allowed) == 1024
    assert max(allowed) == 81920
    assert servicebus["parameters"]["maxSizeInMegabytes"]["default"] == 5120
    size = servicebus["variables"]["entityMaxSizeInMegabytes"]["value"]["operator"]["operands"]
    assert size["condition"] == "premium"
    assert size["true_value"] == "maxSizeInMegabytes"
    capped = size["false_value"]["function"]
    assert capped["type"] == "min"
    assert set(capped["parameters"].values()) == {"maxSizeInMegabytes", 5120}
    outputs = doc("main")["outputs"]
    assert accessor(outputs["SERVICEBUS_ENTITY_MAX_SIZE_MB"]["value"]) == (
        "serviceBus",
        "outputs",
        "entityMaxSizeInMegabytes",
    )
    assert accessor(outputs["SERVICEBUS_DUPLICATE_DETECTION_WINDOW"]["value"]) == (
        "serviceBus",
        "outputs",
        "duplicateDetectionHistoryTimeWindow",
    )


def test_flex_memory_and_always_ready_instances_reach_the_site() -> None:
    """The always-ready group names the consumer function of function_app.py."""
    function = doc("function")
    scale = body(function["resources"]["functionApp"])["properties"]["functionAppConfig"]
    assert scale["scaleAndConcurrency"] == {
        "instanceMemoryMB": "instanceMemoryMB",
        "maximumInstanceCount": "maximumInstanceCount",
        "alwaysReady": "alwaysReady",
    }
    always = function["variables"]["alwaysReady"]["value"]["operator"]["operands"]
    assert always["false_value"] == []
    (group,) = always["true_value"]
    assert group == {"name": "function:consume_order", "instanceCount": "alwaysReadyInstances"}
    app = (REPO / "function_app.py").read_text(encoding="utf-8")
    assert '@app.function_name("consume_order")\n@app.service_bus_queue_trigger' in app
    assert function["parameters"]["alwaysReadyInstances"]["default"] == 0


def test_vnet_is_off_by_default_and_turns_public_access_off_when_on() -> None:
    """Fails on 223dafd (no VNet option)."""
    main = doc("main")
    assert main["parameters"]["vnetEnabled"]["default"] is False
    network = main["modules"]["network"]
    assert network["config"]["condition"] == "vnetEnabled"
    assert body(network)["params"]["serviceBusPrivateEndpoint"]["operator"]["operands"] == {
        "operand_1": "serviceBusSku",
        "operand_2": "Premium",
    }
    for module in ("storage", "cosmos", "serviceBus", "keyVault"):
        assert body(main["modules"][module])["params"]["disablePublicNetworkAccess"] == (
            "vnetEnabled"
        ), module
    subnet = body(main["modules"]["functionApp"])["params"]["virtualNetworkSubnetId"]
    operands = subnet["operator"]["operands"]
    assert operands["condition"] == "vnetEnabled"
    assert accessor(operands["true_value"]) == ("network", "outputs", "appSubnetId")
    assert operands["false_value"] == ""
    # each resource: public access off exactly when asked
    storage = body(doc("storage")["resources"]["storage"])["properties"]
    cosmos = body(doc("cosmos")["resources"]["account"])["properties"]
    vault = body(doc("keyvault")["resources"]["vault"])["properties"]
    assert vault["publicNetworkAccess"] == "publicNetworkAccess"  # the variable (keyvault.bicep)
    vault_access = doc("keyvault")["variables"]["publicNetworkAccess"]["value"]
    for props in (storage, cosmos, {"publicNetworkAccess": vault_access}):
        access = props["publicNetworkAccess"]["operator"]["operands"]
        assert access == {
            "condition": "disablePublicNetworkAccess",
            "true_value": "Disabled",
            "false_value": "Enabled",
        }
    assert storage["networkAcls"]["operator"]["operands"]["true_value"]["defaultAction"] == "Deny"
    vault_default = vault["networkAcls"]["defaultAction"]["operator"]["operands"]
    assert vault_default == {
        "condition": "disablePublicNetworkAccess",
        "true_value": "Deny",
        "false_value": "Allow",
    }
    # ARM writes the secret as a trusted service (VaultProperties.publicNetworkAccess).
    assert vault["networkAcls"]["bypass"] == "AzureServices"
    namespace = body(doc("servicebus")["resources"]["namespace"])
    always = namespace["properties"]["function"]["parameters"]["arg_1"]
    access = always["publicNetworkAccess"]["operator"]["operands"]
    # Standard has no private endpoints: its public access stays on (Entra ID only).
    assert access["condition"]["operator"]["operands"] == {
        "operand_1": "premium",
        "operand_2": "disablePublicNetworkAccess",
    }
    assert (access["true_value"], access["false_value"]) == ("Disabled", "Enabled")


def test_the_network_delegates_the_app_subnet_and_links_private_endpoints() -> None:
    network = doc("network")
    resources = network["resources"]
    vnet = body(resources["vnet"])["properties"]
    subnets = {subnet["name"]: subnet["properties"] for subnet in vnet["subnets"]}
    assert set(subnets) == {"privateEndpointSubnetName", "appSubnetName"}
    (delegation,) = subnets["appSubnetName"]["delegations"]
    assert delegation["properties"]["serviceName"] == "Microsoft.App/environments"
    endpoints = {
        name: body(resource)
        for name, resource in resources.items()
        if resource["type"] == "Microsoft.Network/privateEndpoints"
    }
    groups = {
        name: endpoint["properties"]["privateLinkServiceConnections"][0]["properties"]
        for name, endpoint in endpoints.items()
    }
    assert {name: group["groupIds"] for name, group in groups.items()} == {
        "cosmosEndpoint": ["Sql"],
        "blobEndpoint": ["blob"],
        "serviceBusEndpoint": ["namespace"],
        "keyVaultEndpoint": ["vault"],
    }
    assert groups["cosmosEndpoint"]["privateLinkServiceId"] == "cosmosAccountId"
    assert groups["serviceBusEndpoint"]["privateLinkServiceId"] == "serviceBusNamespaceId"
    assert groups["keyVaultEndpoint"]["privateLinkServiceId"] == "keyVaultId"
    for name in (
        "serviceBusEndpoint",
        "serviceBusZone",
        "serviceBusZoneLink",
        "serviceBusDnsGroup",
    ):
        assert resources[name]["config"]["condition"] == "serviceBusPrivateEndpoint", name
    zones = {
        body(resources[name])["name"]: network["variables"][body(resources[name])["name"]]["value"]
        for name in ("cosmosZone", "blobZone", "serviceBusZone", "keyVaultZone")
    }
    assert zones["cosmosZoneName"] == "privatelink.documents.azure.com"
    assert zones["serviceBusZoneName"] == "privatelink.servicebus.windows.net"
    assert zones["blobZoneName"].startswith("privatelink.blob.")
    assert zones["keyVaultZoneName"] == "privatelink.vaultcore.azure.net"
    for group in ("cosmosDnsGroup", "blobDnsGroup", "serviceBusDnsGroup", "keyVaultDnsGroup"):
        config = body(resources[group])["properties"]["privateDnsZoneConfigs"][0]
        zone = accessor(config["properties"]["privateDnsZoneId"])
        assert zone == (group.replace("DnsGroup", "Zone"), "id"), group
        assert body(resources[group])["parent"] == group.replace("DnsGroup", "Endpoint")
    main_module = body(doc("main")["modules"]["network"])["params"]
    assert accessor(main_module["cosmosAccountId"]) == ("cosmos", "outputs", "accountId")
    assert accessor(main_module["storageAccountId"]) == ("storage", "outputs", "id")
    assert accessor(main_module["serviceBusNamespaceId"]) == ("serviceBus", "outputs", "id")
    assert accessor(main_module["keyVaultId"]) == ("keyVault", "outputs", "id")


def test_cosmos_data_plane_logs_are_opt_in() -> None:
    """DataPlaneRequests is one row per request, the largest ingestion per order. Fails on
    223dafd (allLogs: every category always)."""
    diagnostics = doc("diagnostics")
    assert diagnostics["parameters"]["cosmosDataPlaneLogs"]["default"] is False
    variables = {name: var["value"] for name, var in diagnostics["variables"].items()}
    chosen = variables["cosmosLogCategories"]["operator"]["operands"]
    assert chosen["condition"] == "cosmosDataPlaneLogs"
    assert chosen["false_value"] == "cosmosAlwaysLogs"
    assert variables["cosmosDataPlaneCategories"] == [
        "DataPlaneRequests",
        "PartitionKeyRUConsumption",
    ]
    assert "DataPlaneRequests" not in variables["cosmosAlwaysLogs"]
    assert "ControlPlaneRequests" in variables["cosmosAlwaysLogs"]
    logs = body(diagnostics["resources"]["cosmosDiagnostics"])["properties"]["logs"]
    assert logs["loop_type"]["detail"]["array_name"] == "cosmosLogCategories"


def test_the_workspace_has_a_daily_cap_parameter_off_by_default() -> None:
    """Fails on 223dafd (no cap parameter)."""
    monitoring = doc("monitoring")
    workspace = body(monitoring["resources"]["logAnalytics"])["properties"]
    assert workspace["workspaceCapping"] == {"dailyQuotaGb": "dailyQuotaGb"}
    default = monitoring["parameters"]["dailyQuotaGb"]["default"]
    assert default["operator"]["operands"]["integer_value"] == 1  # -1: no cap
    assert main_parameter_mapping()["logAnalyticsDailyQuotaGb"] == (
        "LOG_ANALYTICS_DAILY_QUOTA_GB",
        "-1",
    )


# ---- the tier parameter sets -----------------------------------------------------------------


def test_there_is_a_parameter_set_for_each_tier_of_the_plan() -> None:
    assert [_rate(path) for path in TIERS] == sorted([100, 1000, 10000])


@pytest.mark.parametrize("path", TIERS, ids=lambda p: p.stem)
def test_tier_parameter_set_is_valid(path: Path) -> None:
    """Every name is a main.bicep parameter with an azd variable, every value passes that
    parameter's type and constraints, and the combination is one Service Bus accepts."""
    parameters = doc("main")["parameters"]
    mapping = main_parameter_mapping()
    values = _tier(path)
    for name, value in values.items():
        assert name in parameters, f"{path.name}: unknown parameter {name}"
        assert name in mapping, f"{path.name}: {name} has no azd variable"
        assert not parameter_violations(parameters[name], value), (name, value)
    effective = _effective(values)
    if effective["serviceBusSku"] == "Standard":
        assert effective["serviceBusMaxSizeInMegabytes"] <= 5120
    if _rate(path) > 250:  # Standard's 1,000 credits/s cap a namespace at 200-250 orders/s
        assert effective["serviceBusSku"] == "Premium"
        assert effective["cosmosServerless"] is False  # a serverless container: ~350 orders/s
    assert effective["grantQueueDataOwnerForScaling"] is True


def test_the_default_deployment_is_the_100_orders_per_second_tier() -> None:
    (smallest,) = [path for path in TIERS if _rate(path) == 100]
    parameters = doc("main")["parameters"]
    for name, value in _tier(smallest).items():
        assert parameters[name]["default"] == value, name


def test_capacity_doc_gives_the_azd_env_set_lines_of_each_tier() -> None:
    """docs/capacity.md lists, per tier, the `azd env set` lines equal to the tier file."""
    text = CAPACITY_DOC.read_text(encoding="utf-8")
    mapping = main_parameter_mapping()
    for path in TIERS:
        marker = f"<!-- tier: {path.name} -->"
        assert marker in text, marker
        block = text.split(marker, 1)[1].split("```", 2)[1]
        lines = sorted(
            line.strip() for line in block.splitlines() if line.strip().startswith("azd")
        )
        expected = sorted(
            f"azd env set {mapping[name][0]} {_env_value(value)}"
            for name, value in _tier(path).items()
        )
        assert lines == expected, path.name
