"""Offline checks (pycep) of what the orders API's request completer needs from the infra: the
indexing policy of the requests container serves its query (infra/requests-indexing.json), and
its two alerts (an accepted request still unsent, a completer gone silent) are deployed on the
action group, read the names the completer exports and lead to their runbook. Each fails on
39e4dd4, which had no completer: nothing indexed, no such alert."""

from __future__ import annotations

import json
import re
from typing import Any

from shared.adapters.cosmos_requests import UNSENT_QUERY
from shared.edge.completer import MIN_AGE
from shared.telemetry.names import METRIC_COMPLETER_UNSENT_AGE
from shared.triggers import COMPLETER_PERIOD_S
from tests.infra.infra_support import INFRA, REPO, accessor, body, doc

RULE = "Microsoft.Insights/scheduledQueryRules"


def requests_indexing_policy() -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(
        (INFRA / "requests-indexing.json").read_text(encoding="utf-8")
    )
    return policy


def test_every_field_the_completer_s_query_filters_or_orders_on_is_indexed() -> None:
    """The completer's query (``UNSENT_QUERY``) loads only what it returns when the index serves
    its whole filter and its order: each field it filters on in the range index, and one
    composite index of its ORDER BY fields in their order and direction, the equalities first
    and the range filter last (learn.microsoft.com/azure/cosmos-db/index-policy, "Queries with
    a filter and ORDER BY"); without it Cosmos DB refuses the ORDER BY of several fields (so
    does the local server: tests/edge/test_completer.py). Nothing else is indexed: every path
    costs RU on each of the edge's writes."""
    where, _, order_by = UNSENT_QUERY.partition(" WHERE ")[2].partition(" ORDER BY ")
    filtered = re.findall(r"c\.(\w+) (=|<=) @", where)
    ordered = re.findall(r"c\.(\w+)", order_by)
    policy = requests_indexing_policy()

    included = {p["path"] for p in policy["includedPaths"]}
    assert included == {f"/{name}/?" for name, _ in filtered}
    assert policy["excludedPaths"] == [{"path": "/*"}]
    equalities = [name for name, operator in filtered if operator == "="]
    ranges = [name for name, operator in filtered if operator != "="]
    assert ordered == [*equalities, *ranges] and len(ranges) == 1  # one range filter, last
    [composite] = policy["compositeIndexes"]
    assert [(p["path"], p["order"]) for p in composite] == [
        (f"/{name}", "ascending") for name in ordered
    ]
    assert "DESC" not in order_by.upper()


def _rules() -> dict[str, dict[str, Any]]:
    return {
        name: body(resource)["properties"]
        for name, resource in doc("completer-alerts")["resources"].items()
        if resource["type"] == RULE
    }


def test_the_completer_s_alerts_are_deployed_on_the_action_group() -> None:
    """An accepted request unsent past the threshold (severity 1: an intent the consumer never
    hears of) and a completer that stopped reporting (severity 2). In their own file, deployed
    by alerts.bicep on its action group."""
    rules = _rules()
    assert set(rules) == {"completerUnsentAlert", "completerSilentAlert"}
    for properties in rules.values():
        assert properties["actions"] == {"actionGroups": ["actionGroupId"]}
        assert properties["enabled"] is True
    assert rules["completerUnsentAlert"]["severity"] == 1
    assert rules["completerSilentAlert"]["severity"] == 2
    modules = doc("alerts")["modules"]
    assert modules["completerAlerts"]["detail"]["path"] == "completer-alerts.bicep"
    params = body(modules["completerAlerts"])["params"]
    assert accessor(params["actionGroupId"]) == ("actionGroup", "id")
    assert params["applicationInsightsName"] == "applicationInsightsName"


def test_the_unsent_alert_reads_the_oldest_unsent_age_above_what_the_completer_sends() -> None:
    """It reads the histogram the completer records every run (``orders.edge.completer
    .unsent_age``, its max) and fires above a threshold that a record the completer sends never
    reaches: its minimum age plus two runs. The silent alert reads the same histogram's run
    count over fifteen runs."""
    variables = doc("completer-alerts")["variables"]
    rules = _rules()
    unsent = rules["completerUnsentAlert"]["criteria"]["allOf"][0]
    query = variables[unsent["query"]]["value"]
    assert f'name == "{METRIC_COMPLETER_UNSENT_AGE}"' in query
    assert "OldestUnsentS = max(valueMax)" in query
    assert (unsent["metricMeasureColumn"], unsent["operator"]) == ("OldestUnsentS", "GreaterThan")
    assert unsent["threshold"] == "completerUnsentThresholdSeconds"
    threshold = doc("completer-alerts")["parameters"]["completerUnsentThresholdSeconds"]
    floor = MIN_AGE.total_seconds() + 2 * COMPLETER_PERIOD_S
    assert threshold["default"] >= floor
    silent = rules["completerSilentAlert"]
    criterion = silent["criteria"]["allOf"][0]
    assert f'name == "{METRIC_COMPLETER_UNSENT_AGE}"' in variables[criterion["query"]]["value"]
    assert (criterion["metricMeasureColumn"], criterion["operator"]) == ("Runs", "LessThan")
    assert silent["windowSize"] == "PT15M"  # fifteen runs are due in it


def test_each_completer_alert_links_its_runbook() -> None:
    operations = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", operations, re.M)
    }
    for name, properties in _rules().items():
        match = re.search(r"docs/operations\.md#([\w-]+)", str(properties["description"]))
        assert match is not None and match.group(1) in anchors, name
