"""Offline checks (pycep) of what the outbox relay needs from the Bicep: TTL on the orders
container with no default expiry, the leases container, the Data Sender role at topic scope and
the relay's app settings, wired from the right module outputs."""

from __future__ import annotations

import json
from datetime import timedelta

from local.standins.topic import RETAINED_SUBSCRIPTION
from ops.durations import parse_iso8601_duration as iso_duration  # the one parser
from shared.config import WATCHDOG_MIN_AGE_SETTING, WatchdogSettings
from shared.relay.outbox import DISPATCHED_TTL_S
from tests.infra.infra_support import (
    REPO,
    accessor,
    body,
    doc,
    int_literal,
    messaging,
)

CONTAINER = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers"
SERVICE_BUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"
STORAGE_BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"


def test_orders_container_has_ttl_on_without_default_expiry() -> None:
    resources = doc("cosmos")["resources"]
    orders = body(resources["ordersContainer"])["properties"]["resource"]
    # -1: TTL is on, nothing expires unless it carries its own ttl (dispatched outbox documents).
    assert int_literal(orders["defaultTtl"]) == -1
    assert resources["ordersContainer"]["type"] == CONTAINER


def test_leases_container_exists_partitioned_on_id_in_the_orders_database() -> None:
    cosmos = doc("cosmos")
    leases = cosmos["resources"]["leasesContainer"]
    assert leases["type"] == CONTAINER
    assert body(leases)["parent"] == "database"
    resource = body(leases)["properties"]["resource"]
    assert resource["id"] == "leasesContainerName"
    # The trigger requires /id (a partitioned lease container with another key fails to start).
    assert resource["partitionKey"]["paths"] == ["/id"]
    assert cosmos["parameters"]["leasesContainerName"]["default"] == "leases"
    assert body(doc("main")["modules"]["cosmos"])["params"]["leasesContainerName"] == "leases"


def test_the_app_may_send_to_the_topic_only() -> None:
    rbac = doc("rbac")
    resources = rbac["resources"]
    sender = body(resources["appTopicSender"])
    assert sender["scope"] == "topic"
    assert resources["topic"]["type"] == "Microsoft.ServiceBus/namespaces/topics"
    assert body(resources["topic"]) == {"parent": "namespace", "name": "topicName"}
    role = sender["properties"]["roleDefinitionId"]["function"]["parameters"]["resource_name_1"]
    assert rbac["variables"][role]["value"] == SERVICE_BUS_DATA_SENDER
    assert sender["properties"]["principalId"] == "managedIdentityPrincipalId"
    # No Data Sender anywhere broader than an entity (namespace, resource group).
    for name, resource in resources.items():
        if resource["type"] != "Microsoft.Authorization/roleAssignments":
            continue
        scope = body(resource)["scope"]
        assert resources[scope]["type"] != "Microsoft.ServiceBus/namespaces", name


def test_the_topic_is_the_messaging_json_one_with_duplicate_detection() -> None:
    topic = body(doc("servicebus")["resources"]["topic"])
    assert accessor(topic["name"])[-1] == "topicName"
    assert topic["properties"]["requiresDuplicateDetection"] is True
    assert messaging()["topicName"] == "order-events"


def test_relay_app_settings_are_identity_based_and_wired() -> None:
    settings = body(doc("function")["resources"]["appSettings"])["properties"]
    values = settings["function"]["parameters"]["arg_1"]
    assert values["ORDER_EVENTS_TOPIC_NAME"] == "topicName"
    assert values["CosmosDBConnection__accountEndpoint"] == "cosmosEndpoint"
    assert values["CosmosDBConnection__credential"] == "managedidentity"
    assert values["CosmosDBConnection__clientId"] == "identityClientId"
    assert not any(name.startswith("CosmosDBConnection") and "Key" in name for name in values)
    assert "CosmosDBConnection" not in values  # no connection string with a key
    params = body(doc("main")["modules"]["functionApp"])["params"]
    assert accessor(params["cosmosEndpoint"]) == ("cosmos", "outputs", "endpoint")
    assert accessor(params["topicName"]) == ("serviceBus", "outputs", "topicName")


def test_the_topic_has_a_default_subscription_that_keeps_every_event_for_a_bounded_time() -> None:
    """A topic keeps messages only in its subscriptions: deployed without one (223dafd), every
    event of a fresh deployment was accepted, marked dispatched and kept nowhere."""
    servicebus = doc("servicebus")
    retained = servicebus["resources"]["retainedSubscription"]
    assert retained["type"] == "Microsoft.ServiceBus/namespaces/topics/subscriptions"
    subscription = body(retained)
    assert subscription["parent"] == "topic"
    assert subscription["name"] == RETAINED_SUBSCRIPTION  # the local topic model's default
    properties = subscription["properties"]
    assert properties["defaultMessageTimeToLive"] == "retainedEventsTimeToLive"
    assert properties["deadLetteringOnMessageExpiration"] is False  # expired events just go
    # No filter of its own: the default rule, the true filter, keeps every event (the consumer
    # subscriptions' rules are theirs: test_downstream_bicep.py).
    rules = [r for r in servicebus["resources"].values() if r["type"].endswith("/rules")]
    assert rules and all(body(r)["parent"] != "retainedSubscription" for r in rules)

    ttl = servicebus["parameters"]["retainedEventsTimeToLive"]
    allowed = next(d["argument"] for d in ttl["decorators"] if d["type"] == "allowed")
    # Bounded: at most a week (the dispatched outbox document's ttl); the default is the
    # duplicate-detection window (an older event can be republished from the outbox).
    assert max(iso_duration(value) for value in allowed if value != "none") == timedelta(days=7)
    assert ttl["default"] == messaging()["duplicateDetectionHistoryTimeWindow"] == "P1D"
    assert timedelta(seconds=DISPATCHED_TTL_S) >= iso_duration(ttl["default"])
    # Off only on purpose: the explicit value "none", which the condition tests.
    assert "none" in allowed and "" not in allowed
    condition = json.dumps(retained["config"]["condition"])
    assert "retainedEventsTimeToLive" in condition and "none" in condition
    main = doc("main")
    assert main["parameters"]["retainedEventsTimeToLive"]["default"] == "P1D"
    params = body(main["modules"]["serviceBus"])["params"]
    assert params["retainedEventsTimeToLive"] == "retainedEventsTimeToLive"


