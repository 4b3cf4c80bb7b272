"""The benchmark's figure is written from a run's samples and throughput summary."""

from __future__ import annotations

import random
from pathlib import Path

from bench.plot import write_png
from bench.stats import rounds


def test_figure_is_a_png_of_the_samples_and_the_variants(tmp_path: Path) -> None:
    generator = random.Random(7)
    samples = {
        "decide, new order": [generator.lognormvariate(4.8, 0.3) for _ in range(500)],
        "decode + handle + thread hop": [generator.lognormvariate(6.5, 0.3) for _ in range(500)],
    }
    throughput = {
        "concurrency": 16,
        "rounds": 3,
        "variants": {
            name: {"msgs_per_s": rounds([rate * 0.9, rate, rate * 1.1])}
            for name, rate in (
                ("bare_create", 370.0),
                ("floor_create", 195.0),
                ("consumer_create", 185.0),
            )
        },
    }
    figure = tmp_path / "docs" / "benchmarks.png"

    write_png(figure, samples, throughput)

    content = figure.read_bytes()
    assert content.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(content) > 20_000  # two populated panels, not an empty canvas
