"""The alert before a logical partition fills (issue 32, part 4): Cosmos DB's PartitionKeyStatistics
log in the workspace, a scheduled query rule on the largest key of each container against a
threshold of the 20 GB a logical partition holds (Learn: Azure Cosmos DB service quotas), and
its runbook entry.

The rule's KQL is run here on rows shaped as the table CDBPartitionKeyStatistics is documented
(Learn: Azure Monitor Logs reference, CDBPartitionKeyStatistics: columns and types), by a small
evaluator of the operators it uses and no others, so that the threshold is held in the unit the
rule compares (GB from SizeKb) and the key values stay out of what the alert carries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.infra.infra_support import REPO, accessor, body, decorator_argument, doc, int_literal

RULE_TYPE = "Microsoft.Insights/scheduledQueryRules"
TABLE = "CDBPartitionKeyStatistics"
# The table's columns (Learn: Azure Monitor Logs reference, CDBPartitionKeyStatistics).
COLUMNS = {
    "AccountName",
    "_BilledSize",
    "CollectionName",
    "DatabaseName",
    "_IsBillable",
    "PartitionKey",
    "RegionName",
    "_ResourceId",
    "SizeKb",
    "SourceSystem",
    "_SubscriptionId",
    "TenantId",
    "TimeGenerated",
    "Type",
}
KB_PER_GB = 1024 * 1024
RUNBOOK_ANCHOR = "a-logical-partition-is-filling-partitionfull"
OPERATIONS = REPO / "docs" / "operations.md"


def _top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for index, character in enumerate(text):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


_AGGREGATES: dict[str, Callable[[re.Match[str], list[dict[str, Any]]], Any]] = {
    r"max\((\w+)\)": lambda m, rows: max(row[m.group(1)] for row in rows),
    r"count\(\)": lambda m, rows: len(rows),
    r"round\(max\((\w+)\) / ([\d.]+), (\d+)\)": lambda m, rows: round(
        max(row[m.group(1)] for row in rows) / float(m.group(2)), int(m.group(3))
    ),
}


def run_kql(query: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The alert's query over ``rows`` of its table: ``summarize <aggregates> by <columns>``
    stages with max(), count() and round(max(x) / k, n), as KQL defines them
    (learn.microsoft.com/kusto/query/summarize-operator: one output row per group, the group's
    columns then the aggregates); any other operator or aggregate fails."""
    table, *stages = [part.strip() for part in query.split("|")]
    assert table == TABLE, table
    for stage in stages:
        match = re.fullmatch(r"summarize (.+) by (\w+(?:, \w+)*)", stage)
        assert match, f"not an operator this evaluator knows: {stage!r}"
        keys = [key.strip() for key in match.group(2).split(",")]
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(row[key] for key in keys), []).append(row)
        output = []
        for group, members in groups.items():
            result = dict(zip(keys, group, strict=True))
            for aggregate in _top_level(match.group(1)):
                name, _, expression = (part.strip() for part in aggregate.partition("="))
                evaluated = [
                    evaluate(found, members)
                    for pattern, evaluate in _AGGREGATES.items()
                    if (found := re.fullmatch(pattern, expression))
                ]
                assert len(evaluated) == 1, f"not an aggregate this evaluator knows: {expression!r}"
                result[name] = evaluated[0]
            output.append(result)
        rows = output
    return rows


def _rule() -> dict[str, Any]:
    cosmos_alerts = doc("cosmos-alerts")
    rules = {n: r for n, r in cosmos_alerts["resources"].items() if r["type"] == RULE_TYPE}
    assert list(rules) == ["partitionKeySizeAlert"]
    return body(rules["partitionKeySizeAlert"])


def _query() -> str:
    (criterion,) = _rule()["properties"]["criteria"]["allOf"]
    query = doc("cosmos-alerts")["variables"][criterion["query"]]["value"]
    assert isinstance(query, str)
    return query


def _fires(rows: list[dict[str, Any]], threshold_gb: int) -> dict[str, float]:
    """The containers the rule fires for: its measure per dimension value, compared as the
    criterion says (Maximum of the measure column, GreaterThan the threshold)."""
    (criterion,) = _rule()["properties"]["criteria"]["allOf"]
    assert (criterion["timeAggregation"], criterion["operator"]) == ("Maximum", "GreaterThan")
    column = criterion["metricMeasureColumn"]
    (dimension,) = criterion["dimensions"]
    return {
        row[dimension["name"]]: row[column]
        for row in run_kql(_query(), rows)
        if row[column] > threshold_gb
    }


def _row(collection: str, key: str, size_kb: int) -> dict[str, Any]:
    return {
        "AccountName": "cosmos-x",
        "DatabaseName": "orders",
        "CollectionName": collection,
        "PartitionKey": f'["{key}"]',
        "RegionName": "Sweden Central",
        "SizeKb": size_kb,
    }


def test_a_logical_partition_past_the_threshold_alerts_per_container() -> None:
    """A key reported above 15 GB fires for its container, whatever the other keys; a key at
    exactly 15 GB does not; a key reported twice counts once, at its largest report. Fails on
    the Bicep before issue 32 (no such rule)."""
    threshold = doc("cosmos-alerts")["parameters"]["partitionKeySizeThresholdGb"]["default"]
    assert threshold == 15
    rows = [
        _row("inventory", "sku-hot", 15 * KB_PER_GB + 20 * 1024),  # 15.02 GB
        _row("inventory", "sku-hot", 14 * KB_PER_GB),  # an earlier report of the same key
        _row("inventory", "sku-other", 2 * KB_PER_GB),
        _row("payments", "order-1", 15 * KB_PER_GB),  # exactly at the threshold
        _row("orders", "order-2", 1 * KB_PER_GB),
    ]
    assert _fires(rows, threshold) == {"inventory": 15.02}
    assert _fires(rows[3:], threshold) == {}
    results = run_kql(_query(), rows)
    # The key values (a SKU, an order id: values from messages) never reach the alert.
    assert all("PartitionKey" not in row for row in results)
    assert {row["CollectionName"]: row["KeysReported"] for row in results} == {
        "inventory": 2,
        "payments": 1,
        "orders": 1,
    }