def test_the_watchdog_s_timer_has_its_host_storage_in_azure_and_locally() -> None:
    """A timer trigger keeps its schedule monitor and its one-instance lock in the host's
    storage (learn.microsoft.com/azure/azure-functions/functions-bindings-timer): the app
    settings give AzureWebJobsStorage by identity, the identity may use its blobs, and the
    local settings point it at Azurite."""
    values = body(doc("function")["resources"]["appSettings"])["properties"]["function"][
        "parameters"
    ]["arg_1"]
    assert values["AzureWebJobsStorage__accountName"] == "storageAccountName"
    assert values["AzureWebJobsStorage__credential"] == "managedidentity"
    assert values["AzureWebJobsStorage__clientId"] == "identityClientId"
    assert not any(name == "AzureWebJobsStorage" for name in values)  # no key in Azure
    rbac = doc("rbac")
    owner = body(rbac["resources"]["appStorageBlobOwner"])
    assert owner["scope"] == "storage"
    role = owner["properties"]["roleDefinitionId"]["function"]["parameters"]["resource_name_1"]
    assert rbac["variables"][role]["value"] == STORAGE_BLOB_DATA_OWNER
    template = json.loads((REPO / "local.settings.json.template").read_text(encoding="utf-8"))
    assert template["Values"]["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"
    # The watchdog's age, the same default in Azure, locally and in the code.
    assert template["Values"][WATCHDOG_MIN_AGE_SETTING] == str(WatchdogSettings().min_age_s)
    function = doc("function")
    assert function["parameters"]["outboxWatchdogMinAgeSeconds"]["default"] == 300
    setting = values[WATCHDOG_MIN_AGE_SETTING]
    assert "outboxWatchdogMinAgeSeconds" in json.dumps(setting)


def test_the_relay_s_edge_alerts_are_deployed_on_the_consumer_s_action_group() -> None:
    """Five alerts that no publish would raise (223dafd had none: a relay that never ran was
    silent): a stuck outbox event, a silent watchdog, a watchdog falling behind a growing
    backlog (issue 25), failed sends for 15 minutes, a relay that cannot start. In their own
    file, deployed by alerts.bicep on its action group."""
    relay_alerts = doc("relay-alerts")["resources"]
    rules = {
        name: body(resource)["properties"]
        for name, resource in relay_alerts.items()
        if resource["type"] == "Microsoft.Insights/scheduledQueryRules"
    }
    assert set(rules) == {
        "relayStuckAlert",
        "relayWatchdogSilentAlert",
        "relayWatchdogBehindAlert",
        "relayFailedSendsAlert",
        "relayConfigurationAlert",
    }
    for properties in rules.values():
        assert properties["actions"]["actionGroups"] == ["actionGroupId"]
        assert properties["enabled"] is True
    stuck = rules["relayStuckAlert"]["criteria"]["allOf"][0]
    assert stuck["metricMeasureColumn"] == "OldestStuckS"
    assert stuck["threshold"] == "relayStuckThresholdSeconds"
    # Above the watchdog's own age plus its schedule: it fires only if the watchdog failed too.
    threshold = doc("relay-alerts")["parameters"]["relayStuckThresholdSeconds"]
    assert threshold["default"] >= WatchdogSettings().min_age_s + 300
    silent = rules["relayWatchdogSilentAlert"]
    assert silent["windowSize"] == "PT15M"  # three runs are due in it
    assert silent["criteria"]["allOf"][0]["operator"] == "LessThan"
    behind = rules["relayWatchdogBehindAlert"]
    assert behind["windowSize"] == "PT15M"  # three runs, each at its page limit
    criterion = behind["criteria"]["allOf"][0]
    assert (criterion["metricMeasureColumn"], criterion["operator"]) == ("GrowthS", "GreaterThan")
    assert criterion["threshold"] == 0
    failed = rules["relayFailedSendsAlert"]["criteria"]["allOf"][0]
    assert (failed["metricMeasureColumn"], failed["threshold"]) == ("FailingPeriods", 3)
    module = body(doc("alerts")["modules"]["relayAlerts"])
    assert doc("alerts")["modules"]["relayAlerts"]["detail"]["path"] == "relay-alerts.bicep"
    assert accessor(module["params"]["actionGroupId"]) == ("actionGroup", "id")
