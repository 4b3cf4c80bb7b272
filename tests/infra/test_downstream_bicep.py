"""Offline checks (pycep) of what the two downstream consumers need from the Bicep (issues 27
and 28): the topic subscriptions `inventory` and `payments` with their filter, the `inventory`
and `payments` containers, the receivers scoped to each subscription, the payment provider's
key in Key Vault read only through a Key Vault reference, the app settings named in names.md,
the local settings, and the alerts.

The names are the ones fixed for every part (names.md); the event types are the order events'
contract (``shared.consumer.contract.EVENT_TYPES``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from shared.consumer.contract import EVENT_TYPES
from tests.infra.infra_support import (
    INFRA,
    REPO,
    accessor,
    body,
    decorator_argument,
    doc,
    int_literal,
    is_secure,
    load_yaml,
    main_parameter_mapping,
    messaging,
    parse_bicep,
)

SUBSCRIPTION = "Microsoft.ServiceBus/namespaces/topics/subscriptions"
RULE = "Microsoft.ServiceBus/namespaces/topics/subscriptions/rules"
CONTAINER = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))

# names.md: subscription, container, partition key, consumer name of each downstream consumer.
CONSUMERS = {
    "inventory": ("inventorySubscription", "inventoryRule", "inventoryContainer", "/sku"),
    "payments": ("paymentsSubscription", "paymentsRule", "paymentsContainer", "/orderId"),
}
STOCK_RESERVATION = "stock-reservation"
PAYMENT_CAPTURE = "payment-capture"
# names.md: the metric of events parked as needing reconciliation, and the business count that
# is never an alert.
RECONCILIATION_NEEDED_METRIC = "orders.payments.reconciliation_needed"
SHORTFALL_METRIC = "orders.stock.shortfall"
# The runbook sections of docs/operations.md (their anchors).
STOCK_RUNBOOK = "docs/operations.md#stock-reservation"
PAYMENTS_RUNBOOK = "docs/operations.md#payments-needing-reconciliation"

KEY_VAULT_REFERENCE = "@Microsoft.KeyVault(SecretUri=${paymentProviderApiKeySecretUri})"


def _settings() -> dict[str, Any]:
    values: dict[str, Any] = body(doc("function")["resources"]["appSettings"])["properties"][
        "function"
    ]["parameters"]["arg_1"]
    return values


def _variable(document: dict[str, Any], name: str) -> Any:
    return document["variables"][name]["value"]


# ---- Service Bus --------------------------------------------------------------------------------


def test_the_subscription_names_are_the_fixed_ones_from_messaging_json() -> None:
    servicebus = doc("servicebus")
    data = messaging()
    assert (data["inventorySubscriptionName"], data["paymentsSubscriptionName"]) == (
        "inventory",
        "payments",
    )
    for name, (subscription, _, _, _) in CONSUMERS.items():
        resource = servicebus["resources"][subscription]
        assert resource["type"] == SUBSCRIPTION
        assert body(resource)["parent"] == "topic"
        assert accessor(body(resource)["name"]) == ("messaging", f"{name}SubscriptionName")
        assert resource["config"].get("condition") is None  # always deployed
        output = servicebus["outputs"][f"{name}SubscriptionName"]["value"]
        assert accessor(output) == (subscription, "name")


def test_the_subscriptions_are_peek_lock_and_dead_letter_what_expires() -> None:
    """The consumers settle each message themselves (no sessions); an expired event goes to the
    dead-letter queue, where it is counted and alerted, not silently dropped; duplicate
    detection is the topic's (a subscription has no such property)."""
    servicebus = doc("servicebus")
    properties = _variable(servicebus, "consumerSubscriptionProperties")
    for subscription, _, _, _ in CONSUMERS.values():
        assert body(servicebus["resources"][subscription])["properties"] == (
            "consumerSubscriptionProperties"
        )
    assert properties["deadLetteringOnMessageExpiration"] is True
    assert properties["deadLetteringOnFilterEvaluationExceptions"] is True
    assert properties["requiresSession"] is False
    assert not {"requiresDuplicateDetection", "forwardTo", "autoDeleteOnIdle"} & set(properties)
    topic = body(servicebus["resources"]["topic"])["properties"]
    assert topic["requiresDuplicateDetection"] is True


