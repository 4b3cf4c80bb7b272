"""Summaries of samples (per message) and of repeated rounds."""

from __future__ import annotations

import random
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


def median_standard_error(values: Sequence[float], resamples: int = 2_000) -> float:
    """The standard error of ``values``' median: the spread of the medians of ``resamples``
    samples drawn from them with replacement (the bootstrap), from a fixed seed so that one
    run's figures always give the same answer. What a figure read as a median of rounds moves by
    from one run to the next when only the rounds' own noise moves it."""
    if len(values) < 2:
        return 0.0
    draw = random.Random(0)
    medians = [statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples)]
    return statistics.stdev(medians)
