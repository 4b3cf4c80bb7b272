"""Render the workbook's panels from LOCAL data, for docs/operations.md: the envelopes the real
exporter posted in one run of ``envelope_scenario.py`` (one scripted delivery of each outcome, and
one relay run with a refused send and a parked event), computed the way the workbook's queries
compute them (counters: sum valueSum; the lag histogram: sum valueSum / sum valueCount and max
valueMax; durations: spans), and the orders API's requests and replay ages (one replay per
route in the scenario: its age is the histogram's sum).

    .venv/bin/python -m tests.telemetry.workbook_picture docs/operations-workbook-local.png
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tests.telemetry.envelope_capture import Capture, capture_envelopes

LABEL = (
    "LOCAL DATA, not production: one scripted delivery of each outcome and one relay run "
    "on this machine"
)
RELAY_COUNTERS = ("orders.relay.published", "orders.relay.failed", "orders.relay.parked")


def _seconds(duration: str) -> float:
    days, _, clock = duration.partition(".")
    hours, minutes, seconds = clock.split(":")
    return ((int(days) * 24 + int(hours)) * 60 + int(minutes)) * 60 + float(seconds)


def render(capture: Capture, path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for properties, value, _ in capture.metric_rows("orders.messages"):
        outcomes[properties["outcome"]] += int(value)
    retries: Counter[str] = Counter()
    for properties, value, _ in capture.metric_rows("orders.retries"):
        retries[properties["outcome"]] += int(value)
    reasons = Counter(
        trace["properties"]["deadletter_reason"]
        for trace in capture.of("traces")
        if trace.get("properties", {}).get("settlement") == "deadletter"
    )
    durations: dict[str, list[float]] = {}
    for row in capture.requests():
        outcome = row["properties"]["orders.outcome"]
        durations.setdefault(outcome, []).append(1000 * _seconds(row["duration"]))
    ru = sum(value for _, value, _ in capture.metric_rows("orders.cosmos.request_charge"))
    relay = Counter(
        {
            name.rsplit(".", 1)[1]: int(sum(value for _, value, _ in capture.metric_rows(name)))
            for name in RELAY_COUNTERS
        }
    )
    lag_rows = capture.metric_rows("orders.relay.lag")
    lag_mean = sum(value for _, value, _ in lag_rows) / max(sum(c for _, _, c in lag_rows), 1)
    lag_max = max(
        (
            float(point.get("max", 0.0))
            for data in capture.of("customMetrics")
            for point in data["metrics"]
            if point["name"] == "orders.relay.lag"
        ),
        default=0.0,
    )

    edge: Counter[str] = Counter()
    for properties, value, _ in capture.metric_rows("orders.edge.requests"):
        edge[f"{properties['orders.edge.route']} {properties['orders.edge.outcome']}"] += int(value)
    replay_ages: dict[str, float] = {}
    for properties, value, _ in capture.metric_rows("orders.edge.replay_age"):
        route = properties["orders.edge.route"]
        replay_ages[route] = replay_ages.get(route, 0.0) + value

    figure, axes = plt.subplots(4, 2, figsize=(11, 13))
    panels = [
        (axes[0][0], "Outcomes (orders.messages, sum valueSum)", outcomes),
        (axes[0][1], "Dead-letters by reason (traces)", reasons),
        (axes[1][0], "In-delivery retries (orders.retries, sum valueSum)", retries),
        (axes[2][0], "Relay outcomes (orders.relay.*, sum valueSum)", relay),
    ]
    for axis, title, counts in panels:
        names = sorted(counts)
        axis.bar(names, [counts[name] for name in names], color="#4472c4")
        axis.set_title(title, fontsize=10)
        axis.tick_params(axis="x", labelrotation=20, labelsize=8)
    axis = axes[1][1]
    names = sorted(durations)
    axis.bar(names, [max(durations[name]) for name in names], color="#ed7d31")
    axis.set_title(
        "Duration, max per outcome (ms, spans)\n"
        f"RU per processed order: {ru / max(outcomes['processed'], 1):.1f} "
        "(local server: 1 RU a request)",
        fontsize=10,
    )
    axis.tick_params(axis="x", labelrotation=20, labelsize=8)
    axis = axes[2][1]
    axis.bar(["mean", "max"], [lag_mean / 3600, lag_max / 3600], color="#70ad47")
    axis.set_title(
        "Relay lag, createdAt to publish (h; orders.relay.lag)\n"
        "the scenario's clock ran two duplicate-detection windows first",
        fontsize=10,
    )
    axis = axes[3][0]
    names = sorted(edge, reverse=True)
    axis.barh(names, [edge[name] for name in names], color="#4472c4")
    axis.set_title("Orders API: requests by route and outcome (orders.edge.requests)", fontsize=10)
    axis.tick_params(axis="y", labelsize=7)
    axis = axes[3][1]
    routes = sorted(replay_ages)
    axis.bar(routes, [replay_ages[route] for route in routes], color="#7030a0")
    axis.set_yscale("log")
    axis.set_title("Orders API: key age at replay (s, log; replay_age)", fontsize=10)
    figure.suptitle(LABEL, color="#c00000", fontsize=11, fontweight="bold")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("docs/operations-workbook-local.png")
    with tempfile.TemporaryDirectory() as tmp:
        render(capture_envelopes(Path(tmp)), target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