def test_each_subscription_s_default_rule_is_replaced_by_the_event_type_filter() -> None:
    """A new subscription's `$Default` rule is the true filter and rules are OR-ed: a rule added
    beside it would let every event in. Each subscription has exactly one rule, named
    `$Default`, a SQL filter on the Subject (sys.Label) selecting exactly the three order
    events."""
    servicebus = doc("servicebus")
    rules = {
        body(resource)["parent"]: body(resource)
        for resource in servicebus["resources"].values()
        if resource["type"] == RULE
    }
    assert set(rules) == {subscription for subscription, _, _, _ in CONSUMERS.values()}
    expression = _variable(servicebus, "orderEventsFilter")
    match = re.fullmatch(r"sys\.Label IN \((?P<values>[^)]*)\)", expression)
    assert match, expression
    selected = [value.strip() for value in match["values"].split(",")]
    assert all(value.startswith("'") and value.endswith("'") for value in selected), selected
    assert sorted(value[1:-1] for value in selected) == sorted(EVENT_TYPES)
    assert sorted(EVENT_TYPES) == ["OrderAccepted", "OrderAmended", "OrderCancelled"]
    for subscription, rule_name, _, _ in CONSUMERS.values():
        rule = rules[subscription]
        assert rule == body(servicebus["resources"][rule_name])
        assert rule["name"] == "$Default"
        assert rule["properties"] == {
            "filterType": "SqlFilter",
            "sqlFilter": {"sqlExpression": "orderEventsFilter"},
        }


def test_each_consumer_receives_from_its_own_subscription_only() -> None:
    """Data Receiver on each subscription, nothing broader and no send or manage right there."""
    rbac = doc("rbac")
    resources = rbac["resources"]
    for name, (subscription, _, _, _) in CONSUMERS.items():
        assert resources[subscription]["type"] == SUBSCRIPTION
        assert resources[subscription]["existing"] is True
        assert body(resources[subscription]) == {
            "parent": "topic",
            "name": f"{name}SubscriptionName",
        }
        scoped = [
            assignment
            for assignment in resources.values()
            if assignment["type"] == "Microsoft.Authorization/roleAssignments"
            and body(assignment)["scope"] == subscription
        ]
        roles = {
            rbac["variables"][
                body(assignment)["properties"]["roleDefinitionId"]["function"]["parameters"][
                    "resource_name_1"
                ]
            ]["value"]
            for assignment in scoped
        }
        assert roles == {"4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"}  # Azure Service Bus Data Receiver
    params = body(doc("main")["modules"]["rbac"])["params"]
    for name in CONSUMERS:
        setting = f"{name}SubscriptionName"
        assert accessor(params[setting]) == ("serviceBus", "outputs", setting)


# ---- Cosmos DB ----------------------------------------------------------------------------------


def test_the_consumers_containers_are_partitioned_as_names_md_says_with_per_item_ttl() -> None:
    cosmos = doc("cosmos")
    for name, (_, _, container, partition_key) in CONSUMERS.items():
        resource = cosmos["resources"][container]
        assert resource["type"] == CONTAINER
        assert body(resource)["parent"] == "database"
        assert body(resource)["name"] == f"{name}ContainerName"
        properties = body(resource)["properties"]
        assert properties["resource"]["id"] == f"{name}ContainerName"
        assert properties["resource"]["partitionKey"] == {
            "paths": [partition_key],
            "kind": "Hash",
            "version": 2,
        }
        # -1: ttl on, nothing expires but the inbox markers, which carry their own.
        assert int_literal(properties["resource"]["defaultTtl"]) == -1
        # Throughput as the orders container: its own autoscale RU/s, or serverless.
        assert properties["options"] == "ordersOptions"
        assert cosmos["parameters"][f"{name}ContainerName"]["default"] == name
        assert accessor(cosmos["outputs"][f"{name}ContainerName"]["value"]) == (container, "name")
        assert body(doc("main")["modules"]["cosmos"])["params"][f"{name}ContainerName"] == name


