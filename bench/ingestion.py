"""Target 7: what the app's telemetry sends to Log Analytics per order, from the real exporter.

``bench.ingestion_scenario`` runs in a fresh interpreter with the project's own
``configure_exporters`` pointed at the local ingestion endpoint (``local.standins.ingestion``):
``orders`` new orders and one invalid message through the host and the worker, then the relay. It
runs twice, every trace sampled and none (``OTEL_TRACES_SAMPLER=microsoft.fixed_percentage``, 1.0
and 0.0), and the envelopes are counted and weighed (compact JSON bytes; Log Analytics bills the
stored record, ``_BilledSize``, so bytes are an approximation [A]) by table:

- sampled: what one order whose trace the sampler keeps costs (its request, its dependencies,
  its INFO logs, the relay's publish span and log);
- unsampled: what every other order costs. Target: no row of ``requests``, ``dependencies`` or
  ``traces`` per healthy order (metrics count them, in rows per export interval and time series
  that do not grow with orders), while the invalid message's warning still arrives.

docs/capacity.md turns these into bytes per order per tier (with the sampler's rate and the
instance counts). What is not the app's is not measured here: the Functions host's own telemetry
and the Azure resources' diagnostic logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from local.standins.ingestion import ingestion_endpoint

REPO = Path(__file__).resolve().parent.parent
TABLES = {
    "RequestData": "requests",
    "RemoteDependencyData": "dependencies",
    "MessageData": "traces",
    "ExceptionData": "exceptions",
    "MetricData": "customMetrics",
}
PER_ORDER_TABLES = ("requests", "dependencies", "traces", "exceptions")


def capture(orders: int, sampling: float) -> dict[str, Any]:
    """Rows and bytes by table (and traces by logger and severity) of one scenario run."""
    with ingestion_endpoint() as ingestion, tempfile.TemporaryDirectory() as tmp:
        summary_file = Path(tmp) / "summary.json"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("APPLICATIONINSIGHTS_", "OTEL_", "PYTEST_"))
        }
        env |= {
            "APPLICATIONINSIGHTS_CONNECTION_STRING": ingestion.connection_string,
            "OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage",
            "OTEL_TRACES_SAMPLER_ARG": str(sampling),
            # The SDK's own usage telemetry goes to a Microsoft endpoint: not the app's.
            "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
            "TMPDIR": tmp,
        }
        result = subprocess.run(
            [sys.executable, "-m", "bench.ingestion_scenario", str(orders), str(summary_file)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise RuntimeError(result.stdout[-2000:] + result.stderr[-4000:])
        summary: dict[str, Any] = json.loads(summary_file.read_text(encoding="utf-8"))
    rows: Counter[str] = Counter()
    size: Counter[str] = Counter()
    traces: Counter[str] = Counter()
    metric_totals: dict[str, float] = {}  # valueSum by metric name
    keys = {str(envelope.get("iKey")) for envelope in ingestion.envelopes}
    for envelope, nbytes in zip(ingestion.envelopes, ingestion.sizes, strict=True):
        data = envelope.get("data", {})
        table = TABLES.get(str(data.get("baseType")), str(data.get("baseType")))
        rows[table] += 1
        size[table] += nbytes
        base = data.get("baseData", {})
        if table == "traces":
            logger = base.get("properties", {}).get("logger_name", "?")
            traces[f"{logger} severity {base.get('severityLevel')}"] += 1
        if table == "customMetrics":
            for point in base.get("metrics", []):
                name = str(point["name"])
                metric_totals[name] = metric_totals.get(name, 0.0) + float(point["value"])
    return {
        "sampling": sampling,
        "summary": summary,
        "rows": dict(sorted(rows.items())),
        "bytes": dict(sorted(size.items())),
        "traces_by_logger": dict(sorted(traces.items())),
        "metric_totals": dict(sorted(metric_totals.items())),
        "instrumentation_key": keys.pop() if len(keys) == 1 else sorted(keys),
    }


def measure(orders: int = 200) -> dict[str, Any]:
    sampled = capture(orders, 1.0)
    unsampled = capture(orders, 0.0)
    healthy = orders  # the invalid message is the one unhealthy delivery
    per_order = {
        table: {
            "rows": sampled["rows"].get(table, 0) / healthy,
            "bytes": sampled["bytes"].get(table, 0) / healthy,
        }
        for table in PER_ORDER_TABLES
    }
    # Unsampled, each healthy order may add nothing but its share of the metrics; the one
    # invalid message's warning (and only it) arrives in traces.
    unsampled_rows = {table: unsampled["rows"].get(table, 0) for table in PER_ORDER_TABLES}
    warning_rows = unsampled["rows"].get("traces", 0)
    ok = (
        unsampled_rows["requests"] == unsampled_rows["dependencies"] == 0
        and warning_rows == 1
        and unsampled["summary"]["dead_letters"] == 1
        and unsampled["summary"]["published"] == orders
    )
    return {
        "orders": orders,
        "sampled": sampled,
        "unsampled": unsampled,
        "sampled_order": per_order,
        "sampled_order_bytes": sum(t["bytes"] for t in per_order.values()),
        "unsampled_rows_per_healthy_order": (
            unsampled_rows["requests"] + unsampled_rows["dependencies"] + warning_rows - 1
        )
        / healthy,
        "metric_rows": unsampled["rows"].get("customMetrics", 0),
        "metric_bytes": unsampled["bytes"].get("customMetrics", 0),
        "ok": ok,
    }
