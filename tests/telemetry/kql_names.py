"""What the KQL in ``infra/`` reads: every query of ``monitoring/queries.kql``, of the log alert
rules in ``app/alerts.bicep`` (their query variables, Bicep interpolation rendered with the
deployed values) and of the workbook (``monitoring/workbook.json``), split into segments (one
table and the pipeline that follows it), each with the ``customDimensions`` keys and the
``name == "..."`` values it reads and the aggregations it applies.

A small tokenizer, not a KQL implementation: it skips comments and string literals, and knows
the three forms ``customDimensions["x"]`` / ``customDimensions['x']`` / ``customDimensions.x``
and ``name == "x"`` (also ``name in ("x", "y")``). A segment starts at each table name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tests.infra.infra_support import INFRA, messaging, parse_bicep

TABLES = frozenset(
    {"requests", "traces", "customMetrics", "dependencies", "exceptions", "customEvents"}
)
QUERIES_FILE = INFRA / "monitoring" / "queries.kql"
WORKBOOK_FILE = INFRA / "monitoring" / "workbook.json"
ALERTS_FILE = INFRA / "app" / "alerts.bicep"
RELAY_ALERTS_FILE = INFRA / "app" / "relay-alerts.bicep"
# The Cosmos DB account's limits: platform logs (CDB* tables), no segment of the tables above, but
# its runbook link is held like the others' (test_runbook.py).
COSMOS_ALERTS_FILE = INFRA / "app" / "cosmos-alerts.bicep"
# The orders API's request completer (its metrics come from a quiet run in the scenario).
COMPLETER_ALERTS_FILE = INFRA / "app" / "completer-alerts.bicep"
ORDERS_API_ALERTS_FILE = INFRA / "app" / "orders-api-alerts.bicep"
ALERT_FILES = (
    ALERTS_FILE,
    RELAY_ALERTS_FILE,
    COSMOS_ALERTS_FILE,
    COMPLETER_ALERTS_FILE,
    ORDERS_API_ALERTS_FILE,
)

_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*)
  | (?P<dimension>customDimensions\s*(?:
        \[\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)')\s*\]
      | \.\s*(?P<dotted>[A-Za-z_]\w*)))
  | (?P<name_eq>(?<![\w.])name\s*==\s*"(?P<name_value>(?:[^"\\]|\\.)*)")
  | (?P<name_in>(?<![\w.])name\s+in\s*\((?P<name_values>[^)]*)\))
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<aggregate>\b(?P<function>sum|sumif|avg|count|countif|percentile|percentiles|
        percentilew|percentilesw|dcount)\s*\(\s*(?P<argument>\w*))
  | (?P<identifier>(?<![\w.])[A-Za-z_]\w*)
    """,
    re.VERBOSE,
)
_STRING_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class Segment:
    """One table and the pipeline after it, up to the next table name."""

    source: str  # where the query lives, e.g. "queries.kql Q3"
    table: str
    text: str = ""
    dimensions: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    aggregates: set[tuple[str, str]] = field(default_factory=set)  # (function, first argument)
    # Only the first ``summarize`` of a segment aggregates the table's rows; a later one
    # aggregates what the first produced (its columns), so its calls are not the table's.
    summarizes: int = 0


def segments(source: str, query: str) -> list[Segment]:
    found: list[Segment] = []
    current: Segment | None = None
    start = 0
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup
        if kind == "identifier" and match.group("identifier") in TABLES:
            if current is not None:
                current.text = query[start : match.start()]
            current = Segment(source, match.group("identifier"))
            start = match.start()
            found.append(current)
            continue
        if (
            current is not None
            and kind == "identifier"
            and match.group("identifier") == "summarize"
        ):
            current.summarizes += 1
            continue
        if current is None or kind in (None, "comment", "string", "identifier"):
            continue
        if match.group("dimension"):
            key = match.group("dq") or match.group("sq") or match.group("dotted")
            current.dimensions.add(key)
        elif match.group("name_eq"):
            current.names.add(match.group("name_value"))
        elif match.group("name_in"):
            current.names.update(_STRING_ITEM.findall(match.group("name_values")))
        elif match.group("aggregate") and current.summarizes <= 1:
            current.aggregates.add((match.group("function"), match.group("argument")))
    if current is not None:
        current.text = query[start:]
    return found


def kql_queries() -> dict[str, str]:
    """queries.kql split at its ``// ---- Qn.`` headers."""
    text = QUERIES_FILE.read_text(encoding="utf-8")
    parts = re.split(r"^// ---- (Q\w+)\.", text, flags=re.MULTILINE)
    return {
        f"queries.kql {label}": body for label, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def _render_bicep(template: str, values: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in values, f"no deployed value for ${{{name}}} in {template!r}"
        return str(values[name])

    return re.sub(r"\$\{(\w+)\}", value, template)


def alert_queries() -> dict[str, str]:
    """The log alert rules' queries (alerts.bicep and relay-alerts.bicep), with parameters at
    their defaults and the queue name the deployment passes (messaging.json)."""
    queries = {}
    for path in ALERT_FILES:
        document = parse_bicep(path)
        values: dict[str, Any] = {
            name: param["default"]
            for name, param in document["parameters"].items()
            if isinstance(param.get("default"), int | str)
        }
        values["queueName"] = messaging()["queueName"]
        variables = {name: var["value"] for name, var in document["variables"].items()}
        for name, resource in document["resources"].items():
            if resource["type"] != "Microsoft.Insights/scheduledQueryRules":
                continue
            config = resource["config"]
            body = config["config"] if "condition" in config else config
            for criterion in body["properties"]["criteria"]["allOf"]:
                query = criterion["query"]
                template = variables.get(query, query)
                # Sources keep the "alerts.bicep" prefix: the file's family.
                queries[f"alerts.bicep {name}"] = _render_bicep(template, values)
    return queries


@cache
def workbook() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(WORKBOOK_FILE.read_text(encoding="utf-8"))
    return data


def _workbook_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    flat = []
    for item in items:
        flat.append(item)
        flat.extend(_workbook_items(item.get("content", {}).get("items", [])))
    return flat


def workbook_queries() -> dict[str, str]:
    return {
        f"workbook.json {item.get('name', index)}": item["content"]["query"]
        for index, item in enumerate(_workbook_items(workbook()["items"]))
        if item.get("type") == 3
    }


def all_queries() -> dict[str, str]:
    queries = {**kql_queries(), **alert_queries()}
    if WORKBOOK_FILE.exists():
        queries.update(workbook_queries())
    return queries


def all_segments() -> list[Segment]:
    return [
        segment for source, query in all_queries().items() for segment in segments(source, query)
    ]