def test_the_app_s_cosmos_role_covers_the_consumers_containers_and_no_more() -> None:
    """The data role is scoped to the orders database (the relay's change feed processor reads
    the database's metadata: rbac.bicep), which holds the two new containers; the only other
    Cosmos DB assignment is the leases container's (test_cosmos_roles.py); none at account
    scope."""
    rbac = doc("rbac")
    assignments = [
        body(resource)
        for resource in rbac["resources"].values()
        if resource["type"] == "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"
    ]
    assert {assignment["properties"]["scope"] for assignment in assignments} == {
        "cosmosDatabaseScope",
        "cosmosLeasesScope",
    }
    assert _variable(rbac, "cosmosDatabaseScope") == "${cosmosAccount.id}/dbs/${cosmosDatabaseName}"
    cosmos = doc("cosmos")
    for _, _, container, _ in CONSUMERS.values():
        assert body(cosmos["resources"][container])["parent"] == "database"
    assert accessor(body(doc("main")["modules"]["rbac"])["params"]["cosmosDatabaseName"]) == (
        "cosmos",
        "outputs",
        "databaseName",
    )


# ---- Key Vault ----------------------------------------------------------------------------------


def test_the_vault_is_rbac_only_soft_deleted_and_purge_protected() -> None:
    keyvault = doc("keyvault")
    vault = body(keyvault["resources"]["vault"])["properties"]
    assert vault["enableRbacAuthorization"] is True
    assert "accessPolicies" not in vault
    assert vault["enableSoftDelete"] is True
    assert vault["enablePurgeProtection"] is True
    assert vault["softDeleteRetentionInDays"] == "softDeleteRetentionInDays"
    retention = keyvault["parameters"]["softDeleteRetentionInDays"]
    assert (int_literal(decorator_argument(retention, "min_value")), retention["default"]) == (
        7,
        90,
    )
    for flag in (
        "enabledForDeployment",
        "enabledForDiskEncryption",
        "enabledForTemplateDeployment",
    ):
        assert vault[flag] is False, flag
    main = body(doc("main")["modules"]["keyVault"])["params"]
    assert main["disablePublicNetworkAccess"] == "vnetEnabled"


def test_the_provider_key_is_a_secure_parameter_stored_only_as_the_named_secret() -> None:
    """@secure() (ARM neither logs nor returns it), from the azd variable PAYMENT_PROVIDER_API_KEY,
    into the secret payment-provider-api-key and nowhere else; empty by default, the secret then
    left as it is (written once: test_key_vault.py)."""
    main = doc("main")
    keyvault = doc("keyvault")
    secret_module = doc("keyvault-secret")
    for document, name in ((main, "paymentProviderApiKey"), (keyvault, "paymentProviderApiKey")):
        parameter = document["parameters"][name]
        assert is_secure(parameter)
        assert parameter["default"] == ""
        assert parameter["type"] == "string"
    assert is_secure(secret_module["parameters"]["value"])
    assert secret_module["parameters"]["value"]["default"] is None
    assert main_parameter_mapping()["paymentProviderApiKey"] == ("PAYMENT_PROVIDER_API_KEY", "")
    assert body(main["modules"]["keyVault"])["params"]["paymentProviderApiKey"] == (
        "paymentProviderApiKey"
    )
    module = body(keyvault["modules"]["paymentProviderApiKeySecret"])
    assert module["params"]["value"] == "paymentProviderApiKey"
    assert module["params"]["secretName"] == "paymentProviderApiKeySecretName"
    assert accessor(module["params"]["vaultName"]) == ("vault", "name")
    assert _variable(keyvault, "paymentProviderApiKeySecretName") == "payment-provider-api-key"
    secret = body(secret_module["resources"]["secret"])
    assert secret["parent"] == "vault"
    assert secret["name"] == "secretName"
    assert secret["properties"]["value"] == "value"
    # The key reaches the Key Vault module and nothing else.
    for name, module in main["modules"].items():
        if name != "keyVault":
            assert not re.search(r"\bpaymentProviderApiKey\b", json.dumps(body(module))), name


def test_no_output_and_no_app_setting_carries_the_provider_key() -> None:
    for path in BICEP_FILES:
        document = parse_bicep(path)
        secure = {
            name
            for name, definition in document.get("parameters", {}).items()
            if is_secure(definition)
        }
        for name, output in document.get("outputs", {}).items():
            text = json.dumps(output)
            assert not any(re.search(rf"\b{parameter}\b", text) for parameter in secure), (
                path.name,
                name,
            )
    assert not re.search(r"\bpaymentProviderApiKey\b", json.dumps(_settings()))
    assert "paymentProviderApiKey" not in doc("function").get("parameters", {})


