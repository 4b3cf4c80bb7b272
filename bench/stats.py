"""Summaries of samples (per message) and of repeated rounds."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def distribution(samples: Sequence[float]) -> dict[str, Any]:
    """p50/p99 (numpy's default interpolation), mean, min and max."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {
        "n": len(samples),
        "p50": statistics.median(samples),
        "p99": cuts[98],
        "mean": statistics.fmean(samples),
        "min": min(samples),
        "max": max(samples),
    }


def rounds(values: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of repeated rounds, with the raw values."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }
