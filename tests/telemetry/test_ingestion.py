"""What reaches Log Analytics when no trace is sampled (the lot of almost every order at volume:
the distro keeps 5 traces per second per process): the real exporter, through the project's
``configure_exporters``, against the local ingestion endpoint (``bench.ingestion``, target 7 of
``make bench``, in small).

Healthy orders send no row of ``requests``, ``dependencies`` or ``traces``; the metrics still
count every delivery and every published event, and a failure's warning still arrives. Fails
without ``shared.telemetry.exporters.ExportedLogRecords`` on the exporter's handler (each processed
delivery and each published event then sends an INFO row, sampled or not).
"""

from __future__ import annotations

from bench.ingestion import capture
from local.standins.ingestion import INSTRUMENTATION_KEY

ORDERS = 10


def test_unsampled_healthy_orders_send_only_metrics_and_failures_still_log() -> None:
    run = capture(ORDERS, sampling=0.0)

    assert run["summary"]["published"] == ORDERS and run["summary"]["dead_letters"] == 1
    assert set(run["rows"]) == {"customMetrics", "traces"}  # no requests, no dependencies
    assert run["traces_by_logger"] == {"orders.consumer severity 2": 1}  # the invalid message
    metrics = run["metric_totals"]
    assert metrics["orders.messages"] == ORDERS + 1  # every delivery counted
    assert metrics["orders.relay.published"] == ORDERS
    assert run["instrumentation_key"] == INSTRUMENTATION_KEY