def test_the_api_key_app_setting_is_only_ever_a_key_vault_reference() -> None:
    """PAYMENT_PROVIDER_API_KEY = @Microsoft.KeyVault(SecretUri=<the secret's URI>), the URI
    wired from the secret itself, resolved by the user-assigned identity (the site's
    keyVaultReferenceIdentity), which may read that secret; no other Bicep file sets it, and no
    extra settings can override it (main passes none)."""
    function = doc("function")
    settings = _settings()
    assert settings["PAYMENT_PROVIDER_API_KEY"] == "paymentProviderApiKeyReference"
    assert _variable(function, "paymentProviderApiKeyReference") == KEY_VAULT_REFERENCE
    assert function["parameters"]["paymentProviderApiKeySecretUri"]["default"] is None
    wiring = body(doc("main")["modules"]["functionApp"])["params"]
    assert accessor(wiring["paymentProviderApiKeySecretUri"]) == (
        "keyVault",
        "outputs",
        "paymentProviderApiKeySecretUri",
    )
    # The URI without a version, from the vault (the secret's module runs only when given the
    # key): https://<vault>.vault.azure.net/secrets/payment-provider-api-key.
    output = doc("keyvault")["outputs"]["paymentProviderApiKeySecretUri"]["value"]
    assert output == "${vault.properties.vaultUri}secrets/${paymentProviderApiKeySecretName}"
    name_output = doc("keyvault")["outputs"]["paymentProviderApiKeySecretName"]["value"]
    assert name_output == "paymentProviderApiKeySecretName"
    assert accessor(
        body(doc("main")["modules"]["rbac"])["params"]["paymentProviderApiKeySecretName"]
    ) == (
        "keyVault",
        "outputs",
        "paymentProviderApiKeySecretName",
    )
    site = body(function["resources"]["functionApp"])
    assert site["properties"]["keyVaultReferenceIdentity"] == "identityId"
    assert site["identity"]["type"] == "UserAssigned"
    assert accessor(wiring["identityId"]) == ("identity", "outputs", "id")
    reader = body(doc("rbac")["resources"]["appPaymentProviderApiKeyReader"])
    assert reader["scope"] == "paymentProviderApiKeySecret"
    assert reader["properties"]["principalId"] == "managedIdentityPrincipalId"
    assert "extraAppSettings" not in wiring
    for path in BICEP_FILES:
        if path.name != "function.bicep":
            assert "PAYMENT_PROVIDER_API_KEY:" not in path.read_text(encoding="utf-8"), path.name


def _base_url_after_the_check(url: str) -> str:
    """The deployed PAYMENT_PROVIDER_BASE_URL for ``url``, evaluating the check as ARM does: the
    if() takes one branch, and json() of a text that is not JSON fails the deployment."""
    check = _variable(doc("function"), "paymentProviderBaseUrlMustBeHttps")["operator"]
    assert check["type"] == "conditional"
    operands = check["operands"]
    condition = operands["condition"]["function"]
    assert condition["type"] == "starts_with"
    lowered = condition["parameters"]["string_to_search"]["function"]
    assert lowered["type"] == "to_lower"
    assert lowered["parameters"]["string_to_change"] == "paymentProviderBaseUrl"
    assert operands["true_value"] == "paymentProviderBaseUrl"
    if url.lower().startswith(condition["parameters"]["string_to_find"]):
        return url
    failure = operands["false_value"]["function"]
    assert failure["type"] == "json"
    return str(json.loads(failure["parameters"]["arg_1"]))


@pytest.mark.parametrize("url", ["https://api.provider.example/v1", "HTTPS://API.PROVIDER.EXAMPLE"])
def test_an_https_base_url_is_deployed_as_given(url: str) -> None:
    assert _base_url_after_the_check(url) == url
    assert _settings()["PAYMENT_PROVIDER_BASE_URL"] == "paymentProviderBaseUrlMustBeHttps"


