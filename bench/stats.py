"""Small statistics helpers: percentiles of samples and summaries of repeated rounds."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(samples: Sequence[float]) -> dict[str, Any]:
    """p50/p90/p99/mean/min/max of per-item samples."""
    return {
        "n": len(samples),
        "p50": percentile(samples, 50),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
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
