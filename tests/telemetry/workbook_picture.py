"""Render the workbook's panels from LOCAL data, for docs/operations.md: the envelopes the real
exporter posted in one run of ``envelope_scenario.py`` (one scripted delivery of each outcome),
computed the way the workbook's queries compute them (counters: valueSum; durations: spans).

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

LABEL = "LOCAL DATA: one scripted delivery of each outcome on this machine, not production"


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

    figure, axes = plt.subplots(2, 2, figsize=(11, 7))
    panels = [
        (axes[0][0], "Outcomes (orders.messages, sum valueSum)", outcomes),
        (axes[0][1], "Dead-letters by reason (traces)", reasons),
        (axes[1][0], "In-delivery retries (orders.retries, sum valueSum)", retries),
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
        f"Duration, max per outcome (ms, spans); RU per processed order "
        f"(local server: 1 RU a request): "
        f"{ru / max(outcomes['processed'], 1):.1f}",
        fontsize=9,
    )
    axis.tick_params(axis="x", labelrotation=20, labelsize=8)
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