@pytest.mark.parametrize(
    "url", ["http://api.provider.example", "ftp://api.provider.example", "api.provider.example"]
)
def test_any_other_base_url_fails_the_deployment(url: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        _base_url_after_the_check(url)


def test_the_provider_settings_are_parameters_set_through_azd() -> None:
    main = doc("main")
    function = doc("function")
    for document in (main, function):
        url = document["parameters"]["paymentProviderBaseUrl"]
        assert url["default"] is None  # a deployment names its provider
        assert "https" in decorator_argument(url, "description")
        keys = document["parameters"]["paymentProviderIdempotencyKeys"]
        assert decorator_argument(keys, "allowed") == ["honoured", "ignored"]
        assert keys["default"] == "honoured"
    mapping = main_parameter_mapping()
    assert mapping["paymentProviderBaseUrl"] == ("PAYMENT_PROVIDER_BASE_URL", None)
    assert mapping["paymentProviderIdempotencyKeys"] == (
        "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS",
        "honoured",
    )
    wiring = body(main["modules"]["functionApp"])["params"]
    assert wiring["paymentProviderBaseUrl"] == "paymentProviderBaseUrl"
    assert wiring["paymentProviderIdempotencyKeys"] == "paymentProviderIdempotencyKeys"
    assert _settings()["PAYMENT_PROVIDER_IDEMPOTENCY_KEYS"] == "paymentProviderIdempotencyKeys"
    pipeline = load_yaml(REPO / "azure.yaml")["pipeline"]
    assert (
        "secrets" not in pipeline
    )  # the key: written once, never a pipeline's (test_deploy_inputs)
    assert {"PAYMENT_PROVIDER_BASE_URL", "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS"} <= set(
        pipeline["variables"]
    )


def test_the_outputs_name_the_consumers_resources_and_the_vault() -> None:
    outputs = doc("main")["outputs"]
    expected = {
        "INVENTORY_SUBSCRIPTION_NAME": ("serviceBus", "outputs", "inventorySubscriptionName"),
        "PAYMENTS_SUBSCRIPTION_NAME": ("serviceBus", "outputs", "paymentsSubscriptionName"),
        "INVENTORY_CONTAINER": ("cosmos", "outputs", "inventoryContainerName"),
        "PAYMENTS_CONTAINER": ("cosmos", "outputs", "paymentsContainerName"),
        "AZURE_KEY_VAULT_NAME": ("keyVault", "outputs", "name"),
    }
    for name, source in expected.items():
        assert accessor(outputs[name]["value"]) == source, name


# ---- local settings -----------------------------------------------------------------------------


def test_the_local_settings_run_against_the_provider_stand_in() -> None:
    values = json.loads((REPO / "local.settings.json.template").read_text(encoding="utf-8"))[
        "Values"
    ]
    assert {name: values[name] for name in values if name.startswith(("INVENTORY", "PAYMENT"))} == {
        "INVENTORY_SUBSCRIPTION_NAME": "inventory",
        "INVENTORY_CONTAINER": "inventory",
        "PAYMENTS_SUBSCRIPTION_NAME": "payments",
        "PAYMENTS_CONTAINER": "payments",
        # The stand-in (local/standins) on loopback; its key is any string.
        "PAYMENT_PROVIDER_BASE_URL": "http://127.0.0.1:7081",
        "PAYMENT_PROVIDER_API_KEY": "local-not-a-secret",
        "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "honoured",
    }
    # The same names as the deployed app settings.
    assert {name for name in values if name.startswith(("INVENTORY", "PAYMENT"))} == {
        name for name in _settings() if name.startswith(("INVENTORY", "PAYMENT"))
    }


# ---- alerts -------------------------------------------------------------------------------------


def _order_events_alerts() -> dict[str, Any]:
    return doc("order-events-alerts")


def _queries() -> dict[str, str]:
    alerts = _order_events_alerts()
    queries = {}
    for name, resource in alerts["resources"].items():
        if resource["type"] == "Microsoft.Insights/scheduledQueryRules":
            (criterion,) = body(resource)["properties"]["criteria"]["allOf"]
            text = _variable(alerts, criterion["query"])
            for variable in ("stockReservationConsumer", "paymentCaptureConsumer"):
                text = text.replace(f"${{{variable}}}", _variable(alerts, variable))
            queries[name] = text
    return queries


def test_the_order_events_alerts_are_deployed_on_the_consumer_s_action_group() -> None:
    module = doc("alerts")["modules"]["orderEventsAlerts"]
    assert module["detail"]["path"] == "order-events-alerts.bicep"
    params = body(module)["params"]
    assert accessor(params["actionGroupId"]) == ("actionGroup", "id")
    assert params["topicName"] == "topicName"
    assert accessor(body(doc("main")["modules"]["alerts"])["params"]["topicName"]) == (
        "serviceBus",
        "outputs",
        "topicName",
    )
    for resource in _order_events_alerts()["resources"].values():
        if resource["existing"]:
            continue
        properties = body(resource)["properties"]
        actions = properties["actions"]
        groups = actions["actionGroups"] if isinstance(actions, dict) else actions
        assert groups in (["actionGroupId"], [{"actionGroupId": "actionGroupId"}])
        assert properties["enabled"] is True


def test_dead_letters_of_the_subscriptions_alert_from_the_broker_and_per_consumer() -> None:
    """Service Bus counts dead letters per queue or topic (EntityName), not per subscription:
    the broker's count is alerted on the topic, as the queue's is on the queue, and each
    consumer's own dead-lettered settlements are alerted from its telemetry."""
    alerts = _order_events_alerts()
    metric = body(alerts["resources"]["orderEventsDeadLetteredAlert"])["properties"]
    assert alerts["resources"]["namespace"]["type"] == "Microsoft.ServiceBus/namespaces"
    (criterion,) = metric["criteria"]["allOf"]
    assert criterion["metricName"] == "DeadletteredMessages"
    assert criterion["dimensions"] == [
        {"name": "EntityName", "operator": "Include", "values": ["topicName"]}
    ]
    assert (criterion["operator"], criterion["threshold"]) == ("GreaterThan", 0)
    queue_alert = body(doc("alerts")["resources"]["deadLetteredAlert"])["properties"]
    (queue_criterion,) = queue_alert["criteria"]["allOf"]
    assert {k: v for k, v in criterion.items() if k != "dimensions"} == {
        k: v for k, v in queue_criterion.items() if k != "dimensions"
    }
    queries = _queries()
    for rule, consumer in (
        ("stockReservationDeadLetteredAlert", STOCK_RESERVATION),
        ("paymentCaptureDeadLetteredAlert", PAYMENT_CAPTURE),
    ):
        query = queries[rule]
        assert 'name == "orders.messages"' in query
        assert f'tostring(customDimensions["orders.consumer"]) == "{consumer}"' in query
        assert 'tostring(customDimensions["settlement"]) == "deadletter"' in query
        assert "sum(valueSum)" in query


def test_a_payment_needing_reconciliation_pages_at_severity_1() -> None:
    alerts = _order_events_alerts()
    rule = body(alerts["resources"]["reconciliationNeededAlert"])["properties"]
    assert rule["severity"] == 1
    assert rule["autoMitigate"] is False  # stays until an operator resolves it
    (criterion,) = rule["criteria"]["allOf"]
    assert (criterion["operator"], criterion["threshold"]) == ("GreaterThan", 0)
    assert criterion["metricMeasureColumn"] == "Parked"
    query = _queries()["reconciliationNeededAlert"]
    assert query.startswith(f'customMetrics | where name == "{RECONCILIATION_NEEDED_METRIC}"')
    assert "sum(valueSum)" in query  # a counter: its increments


def test_each_alert_points_to_its_runbook_section() -> None:
    alerts = _order_events_alerts()
    runbooks = {
        "stockReservationRunbook": STOCK_RUNBOOK,
        "paymentsRunbook": PAYMENTS_RUNBOOK,
    }
    for variable, anchor in runbooks.items():
        assert _variable(alerts, variable) == anchor
    expected = {
        "orderEventsDeadLetteredAlert": {"stockReservationRunbook", "paymentsRunbook"},
        "stockReservationDeadLetteredAlert": {"stockReservationRunbook"},
        "paymentCaptureDeadLetteredAlert": {"paymentsRunbook"},
        "reconciliationNeededAlert": {"paymentsRunbook"},
    }
    rules = {
        name: body(resource)["properties"]["description"]
        for name, resource in alerts["resources"].items()
        if not resource["existing"]
    }
    assert set(rules) == set(expected)
    for name, description in rules.items():
        cited = {variable for variable in runbooks if f"${{{variable}}}" in description}
        assert cited == expected[name], name


def test_a_stock_shortfall_is_never_an_alert() -> None:
    """A shortfall is a business outcome (issue 27): counted and shown, it pages nobody."""
    for path in BICEP_FILES:
        text = path.read_text(encoding="utf-8")
        code = "\n".join(line.split("//")[0] for line in text.splitlines())
        assert SHORTFALL_METRIC not in code, path.name