def test_the_rule_reads_the_documented_table_in_the_workspace() -> None:
    """Its query reads only columns CDBPartitionKeyStatistics has; it runs in the Log Analytics
    workspace the Cosmos DB diagnostic setting writes that table to (PartitionKeyStatistics,
    always on, resource-specific), wired from main.bicep."""
    query = _query()
    read: set[str] = set()
    for stage in query.split("|")[1:]:
        read |= set(re.findall(r"max\((\w+)\)", stage))
        if " by " in stage:
            read |= {column.strip() for column in stage.split(" by ")[1].split(",")}
    assert read <= COLUMNS, read - COLUMNS
    assert {"SizeKb", "CollectionName", "PartitionKey"} <= read
    assert _rule()["properties"]["scopes"] == ["logAnalyticsWorkspaceId"]
    diagnostics = doc("diagnostics")
    always = diagnostics["variables"]["cosmosAlwaysLogs"]["value"]
    assert "PartitionKeyStatistics" in always
    cosmos_setting = body(diagnostics["resources"]["cosmosDiagnostics"])["properties"]
    assert cosmos_setting["logAnalyticsDestinationType"] == "Dedicated"  # the CDB* tables
    assert cosmos_setting["workspaceId"] == "logAnalyticsWorkspaceId"
    module = body(doc("alerts")["modules"]["cosmosAlerts"])
    assert module["params"]["logAnalyticsWorkspaceId"] == "logAnalyticsWorkspaceId"
    assert accessor(module["params"]["actionGroupId"]) == ("actionGroup", "id")
    params = body(doc("main")["modules"]["alerts"])["params"]
    assert accessor(params["logAnalyticsWorkspaceId"]) == (
        "monitoring",
        "outputs",
        "logAnalyticsId",
    )
    diagnostics_params = body(doc("main")["modules"]["diagnostics"])["params"]
    assert accessor(diagnostics_params["logAnalyticsWorkspaceId"]) == accessor(
        params["logAnalyticsWorkspaceId"]
    )


def test_the_rule_warns_at_severity_2_before_anything_fails() -> None:
    """Severity 2 (the full partition itself pages at severity 1 through the systemic-errors
    alert), hourly over a day, stateful, the threshold a parameter below the 20 GB limit, and
    the description pointing at the runbook entry."""
    properties = _rule()["properties"]
    assert properties["severity"] == 2
    assert (properties["evaluationFrequency"], properties["windowSize"]) == ("PT1H", "P1D")
    assert properties["autoMitigate"] is True
    assert properties["actions"] == {"actionGroups": ["actionGroupId"]}
    (criterion,) = properties["criteria"]["allOf"]
    assert criterion["threshold"] == "partitionKeySizeThresholdGb"
    assert criterion["dimensions"] == [
        {"name": "CollectionName", "operator": "Include", "values": ["*"]}
    ]
    parameter = doc("cosmos-alerts")["parameters"]["partitionKeySizeThresholdGb"]
    assert int_literal(decorator_argument(parameter, "min_value")) == 1
    assert int_literal(decorator_argument(parameter, "max_value")) == 19  # below the 20 GB
    assert f"docs/operations.md#{RUNBOOK_ANCHOR}" in properties["description"]


def test_the_runbook_finds_the_key_with_the_same_table_and_says_what_to_do() -> None:
    """docs/operations.md: the alerts table lists the rule; the runbook entry names the 20 GB
    limit, 403 with sub-status 1014, that the writes are held as systemic and never
    dead-lettered by the consumer, the query that lists the keys (documented columns only),
    time to live for the inventory container, and the hot-SKU paragraph (10,000 RU/s)."""
    text = OPERATIONS.read_text(encoding="utf-8")
    headings = {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.M)
    }
    assert RUNBOOK_ANCHOR in headings
    section = text[text.index("### A logical partition is filling (PartitionFull)") :]
    section = section.split("\n## ", 1)[0]
    for needed in (
        "20 GB",
        "sub-status 1014",
        "never dead-lettered by the consumer",
        "PartitionFull",
        "defaultTtl",
        "--ttl -1",
        "10,000 RU/s",
        "write sharding",
        "does not build it",
        "concepts-limits",
        "troubleshoot-forbidden",
    ):
        assert needed in section, needed
    (kusto,) = re.findall(r"```kusto\n(.*?)```", section, re.S)
    lines = [line.strip() for line in kusto.strip().splitlines()]
    assert lines[0] == TABLE
    identifiers = set(re.findall(r"\b([A-Z_]\w*)\b", kusto)) - {TABLE, "SizeGb"}
    assert identifiers <= COLUMNS, identifiers - COLUMNS
    alerts_table = text[text.index("| alert | source | condition | severity |") :].split("\n\n")[0]
    (row,) = [line for line in alerts_table.splitlines() if TABLE in line]
    assert f"(#{RUNBOOK_ANCHOR})" in row and row.rstrip().endswith("| 2 |")
