"""Offline checks of the Bicep templates (parsed with pycep, no Bicep CLI or Azure account).

Every assertion compares values parsed from the files with the expected contract: queue
semantics from infra/messaging.json, identity-only access, least-privilege role assignments
with documented built-in role ids, alerts on the telemetry names the consumer emits.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.coldstart import DEPLOYED_SETTINGS
from ops.durations import parse_iso8601_duration as iso_duration  # the one parser
from ops.init_cosmos import INDEXING_FILE, ORDERS_INDEXING_POLICY
from shared.adapters.cosmos_outbox import STUCK_QUERY
from tests.infra.infra_support import (
    INFRA,
    REPO,
    accessor,
    body,
    doc,
    int_literal,
    load_yaml,
    messaging,
    parse_bicep,
)

APP = INFRA / "app"
MAIN = INFRA / "main.bicep"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))

EXPECTED_MODULES = {
    "identity.bicep",
    "monitoring.bicep",
    "storage.bicep",
    "servicebus.bicep",
    "cosmos.bicep",
    "function.bicep",
    "rbac.bicep",
    "alerts.bicep",
    "diagnostics.bicep",
    "workbook.bicep",
    "network.bicep",
    "keyvault.bicep",
}

# Documented built-in role definition ids
# (learn.microsoft.com/azure/role-based-access-control/built-in-roles).
SERVICE_BUS_DATA_RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"
SERVICE_BUS_DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"
STORAGE_BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"
KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"

QUEUE_TYPE = "Microsoft.ServiceBus/namespaces/queues"
TOPIC_TYPE = "Microsoft.ServiceBus/namespaces/topics"
SUBSCRIPTION_TYPE = "Microsoft.ServiceBus/namespaces/topics/subscriptions"
SECRET_TYPE = "Microsoft.KeyVault/vaults/secrets"
STORAGE_TYPE = "Microsoft.Storage/storageAccounts"
APPINSIGHTS_TYPE = "Microsoft.Insights/components"

# role assignment resource -> (role id, type of the resource it is scoped to, developer-only?)
EXPECTED_ROLE_ASSIGNMENTS: dict[str, tuple[str, str, bool]] = {
    "appQueueReceiver": (SERVICE_BUS_DATA_RECEIVER, QUEUE_TYPE, False),
    "appQueueOwnerForScaling": (SERVICE_BUS_DATA_OWNER, QUEUE_TYPE, False),
    "appTopicSender": (SERVICE_BUS_DATA_SENDER, TOPIC_TYPE, False),
    # The public orders API sends accepted requests to the orders queue (issue 33).
    "appQueueSender": (SERVICE_BUS_DATA_SENDER, QUEUE_TYPE, False),
    "appInventorySubscriptionReceiver": (SERVICE_BUS_DATA_RECEIVER, SUBSCRIPTION_TYPE, False),
    "appPaymentsSubscriptionReceiver": (SERVICE_BUS_DATA_RECEIVER, SUBSCRIPTION_TYPE, False),
    "appPaymentProviderApiKeyReader": (KEY_VAULT_SECRETS_USER, SECRET_TYPE, False),
    "appStorageBlobOwner": (STORAGE_BLOB_DATA_OWNER, STORAGE_TYPE, False),
    "appMetricsPublisher": (MONITORING_METRICS_PUBLISHER, APPINSIGHTS_TYPE, False),
    "devQueueSender": (SERVICE_BUS_DATA_SENDER, QUEUE_TYPE, True),
    "devQueueReceiver": (SERVICE_BUS_DATA_RECEIVER, QUEUE_TYPE, True),
    "devTopicSender": (SERVICE_BUS_DATA_SENDER, TOPIC_TYPE, True),
    "devInventorySubscriptionReceiver": (SERVICE_BUS_DATA_RECEIVER, SUBSCRIPTION_TYPE, True),
    "devPaymentsSubscriptionReceiver": (SERVICE_BUS_DATA_RECEIVER, SUBSCRIPTION_TYPE, True),
}

REQUIRED_APP_SETTINGS = {
    "ORDERS_QUEUE_NAME",
    "ORDER_EVENTS_TOPIC_NAME",
    "ServiceBusConnection__fullyQualifiedNamespace",
    "ServiceBusConnection__credential",
    "ServiceBusConnection__clientId",
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "COSMOS_ENDPOINT",
    "COSMOS_DATABASE",
    "COSMOS_CONTAINER",
    "COSMOS_VERIFY_TLS",
    "OUTBOX_ENABLED",
    # The app's Cosmos DB client authenticates as the relay trigger's connection does
    # (shared/adapters/identity.py).
    "CosmosDBConnection__credential",
    "CosmosDBConnection__clientId",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    # The downstream consumers (names.md).
    "INVENTORY_SUBSCRIPTION_NAME",
    "INVENTORY_CONTAINER",
    "PAYMENTS_SUBSCRIPTION_NAME",
    "PAYMENTS_CONTAINER",
    "PAYMENT_PROVIDER_BASE_URL",
    "PAYMENT_PROVIDER_API_KEY",
    "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS",
}

# App settings whose names say KEY without holding a plain key: the provider's credential, only
# ever a Key Vault reference (test_downstream_bicep.py), and a mode.
KEY_NAMED_SETTINGS = {
    "PAYMENT_PROVIDER_API_KEY": "paymentProviderApiKeyReference",
    "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "paymentProviderIdempotencyKeys",
}

SECRET_MARKERS = re.compile(
    r"listKeys|listConnectionStrings|listAccountSas|AccountKey=|SharedAccessKey|COSMOS_KEY"
    r"|primaryMasterKey|primaryKey|InstrumentationKey=",
    re.IGNORECASE,
)


# ---- helpers ------------------------------------------------------------------------------------


def condition(resource: dict[str, Any]) -> Any:
    return resource["config"].get("condition")


def resources_of_type(document: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {
        name: res for name, res in document.get("resources", {}).items() if res["type"] == type_
    }


def only_resource(document: dict[str, Any], type_: str) -> dict[str, Any]:
    found = resources_of_type(document, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))


def decorator(definition: dict[str, Any], kind: str) -> Any:
    for item in definition.get("decorators", []):
        if item["type"] == kind:
            return item["argument"]
    return None


def messaging_accessor_var(document: dict[str, Any]) -> str:
    """Name of the variable bound to loadJsonContent('../messaging.json')."""
    names = [
        name
        for name, var in document.get("variables", {}).items()
        if isinstance(var["value"], dict)
        and var["value"].get("function", {}).get("type") == "load_json_content"
    ]
    assert len(names) == 1, names
    return str(names[0])


def is_not_empty_check(expr: Any, param: str) -> bool:
    """True for the condition `!empty(<param>)`."""
    operator = expr.get("operator", {}) if isinstance(expr, dict) else {}
    if operator.get("type") != "not":
        return False
    inner = operator["operands"]["bool_value"].get("function", {})
    return bool(inner.get("type") == "empty" and inner["parameters"]["item_to_test"] == param)


# ---- parsing and layout -------------------------------------------------------------------------


def test_expected_bicep_files_exist() -> None:
    assert MAIN in BICEP_FILES
    assert {p.name for p in APP.glob("*.bicep")} >= EXPECTED_MODULES


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_bicep_file_parses(path: Path) -> None:
    parsed = parse_bicep(path)
    assert parsed.get("resources") or parsed.get("modules"), f"{path} declares nothing"


def test_main_targets_subscription_and_creates_resource_group() -> None:
    main = doc("main")
    assert main["globals"]["scope"]["value"] == "subscription"
    rg = only_resource(main, "Microsoft.Resources/resourceGroups")
    assert body(rg)["location"] == "location"


def test_every_module_of_main_exists_and_is_scoped_to_the_resource_group() -> None:
    modules = doc("main")["modules"]
    paths = {module["detail"]["path"] for module in modules.values()}
    assert paths == {f"app/{name}" for name in EXPECTED_MODULES}
    for name, module in modules.items():
        assert (INFRA / module["detail"]["path"]).is_file(), name
        assert body(module)["scope"] == "rg", name


def test_main_parameters_file_feeds_azd_environment() -> None:
    params = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]
    assert params["environmentName"]["value"] == "${AZURE_ENV_NAME}"
    assert params["location"]["value"] == "${AZURE_LOCATION}"
    assert params["principalId"]["value"] == "${AZURE_PRINCIPAL_ID}"
    declared = doc("main")["parameters"]
    assert set(params) <= set(declared), set(params) - set(declared)


def test_azure_yaml_declares_the_function_service_tagged_by_the_template() -> None:
    azure_yaml = load_yaml(REPO / "azure.yaml")
    services = azure_yaml["services"]
    assert len(services) == 1
    ((service_name, service),) = services.items()
    assert service == {"project": ".", "language": "python", "host": "function"}
    function_module = body(doc("main")["modules"]["functionApp"])
    assert function_module["params"]["serviceName"] == service_name
    tags = body(only_resource(doc("function"), "Microsoft.Web/sites"))["tags"]
    assert tags["function"]["parameters"]["arg_2"] == {"'azd-service-name'": "serviceName"}


# ---- Service Bus --------------------------------------------------------------------------------


def test_servicebus_loads_the_shared_messaging_file() -> None:
    servicebus = doc("servicebus")
    var = servicebus["variables"][messaging_accessor_var(servicebus)]
    relative = var["value"]["function"]["parameters"]["file_path"]
    assert (APP / relative).resolve() == (INFRA / "messaging.json").resolve()


def test_namespace_is_standard_or_premium_with_local_auth_disabled() -> None:
    servicebus = doc("servicebus")
    namespace = body(only_resource(servicebus, "Microsoft.ServiceBus/namespaces"))
    sku = namespace["sku"]["operator"]
    assert sku["type"] == "conditional"
    assert sku["operands"]["condition"] == "premium"
    assert sku["operands"]["false_value"] == {"name": "Standard", "tier": "Standard"}
    assert sku["operands"]["true_value"]["name"] == "Premium"  # duplicate detection needs >= Std
    assert decorator(servicebus["parameters"]["sku"], "allowed") == ["Standard", "Premium"]
    assert servicebus["parameters"]["sku"]["default"] == "Standard"
    always = namespace["properties"]["function"]["parameters"]["arg_1"]
    assert always["disableLocalAuth"] is True
    assert always["minimumTlsVersion"] == "1.2"


def test_queue_semantics_come_from_messaging_json() -> None:
    servicebus = doc("servicebus")
    msg = messaging_accessor_var(servicebus)
    queue = body(only_resource(servicebus, QUEUE_TYPE))
    props = queue["properties"]
    assert accessor(queue["name"]) == (msg, "queueName")
    assert accessor(props["lockDuration"]) == (msg, "lockDuration")
    assert accessor(props["maxDeliveryCount"]) == (msg, "maxDeliveryCount")
    assert accessor(props["defaultMessageTimeToLive"]) == (msg, "defaultMessageTimeToLive")
    assert props["requiresDuplicateDetection"] is True
    assert props["deadLetteringOnMessageExpiration"] is True
    assert props["requiresSession"] is False
    assert props["duplicateDetectionHistoryTimeWindow"] == "duplicateDetectionHistoryTimeWindow"


def test_topic_has_duplicate_detection_and_its_name_from_messaging_json() -> None:
    servicebus = doc("servicebus")
    msg = messaging_accessor_var(servicebus)
    topic = body(only_resource(servicebus, TOPIC_TYPE))
    assert accessor(topic["name"]) == (msg, "topicName")
    assert topic["properties"]["requiresDuplicateDetection"] is True
    assert topic["properties"]["duplicateDetectionHistoryTimeWindow"] == (
        "duplicateDetectionHistoryTimeWindow"
    )


def test_duplicate_detection_window_defaults_to_messaging_json_unless_overridden() -> None:
    """The tier picks the window from messaging.json (Standard: the stand-in's too); an override
    wins. Fails on 223dafd, which had one window for every tier."""
    servicebus = doc("servicebus")
    msg = messaging_accessor_var(servicebus)
    window = servicebus["variables"]["duplicateDetectionHistoryTimeWindow"]["value"]
    conditional = window["operator"]
    assert conditional["type"] == "conditional"
    empty_check = conditional["operands"]["condition"]["function"]
    assert empty_check["type"] == "empty"
    override_name = "duplicateDetectionHistoryTimeWindowOverride"
    assert empty_check["parameters"]["item_to_test"] == override_name
    assert conditional["operands"]["true_value"] == "tierWindow"
    assert conditional["operands"]["false_value"] == "duplicateDetectionHistoryTimeWindowOverride"
    tier = servicebus["variables"]["tierWindow"]["value"]["operator"]["operands"]
    assert tier["condition"] == "premium"
    assert accessor(tier["true_value"]) == (msg, "premiumDuplicateDetectionHistoryTimeWindow")
    assert accessor(tier["false_value"]) == (msg, "duplicateDetectionHistoryTimeWindow")
    # Learn: keep the window as small as possible on high-throughput entities.
    assert iso_duration(messaging()["premiumDuplicateDetectionHistoryTimeWindow"]) < iso_duration(
        messaging()["duplicateDetectionHistoryTimeWindow"]
    )
    override = servicebus["parameters"]["duplicateDetectionHistoryTimeWindowOverride"]
    assert override["default"] == ""


def test_duplicate_detection_window_is_within_service_bus_limits() -> None:
    lower, upper = timedelta(seconds=20), timedelta(days=7)
    for key in (
        "duplicateDetectionHistoryTimeWindow",
        "premiumDuplicateDetectionHistoryTimeWindow",
    ):
        assert lower <= iso_duration(messaging()[key]) <= upper, key
    allowed_lists = []
    for name in ("servicebus", "main"):
        param = doc(name)["parameters"]["duplicateDetectionHistoryTimeWindowOverride"]
        allowed = decorator(param, "allowed")
        assert allowed, name
        assert "" in allowed, name
        for value in allowed:
            if value:
                assert lower <= iso_duration(value) <= upper, (name, value)
        allowed_lists.append(allowed)
    assert allowed_lists[0] == allowed_lists[1], "main and servicebus allow different windows"
    servicebus_module = body(doc("main")["modules"]["serviceBus"])
    assert servicebus_module["params"]["duplicateDetectionHistoryTimeWindowOverride"] == (
        "duplicateDetectionHistoryTimeWindowOverride"
    )


def test_messaging_json_values_are_valid_for_service_bus() -> None:
    data = messaging()
    assert timedelta(seconds=5) <= iso_duration(data["lockDuration"]) <= timedelta(minutes=5)
    assert isinstance(data["maxDeliveryCount"], int)
    assert data["maxDeliveryCount"] >= 1
    assert iso_duration(data["defaultMessageTimeToLive"]) > timedelta(0)


# ---- Cosmos DB ----------------------------------------------------------------------------------


def test_cosmos_account_is_keyless_and_serverless_by_default() -> None:
    cosmos = doc("cosmos")
    props = body(only_resource(cosmos, "Microsoft.DocumentDB/databaseAccounts"))["properties"]
    assert props["disableLocalAuth"] is True
    assert props["minimalTlsVersion"] == "Tls12"
    assert props["disableKeyBasedMetadataWriteAccess"] is True
    capabilities = props["capabilities"]["operator"]
    assert capabilities["type"] == "conditional"
    assert capabilities["operands"]["condition"] == "serverless"
    assert capabilities["operands"]["true_value"] == [{"name": "EnableServerless"}]
    assert cosmos["parameters"]["serverless"]["default"] is True
    main = doc("main")
    assert main["parameters"]["cosmosServerless"]["default"] is True
    assert body(main["modules"]["cosmos"])["params"]["serverless"] == "cosmosServerless"


def test_cosmos_provisioned_mode_uses_autoscale_per_container() -> None:
    """Throughput on the orders container, the leases container apart, none on the database.
    Fails on 223dafd (database-level throughput shared by orders and leases)."""
    cosmos = doc("cosmos")
    for var, param in (
        ("ordersOptions", "autoscaleMaxThroughput"),
        ("leasesOptions", "leasesAutoscaleMaxThroughput"),
    ):
        options = cosmos["variables"][var]["value"]["operator"]["operands"]
        assert options["condition"] == "serverless"
        assert options["true_value"] == {}
        assert options["false_value"] == {"autoscaleSettings": {"maxThroughput": param}}
        assert cosmos["parameters"][param]["default"] == 1000
        assert decorator(cosmos["parameters"][param], "min_value") == 1000
    resources = cosmos["resources"]
    assert body(resources["ordersContainer"])["properties"]["options"] == "ordersOptions"
    assert body(resources["leasesContainer"])["properties"]["options"] == "leasesOptions"
    assert "options" not in body(resources["database"])["properties"]
    params = body(doc("main")["modules"]["cosmos"])["params"]
    assert params["autoscaleMaxThroughput"] == "cosmosAutoscaleMaxThroughput"
    assert params["leasesAutoscaleMaxThroughput"] == "cosmosLeasesAutoscaleMaxThroughput"


def orders_indexing_policy() -> dict[str, Any]:
    """The orders container's indexing policy: the file the Bicep loads, which the emulator's
    and the local server's containers get too (``ops.init_cosmos.ORDERS_INDEXING_POLICY``)."""
    cosmos = doc("cosmos")
    containers = resources_of_type(
        cosmos, "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"
    )
    loaded = body(containers["ordersContainer"])["properties"]["resource"]["indexingPolicy"]
    call = loaded["function"]
    assert call["type"] == "load_json_content"
    path = (APP / call["parameters"]["file_path"]).resolve()
    assert path == INDEXING_FILE
    policy: dict[str, Any] = json.loads(path.read_text())
    assert policy == ORDERS_INDEXING_POLICY
    return policy


def test_orders_container_partitioning_ttl_and_lean_indexing() -> None:
    cosmos = doc("cosmos")
    containers = resources_of_type(
        cosmos, "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"
    )
    orders = body(containers["ordersContainer"])["properties"]["resource"]
    assert orders["partitionKey"]["paths"] == ["/orderId"]
    assert int_literal(orders["defaultTtl"]) == -1  # per-item TTL (outbox docs), no default expiry
    indexing = orders_indexing_policy()
    assert [p["path"] for p in indexing["excludedPaths"]] == ["/*"]
    assert {p["path"] for p in indexing["includedPaths"]} == {
        "/type/?",
        "/status/?",
        "/createdAt/?",
    }
    leases = body(containers["leasesContainer"])["properties"]["resource"]
    assert leases["partitionKey"]["paths"] == ["/id"]
    module = body(doc("main")["modules"]["cosmos"])["params"]
    assert module["databaseName"] == "orders"
    assert module["containerName"] == "orders"
    assert module["leasesContainerName"] == "leases"


def test_every_field_the_watchdog_s_query_filters_or_orders_on_is_indexed() -> None:
    """The watchdog's query (``STUCK_QUERY``) loads only what it returns when the index serves
    its whole filter and its order: each field it filters on in the range index, and one
    composite index of its ORDER BY fields in their order and direction, the equalities first
    and the range filter last (learn.microsoft.com/azure/cosmos-db/index-policy, "Queries with
    a filter and ORDER BY"). Fails on the policy before issue 25, which excluded ``createdAt``
    (every aggregate and page then loaded every pending outbox document)."""
    where, _, order_by = STUCK_QUERY.partition(" WHERE ")[2].partition(" ORDER BY ")
    filtered = re.findall(r"c\.(\w+) (=|<=) @", where)
    ordered = re.findall(r"c\.(\w+)", order_by)
    indexing = orders_indexing_policy()

    included = {p["path"] for p in indexing["includedPaths"]}
    assert {f"/{name}/?" for name, _ in filtered} <= included
    equalities = [name for name, operator in filtered if operator == "="]
    ranges = [name for name, operator in filtered if operator != "="]
    assert ordered == [*equalities, *ranges] and len(ranges) == 1  # one range filter, last
    assert [(p["path"], p["order"]) for p in indexing["compositeIndexes"][0]] == [
        (f"/{name}", "ascending") for name in ordered
    ]
    assert "DESC" not in order_by.upper()


# ---- Storage, monitoring ------------------------------------------------------------------------


def test_storage_disallows_shared_keys_and_public_blobs() -> None:
    storage = doc("storage")
    props = body(only_resource(storage, STORAGE_TYPE))["properties"]
    assert props["allowSharedKeyAccess"] is False
    assert props["allowBlobPublicAccess"] is False
    assert props["minimumTlsVersion"] == "TLS1_2"
    assert props["supportsHttpsTrafficOnly"] is True
    container = body(
        only_resource(storage, "Microsoft.Storage/storageAccounts/blobServices/containers")
    )
    assert container["properties"]["publicAccess"] == "None"


def test_application_insights_local_auth_disabled_on_log_analytics() -> None:
    monitoring = doc("monitoring")
    insights = body(only_resource(monitoring, APPINSIGHTS_TYPE))["properties"]
    assert insights["DisableLocalAuth"] is True
    workspace_name = next(
        iter(resources_of_type(monitoring, "Microsoft.OperationalInsights/workspaces"))
    )
    assert accessor(insights["WorkspaceResourceId"]) == (workspace_name, "id")


# ---- Function App -------------------------------------------------------------------------------


def test_function_app_is_flex_consumption_python_313_with_user_assigned_identity() -> None:
    function = doc("function")
    plan = body(only_resource(function, "Microsoft.Web/serverfarms"))
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    site = body(only_resource(function, "Microsoft.Web/sites"))
    assert site["identity"]["type"] == "UserAssigned"
    assert site["identity"]["userAssignedIdentities"] == {"'${identityId}'": {}}
    props = site["properties"]
    assert props["httpsOnly"] is True
    assert props["siteConfig"] == {"minTlsVersion": "1.2"}  # see test_flex_site_config_...
    config = props["functionAppConfig"]
    assert config["runtime"] == {"name": "python", "version": "3.13"}
    storage = config["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {
        "type": "UserAssignedIdentity",
        "userAssignedIdentityResourceId": "identityId",
    }


def test_basic_publishing_credentials_are_disabled() -> None:
    policies = resources_of_type(
        doc("function"), "Microsoft.Web/sites/basicPublishingCredentialsPolicies"
    )
    assert {body(p)["name"]: body(p)["properties"]["allow"] for p in policies.values()} == {
        "ftp": False,
        "scm": False,
    }


def _app_settings() -> tuple[dict[str, Any], Any]:
    settings = body(doc("function")["resources"]["appSettings"])
    assert settings["name"] == "appsettings"
    union = settings["properties"]["function"]
    assert union["type"] == "union"
    return union["parameters"]["arg_1"], union["parameters"]["arg_2"]


def test_app_settings_expose_the_names_the_code_reads() -> None:
    settings, extra = _app_settings()
    assert set(settings) >= REQUIRED_APP_SETTINGS, REQUIRED_APP_SETTINGS - set(settings)
    assert extra == "extraAppSettings"
    assert settings["ServiceBusConnection__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["CosmosDBConnection__credential"] == "managedidentity"
    # The default chain's setting is gone: nothing deployed builds DefaultAzureCredential.
    assert "AZURE_CLIENT_ID" not in settings
    assert settings["COSMOS_VERIFY_TLS"] == "true"
    assert settings["OUTBOX_ENABLED"] == "true"
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == (
        "ClientId=${identityClientId};Authorization=AAD"
    )
    # One telemetry pipeline: the app's own distro, with the host told to stand back.
    assert settings["PYTHON_ENABLE_OPENTELEMETRY"] == "true"
    assert "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY" not in settings
    # No plugin scan at the cold start: the value the bench's cold start runs with.
    assert settings["PYDANTIC_DISABLE_PLUGINS"] == DEPLOYED_SETTINGS["PYDANTIC_DISABLE_PLUGINS"]
    # identity-bound settings all point at the user-assigned identity's client id
    for name in (
        "ServiceBusConnection__clientId",
        "AzureWebJobsStorage__clientId",
        "CosmosDBConnection__clientId",
    ):
        assert settings[name] == "identityClientId", name
    # values that are module parameters are wired from the right module outputs in main.bicep
    params = body(doc("main")["modules"]["functionApp"])["params"]
    wiring = {
        "ORDERS_QUEUE_NAME": ("queueName", ("serviceBus", "outputs", "queueName")),
        "ORDER_EVENTS_TOPIC_NAME": ("topicName", ("serviceBus", "outputs", "topicName")),
        "ServiceBusConnection__fullyQualifiedNamespace": (
            "serviceBusFullyQualifiedNamespace",
            ("serviceBus", "outputs", "fullyQualifiedNamespace"),
        ),
        "COSMOS_ENDPOINT": ("cosmosEndpoint", ("cosmos", "outputs", "endpoint")),
        "COSMOS_DATABASE": ("cosmosDatabaseName", ("cosmos", "outputs", "databaseName")),
        "COSMOS_CONTAINER": ("cosmosContainerName", ("cosmos", "outputs", "containerName")),
        "INVENTORY_SUBSCRIPTION_NAME": (
            "inventorySubscriptionName",
            ("serviceBus", "outputs", "inventorySubscriptionName"),
        ),
        "PAYMENTS_SUBSCRIPTION_NAME": (
            "paymentsSubscriptionName",
            ("serviceBus", "outputs", "paymentsSubscriptionName"),
        ),
        "INVENTORY_CONTAINER": (
            "inventoryContainerName",
            ("cosmos", "outputs", "inventoryContainerName"),
        ),
        "PAYMENTS_CONTAINER": (
            "paymentsContainerName",
            ("cosmos", "outputs", "paymentsContainerName"),
        ),
        "AzureWebJobsStorage__accountName": ("storageAccountName", ("storage", "outputs", "name")),
        "APPLICATIONINSIGHTS_CONNECTION_STRING": (
            "applicationInsightsConnectionString",
            ("monitoring", "outputs", "connectionString"),
        ),
    }
    for setting, (param, source) in wiring.items():
        assert settings[setting] == param, setting
        assert accessor(params[param]) == source, setting
    assert accessor(params["identityClientId"]) == ("identity", "outputs", "clientId")


def test_cosmos_endpoint_output_is_the_document_endpoint_not_a_key() -> None:
    outputs = doc("cosmos")["outputs"]
    assert accessor(outputs["endpoint"]["value"]) == ("account", "properties", "documentEndpoint")


def test_no_secret_key_or_connection_string_anywhere_in_infra() -> None:
    offenders = []
    for path in [*BICEP_FILES, INFRA / "main.parameters.json"]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if SECRET_MARKERS.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    settings, _ = _app_settings()
    for name, value in settings.items():
        assert not SECRET_MARKERS.search(f"{name}={value}"), name
        if name in KEY_NAMED_SETTINGS:
            assert value == KEY_NAMED_SETTINGS[name], name
            continue
        assert "KEY" not in name.upper(), name
    assert "extraAppSettings" not in body(doc("main")["modules"]["functionApp"])["params"]


# ---- RBAC ---------------------------------------------------------------------------------------


def test_rbac_has_exactly_the_reviewed_role_assignments() -> None:
    rbac = doc("rbac")
    assignments = resources_of_type(rbac, "Microsoft.Authorization/roleAssignments")
    assert set(assignments) == set(EXPECTED_ROLE_ASSIGNMENTS)
    for path in BICEP_FILES:
        if path.name != "rbac.bicep":
            found = resources_of_type(parse_bicep(path), "Microsoft.Authorization/roleAssignments")
            assert not found, f"role assignment outside rbac.bicep: {path}"


@pytest.mark.parametrize("name", sorted(EXPECTED_ROLE_ASSIGNMENTS))
def test_role_assignment_uses_documented_role_at_narrowest_scope(name: str) -> None:
    rbac = doc("rbac")
    role_id, scope_type, developer = EXPECTED_ROLE_ASSIGNMENTS[name]
    resource = rbac["resources"][name]
    assignment = body(resource)
    # role: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', <var>)
    role = assignment["properties"]["roleDefinitionId"]["function"]
    assert role["type"] == "subscription_resource_id"
    assert role["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
    role_var = role["parameters"]["resource_name_1"]
    assert rbac["variables"][role_var]["value"] == role_id
    # scope: a symbolic reference to a resource of the expected (narrow) type
    scope = assignment["scope"]
    assert rbac["resources"][scope]["type"] == scope_type
    assert rbac["resources"][scope]["existing"] is True
    # the name is a deterministic guid over (scope, principal, role)
    guid = assignment["name"]["function"]
    assert guid["type"] == "guid"
    assert accessor(guid["parameters"]["base_string"]) == (scope, "id")
    assert guid["parameters"]["extra_string_2"] == role_var
    principal = assignment["properties"]["principalId"]
    if developer:
        assert principal == "principalId"
        assert is_not_empty_check(condition(resource), "principalId")
        assert assignment["properties"]["principalType"] == "principalType"
    else:
        assert principal == "managedIdentityPrincipalId"
        assert assignment["properties"]["principalType"] == "ServicePrincipal"
    if name == "appQueueOwnerForScaling":
        assert condition(resource) == "grantQueueDataOwnerForScaling"
    elif not developer:
        assert condition(resource) is None


def test_rbac_scopes_point_at_the_deployed_entities() -> None:
    rbac = doc("rbac")
    res = rbac["resources"]
    assert body(res["queue"]) == {"parent": "namespace", "name": "queueName"}
    assert body(res["topic"]) == {"parent": "namespace", "name": "topicName"}
    params = body(doc("main")["modules"]["rbac"])["params"]
    assert accessor(params["queueName"]) == ("serviceBus", "outputs", "queueName")
    assert accessor(params["topicName"]) == ("serviceBus", "outputs", "topicName")
    assert accessor(params["storageAccountName"]) == ("storage", "outputs", "name")
    assert accessor(params["applicationInsightsName"]) == (
        "monitoring",
        "outputs",
        "applicationInsightsName",
    )
    assert accessor(params["managedIdentityPrincipalId"]) == ("identity", "outputs", "principalId")
    assert doc("main")["parameters"]["principalId"]["default"] == ""


def test_developer_access_is_granted_only_when_asked_for() -> None:
    """AZURE_PRINCIPAL_ID is set in every azd environment (CI, production): the developer roles
    follow grantDeveloperAccess, off by default, not the mere presence of a principal id."""
    main = doc("main")
    assert main["parameters"]["grantDeveloperAccess"]["default"] is False
    gated = body(main["modules"]["rbac"])["params"]["principalId"]["operator"]
    assert gated["type"] == "conditional"
    assert gated["operands"] == {
        "condition": "grantDeveloperAccess",
        "true_value": "principalId",
        "false_value": "",
    }
    params = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    assert params["parameters"]["grantDeveloperAccess"]["value"] == (
        "${GRANT_DEVELOPER_ACCESS=false}"
    )


def test_queue_data_owner_for_scaling_is_on_by_default_and_scoped_to_the_queue() -> None:
    """With Listen rights only, target-based scaling reverts to incremental scale (Learn:
    target-based scaling): the default grants Data Owner on the orders queue only. Fails on
    223dafd (off by default)."""
    main = doc("main")
    assert main["parameters"]["grantQueueDataOwnerForScaling"]["default"] is True
    assert doc("rbac")["parameters"]["grantQueueDataOwnerForScaling"]["default"] is True
    params = body(main["modules"]["rbac"])["params"]
    assert params["grantQueueDataOwnerForScaling"] == "grantQueueDataOwnerForScaling"
    owner = body(doc("rbac")["resources"]["appQueueOwnerForScaling"])
    assert owner["scope"] == "queue"
    mapping = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    assert mapping["parameters"]["grantQueueDataOwnerForScaling"]["value"] == (
        "${GRANT_QUEUE_DATA_OWNER_FOR_SCALING=true}"
    )


# The Cosmos DB data-plane roles (custom, from the code's calls): test_cosmos_roles.py.


def test_function_app_waits_for_its_role_assignments() -> None:
    function_module = doc("main")["modules"]["functionApp"]
    assert "rbac" in body(function_module).get("dependsOn", [])


# ---- Alerts -------------------------------------------------------------------------------------


def _log_alert_queries() -> dict[str, str]:
    alerts = doc("alerts")
    variables = {name: var["value"] for name, var in alerts["variables"].items()}
    rules = resources_of_type(alerts, "Microsoft.Insights/scheduledQueryRules")
    queries = {}
    for name, rule in rules.items():
        criterion = body(rule)["properties"]["criteria"]["allOf"][0]
        queries[name] = variables[criterion["query"]]
    return queries


def test_dead_letter_metric_alert_on_the_orders_queue() -> None:
    alerts = doc("alerts")
    alert = body(alerts["resources"]["deadLetteredAlert"])
    props = alert["properties"]
    assert props["scopes"] == [accessor_to_str(("namespace", "id"))]
    assert alerts["resources"]["namespace"]["type"] == "Microsoft.ServiceBus/namespaces"
    (criterion,) = props["criteria"]["allOf"]
    assert criterion["metricName"] == "DeadletteredMessages"
    assert criterion["operator"] == "GreaterThan"
    assert criterion["threshold"] == 0
    assert criterion["dimensions"] == [
        {"name": "EntityName", "operator": "Include", "values": ["queueName"]}
    ]
    params = body(doc("main")["modules"]["alerts"])["params"]
    assert accessor(params["queueName"]) == ("serviceBus", "outputs", "queueName")


def accessor_to_str(parts: tuple[str, ...]) -> Any:
    """Rebuild pycep's nested property accessor for comparison."""
    expr: Any = parts[-1]
    for part in reversed(parts[:-1]):
        expr = {
            "operator": {
                "type": "property_accessor",
                "operands": {"operand_1": part, "operand_2": expr},
            }
        }
    return expr


def test_log_alerts_query_the_telemetry_the_consumer_emits() -> None:
    queries = _log_alert_queries()
    assert set(queries) == {
        "hashMismatchAlert",
        "systemicAlert",
        "abandonRateAlert",
        "processingP95Alert",
        "relayParkedAlert",
        "relayLagAlert",
    }
    assert 'name == "orders.relay.parked"' in queries["relayParkedAlert"]
    assert "sum(valueSum)" in queries["relayParkedAlert"]  # a counter: its increments
    assert 'name == "orders.relay.lag"' in queries["relayLagAlert"]
    assert "sum(valueCount)" in queries["relayLagAlert"]  # a histogram: its observations
    hash_mismatch = queries["hashMismatchAlert"]
    assert hash_mismatch.startswith("traces")
    assert 'customDimensions["deadletter_reason"]) == "HashMismatch"' in hash_mismatch
    assert 'customDimensions["outcome"]) == "systemic"' in queries["systemicAlert"]
    # Pages on the first in-delivery retry of a systemic failure, not a minute later.
    assert 'customDimensions["attempt_outcome"]) == "systemic"' in queries["systemicAlert"]
    abandon = queries["abandonRateAlert"]
    assert 'name == "orders.messages"' in abandon
    assert 'customDimensions["settlement"]' in abandon
    assert 'settlement in ("complete", "abandon", "deadletter")' in abandon
    assert "AbandonRatePct" in abandon
    latency = queries["processingP95Alert"]
    assert latency.startswith("requests")
    # the consumer span is named "process <queue name>" ("process orders")
    assert 'name == "process ${queueName}"' in latency
    # requests are sampled: weighted by itemCount
    assert "percentilew(duration, itemCount, 95)" in latency
    assert "sum(itemCount)" in latency


def test_a_stalled_consumer_alerts_on_waiting_messages_that_nothing_completes() -> None:
    """Nothing in App Insights fires when the function stops: the broker's metrics must. Messages
    waiting (ActiveMessages minimum above the threshold for the whole window) AND nothing completed
    (CompleteMessage total zero): in-flight messages alone keep ActiveMessages above zero under
    steady load. Fails on 223dafd (ActiveMessages alone paged a healthy consumer)."""
    alerts = doc("alerts")
    assert set(resources_of_type(alerts, "Microsoft.Insights/metricAlerts")) == {
        "deadLetteredAlert",
        "stalledConsumerAlert",
    }
    props = body(alerts["resources"]["stalledConsumerAlert"])["properties"]
    assert props["scopes"] == [accessor_to_str(("namespace", "id"))]
    assert props["windowSize"] == "stalledQueueWindow"
    assert props["actions"] == [{"actionGroupId": accessor_to_str(("actionGroup", "id"))}]
    criteria = props["criteria"]
    assert (
        criteria["'odata.type'"] == "Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria"
    )
    waiting, completed = criteria["allOf"]  # allOf: every criterion must hold
    entity = [{"name": "EntityName", "operator": "Include", "values": ["queueName"]}]
    for criterion in (waiting, completed):
        assert criterion["metricNamespace"] == "Microsoft.ServiceBus/namespaces"
        assert criterion["criterionType"] == "StaticThresholdCriterion"
        assert criterion["dimensions"] == entity
    assert (waiting["metricName"], waiting["timeAggregation"]) == ("ActiveMessages", "Minimum")
    assert waiting["operator"] == "GreaterThan"
    assert waiting["threshold"] == "stalledQueueActiveMessagesThreshold"
    assert (completed["metricName"], completed["timeAggregation"]) == ("CompleteMessage", "Total")
    assert (completed["operator"], completed["threshold"]) == ("LessThanOrEqual", 0)
    assert alerts["parameters"]["stalledQueueActiveMessagesThreshold"]["default"] == 0
    assert alerts["parameters"]["stalledQueueWindow"]["default"] == "PT15M"


def test_log_alert_thresholds_and_wiring() -> None:
    alerts = doc("alerts")
    rules = resources_of_type(alerts, "Microsoft.Insights/scheduledQueryRules")
    expected = {
        "hashMismatchAlert": ("Count", None, 0),
        "systemicAlert": ("Count", None, 0),
        "abandonRateAlert": ("Maximum", "AbandonRatePct", "abandonRateThresholdPercent"),
        "processingP95Alert": ("Maximum", "P95Ms", "processingP95ThresholdMs"),
        "relayParkedAlert": ("Maximum", "Parked", 0),
        "relayLagAlert": ("Maximum", "MeanLagS", "relayLagThresholdSeconds"),
    }
    for name, (aggregation, column, threshold) in expected.items():
        props = body(rules[name])["properties"]
        assert props["scopes"] == [accessor_to_str(("applicationInsights", "id"))], name
        assert props["actions"]["actionGroups"] == [accessor_to_str(("actionGroup", "id"))]
        (criterion,) = props["criteria"]["allOf"]
        assert criterion["timeAggregation"] == aggregation, name
        assert criterion.get("metricMeasureColumn") == column, name
        assert criterion["operator"] == "GreaterThan", name
        assert criterion["threshold"] == threshold, name
    assert alerts["parameters"]["abandonRateThresholdPercent"]["default"] == 10
    assert alerts["parameters"]["processingP95ThresholdMs"]["default"] == 2000
    main = doc("main")
    assert main["parameters"]["abandonRateThresholdPercent"]["default"] == 10
    assert main["parameters"]["processingP95ThresholdMs"]["default"] == 2000
    params = body(main["modules"]["alerts"])["params"]
    assert params["abandonRateThresholdPercent"] == "abandonRateThresholdPercent"
    assert params["processingP95ThresholdMs"] == "processingP95ThresholdMs"
    assert accessor(params["applicationInsightsName"]) == (
        "monitoring",
        "outputs",
        "applicationInsightsName",
    )


def test_an_action_group_without_receiver_is_the_default_and_said_so() -> None:
    """alertEmail defaults to "none" (so `azd provision --no-prompt` and pipelines run; fails on
    223dafd, which had no default); "none" deploys alerts nobody gets, and ALERTS_NOTIFY says so."""
    alerts = doc("alerts")
    group = body(only_resource(alerts, "Microsoft.Insights/actionGroups"))
    receivers = group["properties"]["emailReceivers"]["operator"]
    assert receivers["type"] == "conditional"
    assert receivers["operands"]["condition"] == "notifyNobody"
    assert receivers["operands"]["true_value"] == []
    assert receivers["operands"]["false_value"][0]["emailAddress"] == "alertEmail"
    nobody = alerts["variables"]["notifyNobody"]["value"]["operator"]
    assert nobody["type"] == "equals"
    assert nobody["operands"]["operand_2"] == "none"
    assert nobody["operands"]["operand_1"]["function"]["type"] == "to_lower"
    main = doc("main")
    assert main["parameters"]["alertEmail"]["default"] == "none"
    for document in (alerts, main):
        assert decorator(document["parameters"]["alertEmail"], "min_length") == 1
    params = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    assert params["parameters"]["alertEmail"]["value"] == "${ALERT_EMAIL=none}"
    notify = alerts["outputs"]["alertsNotify"]["value"]["operator"]["operands"]
    assert notify["condition"] == "notifyNobody"
    assert "nobody" in notify["true_value"]
    assert accessor(main["outputs"]["ALERTS_NOTIFY"]["value"]) == (
        "alerts",
        "outputs",
        "alertsNotify",
    )


# ---- Diagnostics and workbook -------------------------------------------------------------------

DIAGNOSTICS_TYPE = "Microsoft.Insights/diagnosticSettings"


def test_diagnostic_settings_send_service_bus_cosmos_storage_and_key_vault_to_log_analytics() -> (
    None
):
    diagnostics = doc("diagnostics")
    settings = resources_of_type(diagnostics, DIAGNOSTICS_TYPE)
    scoped = {
        diagnostics["resources"][body(setting)["scope"]]["type"]: body(setting)
        for setting in settings.values()
    }
    assert set(scoped) == {
        "Microsoft.ServiceBus/namespaces",
        "Microsoft.DocumentDB/databaseAccounts",
        "Microsoft.Storage/storageAccounts",
        "Microsoft.Storage/storageAccounts/blobServices",
        "Microsoft.KeyVault/vaults",
    }
    for type_, setting in scoped.items():
        props = setting["properties"]
        assert props["workspaceId"] == "logAnalyticsWorkspaceId", type_
        assert props["metrics"] and all(m["enabled"] is True for m in props["metrics"]), type_
        if type_ == "Microsoft.DocumentDB/databaseAccounts":  # categories: test_cosmos_data_...
            assert props["logs"]["config"] == {"category": "category", "enabled": True}
            continue
        if type_ == "Microsoft.KeyVault/vaults":  # its audit logs: test_key_vault.py
            continue
        assert all(entry["enabled"] is True for entry in props.get("logs", [])), type_
        if type_ != "Microsoft.Storage/storageAccounts":  # the account itself has no logs
            assert props["logs"] == [{"categoryGroup": "allLogs", "enabled": True}], type_
    for name in ("namespace", "cosmosAccount", "storage", "blobService", "vault"):
        assert diagnostics["resources"][name]["existing"] is True, name
    params = body(doc("main")["modules"]["diagnostics"])["params"]
    assert accessor(params["logAnalyticsWorkspaceId"]) == (
        "monitoring",
        "outputs",
        "logAnalyticsId",
    )
    assert accessor(params["serviceBusNamespaceName"]) == ("serviceBus", "outputs", "name")
    assert accessor(params["cosmosAccountName"]) == ("cosmos", "outputs", "accountName")
    assert accessor(params["storageAccountName"]) == ("storage", "outputs", "name")
    assert accessor(params["keyVaultName"]) == ("keyVault", "outputs", "name")


def test_the_workbook_is_deployed_from_the_monitoring_folder() -> None:
    workbook = doc("workbook")
    resource = body(only_resource(workbook, "Microsoft.Insights/workbooks"))
    props = resource["properties"]
    loaded = props["serializedData"]["function"]
    assert loaded["type"] == "load_text_content"
    path = (APP / loaded["parameters"]["file_path"]).resolve()
    assert path == (INFRA / "monitoring" / "workbook.json").resolve()
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == "Notebook/1.0"
    assert accessor(props["sourceId"]) == ("applicationInsights", "id")
    assert resource["kind"] == "shared"
    assert resource["name"]["function"]["type"] == "guid"
    titles = " | ".join(
        item["content"].get("title", "") for item in data["items"] if item["type"] == 3
    )
    for panel in (
        "Outcomes per minute",
        "Duplicate rate",
        "Dead-letters by reason",
        "retries",
        "p50 / p95 / p99",
        "Request units per processed order",
        "Relay lag",
    ):
        assert panel in titles, panel


def test_operator_queries_cover_the_runbook() -> None:
    kql = (INFRA / "monitoring" / "queries.kql").read_text(encoding="utf-8")
    for needle in (
        'name == "process orders"',
        'name == "orders.messages"',
        'name == "orders.cosmos.request_charge"',
        'name == "orders.processing.duration"',
        'customDimensions["deadletter_reason"]',
        'customDimensions["orders.delivery_count"]',
        'outcome == "duplicate"',
    ):
        assert needle in kql, needle


def test_every_checkov_skip_is_inline_and_justified() -> None:
    skip = re.compile(r"checkov:skip=")
    justified = re.compile(r"^\s*//checkov:skip=CKV2?_[A-Z]+_\d+: \S.{15,}$")
    skips = []
    for path in BICEP_FILES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if skip.search(line):
                assert justified.match(line), f"{path.name}:{number}: {line.strip()}"
                skips.append(line)
    assert skips, "expected the documented skips (no VNet, Flex Consumption specifics)"
