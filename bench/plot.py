"""The benchmark's figure (``docs/benchmarks.png``): where the per-message CPU time lies, and the
throughput of each variant, from one run.

Left: the empirical distribution (share of messages at or below a time) of the per-message CPU
samples of target 2, on a log scale, with the p50 and p99 limits. Right: messages per second of
each throughput variant, median of the rounds with min and max.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a build machine

import matplotlib.pyplot as plt

from bench.cpu import P50_LIMIT_US, P99_LIMIT_US


def write_png(
    path: Path,
    cpu_samples_us: Mapping[str, Sequence[float]],
    throughput: Mapping[str, Any] | None,
) -> None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5), width_ratios=(1.1, 1))
    for label, samples in cpu_samples_us.items():
        ordered = sorted(samples)
        count = len(ordered)
        left.step(
            ordered, [(index + 1) / count for index in range(count)], where="post", label=label
        )
    left.axvline(P50_LIMIT_US, color="grey", linestyle="--", linewidth=1)
    left.axvline(P99_LIMIT_US, color="grey", linestyle=":", linewidth=1)
    left.axhline(0.5, color="grey", linestyle="--", linewidth=0.5)
    left.axhline(0.99, color="grey", linestyle=":", linewidth=0.5)
    left.set_xscale("log")
    left.set_xlabel("CPU time per message, µs (log scale; dashed: p50 limit, dotted: p99 limit)")
    left.set_ylabel("share of messages")
    left.set_title("Consumer CPU per message, no I/O")
    left.legend(loc="lower right", fontsize="small")
    left.grid(True, which="both", alpha=0.3)

    if throughput:
        names = list(throughput["variants"])
        rates = [throughput["variants"][name]["msgs_per_s"] for name in names]
        medians = [rate["median"] for rate in rates]
        errors = [
            [rate["median"] - rate["min"] for rate in rates],
            [rate["max"] - rate["median"] for rate in rates],
        ]
        colours = [
            "tab:grey"
            if name.startswith("bare")
            else "tab:orange"
            if name.startswith("floor")
            else "tab:blue"
            for name in names
        ]
        right.barh(names, medians, xerr=errors, color=colours, capsize=3)
        right.invert_yaxis()
        right.set_xlabel(
            f"messages per second, concurrency {throughput['concurrency']} "
            f"(median of {throughput['rounds']} rounds, min-max)"
        )
        right.set_title(
            "Throughput\ngrey: bare SDK loop, orange: platform floor, blue: consumer",
            fontsize="medium",
        )
        right.grid(True, axis="x", alpha=0.3)
    else:
        right.set_axis_off()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
