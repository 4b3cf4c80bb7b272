"""Every alert and workbook panel leads the person on call to its runbook in docs/operations.md:
each alert rule's description links an existing heading, and each workbook panel is in the
panel table with its query and runbook links that resolve."""

from __future__ import annotations

import re
from pathlib import Path

from tests.infra.infra_support import parse_bicep
from tests.telemetry.kql_names import ALERT_FILES, workbook

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def anchors() -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", OPERATIONS.read_text(encoding="utf-8"), re.M):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        found.add(text.replace(" ", "-"))
    return found


def test_every_alert_links_an_existing_runbook_section() -> None:
    alerts = {
        name: resource
        for path in ALERT_FILES
        for name, resource in parse_bicep(path)["resources"].items()
        if resource["type"]
        in {"Microsoft.Insights/metricAlerts", "Microsoft.Insights/scheduledQueryRules"}
    }
    assert len(alerts) >= 12  # the relay's edges included (relay-alerts.bicep)
    missing = []
    for name, resource in alerts.items():
        description = resource["config"]["properties"]["description"]
        match = re.search(r"docs/operations\.md#([\w-]+)", description)
        if match is None or match.group(1) not in anchors():
            missing.append(f"{name}: {description!r}")
    assert not missing, "\n".join(missing)


def test_every_workbook_panel_has_a_row_with_resolving_runbook_links() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    table = text[text.index("| panel | query | runbook |") :].split("\n\n", 1)[0]
    rows = {row.split("|")[1].strip(): row for row in table.splitlines()[2:] if row.startswith("|")}
    panels = [
        item["content"]["title"]
        for item in workbook()["items"]
        if item.get("type") == 3 and "query" in item.get("content", {})
    ]
    assert len(rows) == len(panels) >= 9
    for row in rows.values():
        links = re.findall(r"\]\(#([\w-]+)\)", row)
        assert links, row
        assert set(links) <= anchors(), row
