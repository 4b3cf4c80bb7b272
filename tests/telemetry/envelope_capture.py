"""Capture what the real Azure Monitor exporter posts: the local ingestion endpoint
(``local.standins.ingestion``) on 127.0.0.1, and a fresh interpreter running
``envelope_scenario.py`` with the project's own ``configure_exporters`` pointed at it. Used by
``test_envelopes.py`` and ``workbook_picture.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local.standins.ingestion import ingestion_endpoint
from tests.telemetry.envelope_scenario import (
    CAPTURE_CONNECTION_SETTING,
    CAPTURE_SUMMARY_SETTING,
)

REPO = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).with_name("envelope_scenario.py")

# The consumer spans: the orders queue's, and the order-events topic's (one per subscription
# consumer, told apart by orders.consumer).
CONSUMER_SPANS = frozenset({"process orders", "process order-events"})
# Table -> the envelope's data.baseType.
BASE_TYPES = {
    "requests": "RequestData",
    "traces": "MessageData",
    "customMetrics": "MetricData",
    "dependencies": "RemoteDependencyData",
    "exceptions": "ExceptionData",
}


@dataclass
class Capture:
    envelopes: list[dict[str, Any]]
    summary: dict[str, Any]

    def of(self, table: str) -> list[dict[str, Any]]:
        return [
            envelope["data"]["baseData"]
            for envelope in self.envelopes
            if envelope.get("data", {}).get("baseType") == BASE_TYPES[table]
        ]

    def requests(self) -> list[dict[str, Any]]:
        """The orders queue's consumer spans."""
        return [row for row in self.of("requests") if row["name"] == "process orders"]

    def consumer_requests(self) -> list[dict[str, Any]]:
        """Every consumer's spans: the queue's and the order-events subscriptions'."""
        return [row for row in self.of("requests") if row["name"] in CONSUMER_SPANS]

    def item_counts(self) -> list[float]:
        return [
            100.0 / float(envelope.get("sampleRate", 100.0))
            for envelope in self.envelopes
            if envelope.get("data", {}).get("baseType") == "RequestData"
        ]

    def metric_rows(self, name: str) -> list[tuple[dict[str, str], float, int]]:
        """(customDimensions, valueSum, valueCount) of each customMetrics row of ``name``."""
        rows = []
        for data in self.of("customMetrics"):
            for point in data["metrics"]:
                if point["name"] == name:
                    rows.append((data.get("properties", {}), point["value"], point["count"]))
        return rows

    def names(self, table: str) -> set[str]:
        if table == "customMetrics":
            return {point["name"] for data in self.of(table) for point in data["metrics"]}
        return {str(data.get("name") or data.get("message")) for data in self.of(table)}

    def dimensions(self, table: str, names: set[str]) -> set[str]:
        keys: set[str] = set()
        for data in self.of(table):
            if table == "customMetrics":
                row_names = {point["name"] for point in data["metrics"]}
            else:
                row_names = {str(data.get("name"))}
            if not names or row_names & names:
                keys.update(data.get("properties", {}))
        return keys


def capture_envelopes(tmp: Path) -> Capture:
    """Run the scenario in a fresh interpreter and return what its exporter posted."""
    with ingestion_endpoint() as ingestion:
        summary_file = tmp / "summary.json"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("APPLICATIONINSIGHTS_", "OTEL_", "PYTEST_"))
        }
        env |= {
            CAPTURE_CONNECTION_SETTING: ingestion.connection_string,
            CAPTURE_SUMMARY_SETTING: str(summary_file),
            # Every span, so that counts can be compared; the queries must not assume it.
            "OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage",
            "OTEL_TRACES_SAMPLER_ARG": "1.0",
            # The SDK's own usage telemetry goes to a Microsoft endpoint: not ours to capture.
            "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
            "TMPDIR": str(tmp),
        }
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SCENARIO)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        assert "1 passed" in result.stdout, result.stdout[-2000:]
    return Capture(ingestion.envelopes, json.loads(summary_file.read_text(encoding="utf-8")))
