"""What Application Insights receives, against what infra/ reads.

A local HTTP ingestion server (stdlib) on 127.0.0.1 stands in for the ``IngestionEndpoint`` of the
connection string. A fresh interpreter (``envelope_scenario.py``) configures the project's own
exporters (``configure_exporters``: the real azure-monitor-opentelemetry distro) with it, drives
one delivery of each outcome through the function, and flushes. The envelopes the real exporter
posts to ``/v2.1/track`` are then held against every query, alert rule and workbook panel:

- every ``customDimensions`` key a query reads arrives on that table's rows (and on the rows of
  the metric or request it filters on), and every ``name == "..."`` it filters on exists;
- the metric arithmetic the queries apply gives the counts the requests and traces show;
- requests are sampled: a query counting or ranking ``requests`` must weigh by ``itemCount``.

The scenario drives the two subscription consumers too (their decisions scripted, reported
through the kit's ``Consumer``): every consumer's rows carry ``orders.consumer``, and their
business counts arrive as the counters ``names.BUSINESS_MEASURES`` lists.

The scenario drives the outbox relay too (a publish, a refused send, a parked invalid event), so
the relay's names (docs/operations.md, "Telemetry the consumer emits") are held like the consumer's.

And the orders API through the HTTP host (each route, replays of known record ages, a reused key,
a stale If-Match, a 415 refusal, a 503): its counter, replay-age histogram, SERVER spans and logs
are held to what the scenario answered and to Q20-Q23 and the workbook's orders API panels.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from shared.telemetry.names import BUSINESS_MEASURES
from tests.telemetry.envelope_capture import BASE_TYPES, Capture, capture_envelopes
from tests.telemetry.envelope_scenario import UNKNOWN_MEASURE
from tests.telemetry.kql_names import all_segments, segments
from tests.telemetry.workbook_picture import render

COSMOS_OPERATIONS = {
    "ContainerProxy.create_item",
    "ContainerProxy.execute_item_batch",
    "ContainerProxy.read_item",
}


def relay_owned(name: str) -> bool:
    """Names the relay emits (``shared.telemetry.relay.RelayTelemetry``)."""
    return name.startswith(("orders.relay", "send ")) or name in {"orders.topic", "orders.event_id"}


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return capture_envelopes(tmp_path_factory.mktemp("envelopes"))


# ---- the parser (unit) --------------------------------------------------------------------------


def test_the_parser_reads_every_form_and_skips_comments_and_strings() -> None:
    query = """
    // customDimensions["commented"] and name == "commented"
    requests | where name == "process orders"
    | extend a = customDimensions["orders.outcome"], b = customDimensions['single'],
             c = customDimensions.dotted, s = "customDimensions['quoted']"
    | summarize sum(itemCount) by tostring(a)
    | join (customMetrics | where name in ("m.one", "m.two") | summarize sum(valueSum))
    """
    first, second = segments("test", query)
    assert (first.table, first.names) == ("requests", {"process orders"})
    assert first.dimensions == {"orders.outcome", "single", "dotted"}
    assert first.aggregates == {("sum", "itemCount")}
    assert (second.table, second.names) == ("customMetrics", {"m.one", "m.two"})
    assert second.aggregates == {("sum", "valueSum")}


def test_every_query_alert_and_workbook_panel_is_found() -> None:
    sources = {segment.source for segment in all_segments()}
    assert {source.split()[0] for source in sources} == {
        "queries.kql",
        "alerts.bicep",
        "workbook.json",
    }
    assert {f"queries.kql Q{n}" for n in range(1, 24)} <= sources
    assert "workbook.json stale-rate-by-message-type" in sources
    assert {
        f"workbook.json edge-{panel}"
        for panel in ("requests-by-outcome", "replay-rate", "replay-age", "5xx")
    } <= sources


# ---- against the capture ------------------------------------------------------------------------


def test_the_scenario_drove_every_outcome(capture: Capture) -> None:
    outcomes = Counter(row["properties"]["orders.outcome"] for row in capture.requests())
    assert set(outcomes) == {
        "processed",
        "duplicate",
        "stale",
        "mismatch",
        "invalid",
        "transient",
        "systemic",
    }
    assert sum(outcomes.values()) == capture.summary["deliveries"]
    settlements = {row["properties"]["orders.settlement"] for row in capture.requests()}
    assert settlements == {"complete", "abandon", "deadletter", "none"}


def test_the_exporter_drops_semconv_attributes_and_keeps_the_orders_names(
    capture: Capture,
) -> None:
    for row in capture.requests():
        keys = set(row["properties"])
        assert not {key for key in keys if key.startswith("messaging.")}, keys
        assert "error.type" not in keys
        assert {"orders.message_id", "orders.delivery_count", "orders.queue"} <= keys


def test_every_name_and_key_read_in_infra_arrives(capture: Capture) -> None:
    missing = []
    checked = 0
    for segment in all_segments():
        names, keys = segment.names, segment.dimensions
        if segment.table not in BASE_TYPES:
            continue
        for name in sorted(names - capture.names(segment.table)):
            missing.append(f"{segment.source}: {segment.table} name {name!r} never sent")
        available = capture.dimensions(segment.table, names)
        for key in sorted(keys - available):
            missing.append(f"{segment.source}: {segment.table} customDimensions[{key!r}] absent")
        checked += len(names) + len(keys)
    assert not missing, "\n".join(missing)
    assert checked > 40  # the extraction found the queries


def test_queries_over_requests_weigh_by_item_count() -> None:
    """Requests are sampled (5 per second by default); metrics and logs are not."""
    offenders = []
    for segment in all_segments():
        if segment.table != "requests":
            continue
        for function, argument in segment.aggregates:
            if function in {"count", "countif", "percentile", "percentiles", "dcount"}:
                offenders.append(f"{segment.source}: {function}() over sampled requests")
            if function in {"sum", "sumif"} and argument not in {"itemCount"}:
                offenders.append(f"{segment.source}: {function}({argument}) over requests")
    assert not offenders, "\n".join(offenders)


def test_sampled_requests_carry_their_item_count(capture: Capture) -> None:
    assert capture.item_counts()
    assert set(capture.item_counts()) == {1.0}  # 100 % in this run: itemCount = 1


EDGE_SPANS = {
    "POST /api/orders",
    "POST /api/orders/{orderId}/amendments",
    "POST /api/orders/{orderId}/cancellations",
    "GET /api/orders/{orderId}",
}


def edge_requests(capture: Capture) -> list[dict[str, Any]]:
    """The orders API's SERVER spans (requests rows)."""
    return [row for row in capture.of("requests") if row["name"] in EDGE_SPANS]


def consumer_dependencies(capture: Capture) -> list[dict[str, Any]]:
    """The dependencies rows outside the orders API's requests (their operation, the trace)."""
    edge_operations = {
        envelope["tags"]["ai.operation.id"]
        for envelope in capture.envelopes
        if envelope.get("data", {}).get("baseType") == "RequestData"
        and envelope["data"]["baseData"]["name"] in EDGE_SPANS
    }
    return [
        envelope["data"]["baseData"]
        for envelope in capture.envelopes
        if envelope.get("data", {}).get("baseType") == "RemoteDependencyData"
        and envelope["tags"].get("ai.operation.id") not in edge_operations
    ]


def span_seconds(duration: str) -> float:
    days, _, clock = duration.partition(".")
    hours, minutes, seconds = clock.split(":")
    return ((int(days) * 24 + int(hours)) * 60 + int(minutes)) * 60 + float(seconds)


def _truths(capture: Capture) -> dict[tuple[str, str], float]:
    """What each metric column must add up to, from the other signals of the same run."""
    requests = capture.consumer_requests()  # every consumer's: the metrics count them all
    relay = Counter(
        str(row.get("properties", {}).get("orders.relay.outcome"))
        for row in capture.of("dependencies")
    )
    summary = capture.summary
    edge = edge_requests(capture)
    replays = [row for row in edge if row["properties"]["orders.edge.outcome"] == "replayed"]
    retries = [t for t in capture.of("traces") if "attempt_outcome" in t.get("properties", {})]
    return {
        ("orders.messages", "valueSum"): len(requests),
        ("orders.processing.duration", "valueCount"): len(requests),
        ("orders.delivery_count", "valueCount"): len(requests),
        ("orders.delivery_count", "valueSum"): sum(
            int(row["properties"]["orders.delivery_count"]) for row in requests
        ),
        ("orders.retries", "valueSum"): len(retries),
        # The relay's PRODUCER spans (dependencies) name the outcome of each send; a send that
        # fails for good is both failed and parked. An invalid outbox document is parked before
        # any send: Cosmos DB's parked documents are the truth of the parked counter.
        ("orders.relay.published", "valueSum"): relay["published"],
        ("orders.relay.failed", "valueSum"): relay["failed"] + relay["parked"],
        ("orders.relay.parked", "valueSum"): summary["relay_parked"],
        ("orders.relay.lag", "valueCount"): relay["published"],
        # The watchdog: one observation per run of each; the stuck count of every run.
        ("orders.relay.stuck", "valueSum"): summary["watchdog_stuck"],
        ("orders.relay.stuck_age", "valueCount"): summary["watchdog_runs"],
        # Seconds from createdAt to the publish: what the dispatched documents say.
        ("orders.relay.lag", "valueSum"): summary["relay_lag_s"],
        # One observation per Cosmos DB call of a consumer (the SDK's spans: dependencies; the
        # orders API's calls, in its requests' operations, record no charge).
        ("orders.cosmos.request_charge", "valueCount"): len(
            [d for d in consumer_dependencies(capture) if d["name"] in COSMOS_OPERATIONS]
        ),
        ("orders.cosmos.request_charge", "valueSum"): sum(
            float(row["properties"].get("orders.cosmos.request_charge", 0)) for row in requests
        ),
        # The orders API: one count per request (its SERVER span), one age per replay.
        ("orders.edge.requests", "valueSum"): len(edge),
        ("orders.edge.replay_age", "valueCount"): len(replays),
        ("orders.edge.replay_age", "valueSum"): sum(
            float(row["properties"]["orders.edge.record_age_s"]) for row in replays
        ),
        # The request completer: one age per run, 0 when none was unsent (its quiet run).
        ("orders.edge.completer.unsent_age", "valueCount"): summary["completer_runs"],
        ("orders.edge.completer.unsent_age", "valueSum"): 0.0,
        # The business counters: what the subscription consumers' decisions counted.
        **{
            (metric, "valueSum"): sum(summary["business_measures"][metric].values())
            for metric in BUSINESS_MEASURES.values()
        },
    }


def test_metric_arithmetic_matches_the_other_signals(capture: Capture) -> None:
    truths = _truths(capture)
    assert truths[("orders.retries", "valueSum")] > 2  # several retries in one interval
    used: set[tuple[str, str]] = set()
    problems = []
    for segment in all_segments():
        if segment.table != "customMetrics":
            continue
        names = segment.names
        for function, argument in segment.aggregates:
            if function in {"count", "countif", "dcount"}:
                problems.append(f"{segment.source}: {function}() counts pre-aggregated rows")
                continue
            if argument not in {"valueSum", "valueCount"}:
                problems.append(f"{segment.source}: {function}({argument}) of customMetrics")
                continue
            for name in names:
                used.add((name, argument))
    for name, column in sorted(used):
        if (name, column) == ("orders.processing.duration", "valueSum"):
            # Seconds of decide + settle: inside each delivery's span (requests, "d.hh:mm:ss").
            total_s = sum(value for _, value, _ in capture.metric_rows(name))
            requests = capture.consumer_requests()
            spans_s = sum(span_seconds(row["duration"]) for row in requests)
            # A request's duration is exported to the millisecond (rounded): allow that much.
            if not 0 < total_s <= spans_s + 0.001 * len(requests):
                problems.append(f"{name} sum(valueSum) = {total_s} s, spans {spans_s} s")
            continue
        if (name, column) not in truths:
            problems.append(f"{name} {column}: not a meaningful total (a counter's valueCount?)")
            continue
        rows = capture.metric_rows(name)
        total = sum(value if column == "valueSum" else count for _, value, count in rows)
        if abs(total - truths[(name, column)]) > 1e-6:
            problems.append(f"{name} sum({column}) = {total}, expected {truths[(name, column)]}")
    assert not problems, "\n".join(problems)
    assert ("orders.retries", "valueSum") in used
    assert ("orders.messages", "valueSum") in used
    assert {("orders.relay.lag", "valueSum"), ("orders.relay.parked", "valueSum")} <= used


def test_outcome_counts_from_metrics_equal_the_requests(capture: Capture) -> None:
    """Per consumer, outcome and settlement (Q1, Q8 and the workbook split by consumer)."""
    from_metrics: Counter[tuple[str, str, str]] = Counter()
    for properties, value, count in capture.metric_rows("orders.messages"):
        assert count == 1  # a counter point: value = the increment, count = 1
        key = (properties["orders.consumer"], properties["outcome"], properties["settlement"])
        from_metrics[key] += int(value)
    from_requests = Counter(
        (
            row["properties"]["orders.consumer"],
            row["properties"]["orders.outcome"],
            row["properties"]["orders.settlement"],
        )
        for row in capture.consumer_requests()
    )
    assert from_metrics == from_requests
    assert {consumer for consumer, _, _ in from_metrics} == {
        "orders",
        "stock-reservation",
        "payment-capture",
    }


def test_the_stale_rate_by_message_type_from_metrics_equals_the_requests(
    capture: Capture,
) -> None:
    """Q16 and the workbook's stale-rate panel: ``sumif(valueSum, outcome == "stale")`` over
    ``sum(valueSum)`` by ``message_type``, against the spans of the same deliveries."""
    deliveries: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    for properties, value, _ in capture.metric_rows("orders.messages"):
        deliveries[properties["message_type"]] += int(value)
        stale[properties["message_type"]] += int(value) if properties["outcome"] == "stale" else 0
    spans = Counter(
        (row["properties"]["orders.message_type"], row["properties"]["orders.outcome"] == "stale")
        for row in capture.consumer_requests()
    )
    assert {kind: (deliveries[kind], stale[kind]) for kind in deliveries} == {
        kind: (spans[(kind, True)] + spans[(kind, False)], spans[(kind, True)])
        for kind in {kind for kind, _ in spans}
    }
    assert stale == {"OrderPlaced": 0, "OrderAccepted": 0, "OrderAmended": 1, "OrderCancelled": 0}


def test_a_stale_and_an_invalid_transition_carry_both_versions_as_q3_and_q17_read_them(
    capture: Capture,
) -> None:
    """The span's ``orders.*`` copies arrive (Q17 reads them); the dead-letter log names the
    message type and both versions (Q3)."""
    [stale] = [r for r in capture.requests() if r["properties"]["orders.outcome"] == "stale"]
    assert {
        key: stale["properties"][key]
        for key in ("orders.message_type", "orders.order_version", "orders.stored_version")
    } == {
        "orders.message_type": "OrderAmended",
        "orders.order_version": "2",
        "orders.stored_version": "3",
    }
    assert stale["properties"]["orders.order_id"] == "ord-8"
    [transition] = [
        row["properties"]
        for row in capture.of("traces")
        if row.get("properties", {}).get("deadletter_reason") == "InvalidTransition"
    ]
    assert {k: transition[k] for k in ("message_type", "order_version", "stored_version")} == {
        "message_type": "OrderAmended",
        "order_version": "5",
        "stored_version": "4",
    }


def test_the_scenario_drove_every_relay_outcome(capture: Capture) -> None:
    """A publish, a refused send and a parked event: each relay row infra/ reads is exercised."""
    relay_segments = [s for s in all_segments() if any(map(relay_owned, s.names | s.dimensions))]
    assert relay_segments, "the relay rows are in the workbook, queries and alerts"
    outcomes = Counter(
        row["properties"]["orders.relay.outcome"]
        for row in capture.of("dependencies")
        if row["name"] == "send order-events"
    )
    assert outcomes["published"] == capture.summary["relay_dispatched"] > 0
    failed = [
        row["properties"]
        for row in capture.of("dependencies")
        if row["properties"].get("orders.relay.outcome") == "failed"
    ]
    # error.type does not arrive on a span's row; its kept copy does (the runbook's dependencies).
    # The refused send failed every event of the first batch; the relay that could not start,
    # its batch's one event.
    assert Counter(row.get("orders.error_type") for row in failed) == {
        "OperationTimeoutError": capture.summary["first_drain_dispatched"],
        "ConfigurationError": capture.summary["relay_configuration_failures"],
    }
    assert capture.summary["relay_parked"] == 1  # the invalid event: parked before any send
    levels = Counter(  # severityLevel 2 = Warning, 3 = Error, 4 = Critical
        row["severityLevel"]
        for row in capture.of("traces")
        if row.get("properties", {}).get("logger_name") == "orders.relay"
    )
    assert levels[3] == outcomes["failed"]  # one error log per failed send
    # One critical log per parked event and per failed start of the relay (naming the setting).
    assert levels[4] == (
        capture.summary["relay_parked"] + capture.summary["relay_configuration_failures"]
    )


def test_the_watchdog_reports_every_run_as_the_stuck_and_silent_alerts_read_it(
    capture: Capture,
) -> None:
    """The alerts' arithmetic, on what the exporter sent: one stuck_age observation per run
    (sum(valueCount) = runs: 0 means silent), max(valueMax) the oldest stuck age seen."""
    ages = capture.metric_rows("orders.relay.stuck_age")
    assert sum(count for _, _, count in ages) == capture.summary["watchdog_runs"] == 2
    maxima = [
        point["max"]
        for data in capture.of("customMetrics")
        for point in data["metrics"]
        if point["name"] == "orders.relay.stuck_age"
    ]
    assert max(maxima) == capture.summary["watchdog_oldest_age_s"]
    assert max(maxima) > 900 - 600  # past the watchdog's age (the stuck alert's threshold: 900)
    # How each run ended, as the falling-behind alert reads it: both drained (the scenario's
    # backlog is one event; tests/relay/test_watchdog.py drives runs at their page limit).
    assert {row[0]["orders.relay.watchdog_end"] for row in ages} == {"drained"}
    stuck = capture.metric_rows("orders.relay.stuck")
    assert sum(value for _, value, _ in stuck) == capture.summary["watchdog_stuck"] == 1
    warnings = [
        row for row in capture.of("traces") if "stuck_outbox_documents" in row.get("properties", {})
    ]
    assert [row["properties"]["stuck_outbox_documents"] for row in warnings] == ["1"]
    # The watchdog published through the relay: its event is among the published ones.
    published = [
        row
        for row in capture.of("dependencies")
        if row.get("properties", {}).get("orders.relay.outcome") == "published"
    ]
    assert len(published) == capture.summary["relay_dispatched"]


def test_a_relay_that_cannot_start_is_logged_as_the_configuration_alert_reads_it(
    capture: Capture,
) -> None:
    critical = [
        row["properties"]
        for row in capture.of("traces")
        if row.get("severityLevel") == 4
        and row["properties"].get("logger_name") == "orders.relay"
        and row["properties"].get("setting")
    ]
    assert [row["setting"] for row in critical] == [
        "ServiceBusConnection__fullyQualifiedNamespace"
    ] * capture.summary["relay_configuration_failures"]


def test_a_hung_settlement_is_counted_and_logged_as_q15_reads_it(capture: Capture) -> None:
    # A running total, exported every interval: Q15 reads max(valueSum) per bin.
    values = [value for _, value, _ in capture.metric_rows("orders.settlement.hung")]
    assert max(values) == capture.summary["settlements_hung"] == 1  # 0 again once it returned
    logs = [row for row in capture.of("traces") if "hung_settlements" in row.get("properties", {})]
    hung = [row for row in logs if row["severityLevel"] == 3]  # Error: the hang
    assert [row["properties"]["hung_settlements"] for row in hung] == ["1"]


def test_the_local_workbook_picture_renders_from_the_capture(
    capture: Capture, tmp_path: Path
) -> None:
    target = tmp_path / "workbook.png"
    render(capture, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- per consumer (issues 27, 28) ---------------------------------------------------------------

CONSUMER_METRICS = {
    "orders.messages",
    "orders.processing.duration",
    "orders.delivery_count",
    "orders.retries",
    "orders.cosmos.request_charge",
    "orders.settlement.hung",
    *BUSINESS_MEASURES.values(),
}


def test_each_consumer_is_named_on_its_requests_metrics_and_logs(capture: Capture) -> None:
    """``orders.consumer`` arrives in customDimensions of every consumer's requests, of every
    consumer metric row and of every consumer log record: the exporter keeps ``orders.*``."""
    consumers_by_span = {
        (row["name"], row["properties"].get("orders.consumer"))
        for row in capture.consumer_requests()
    }
    assert consumers_by_span == {
        ("process orders", "orders"),
        ("process order-events", "stock-reservation"),
        ("process order-events", "payment-capture"),
    }
    for row in capture.consumer_requests():
        keys = set(row["properties"])
        assert not {key for key in keys if key.startswith("messaging.")}, keys
        if row["name"] == "process order-events":  # the topic and subscription, kept
            assert row["properties"]["orders.topic"] == "order-events"
            assert row["properties"]["orders.subscription"] in {"inventory", "payments"}
    rows = [
        (point["name"], data.get("properties", {}))
        for data in capture.of("customMetrics")
        for point in data["metrics"]
        if point["name"] in CONSUMER_METRICS
    ]
    assert {name for name, _ in rows} == CONSUMER_METRICS
    assert [name for name, properties in rows if "orders.consumer" not in properties] == []
    consumer_logs = [
        row["properties"]
        for row in capture.of("traces")
        if row.get("properties", {}).get("logger_name") == "orders.consumer"
    ]
    assert consumer_logs
    assert {properties.get("orders.consumer") for properties in consumer_logs} == {
        "orders",
        "stock-reservation",
        "payment-capture",
    }


def test_the_business_counters_arrive_with_their_values_per_consumer(capture: Capture) -> None:
    expected = capture.summary["business_measures"]
    assert expected == {
        "orders.stock.shortfall": {"stock-reservation": 5},
        "orders.payments.declined": {"payment-capture": 1},
        "orders.payments.refused": {"payment-capture": 1},
        "orders.payments.reconciliation_needed": {"payment-capture": 1},
        "orders.payments.payer_changed": {"payment-capture": 1},
    }
    for metric in BUSINESS_MEASURES.values():
        arrived: Counter[str] = Counter()
        for properties, value, count in capture.metric_rows(metric):
            assert count == 1  # a counter point
            assert set(properties) == {"orders.consumer"}  # nothing else, nothing unbounded
            arrived[properties["orders.consumer"]] += int(value)
        assert arrived == expected[metric], metric
    # A measure no counter exists for: not exported; one warning names it.
    assert f"orders.{UNKNOWN_MEASURE}" not in capture.names("customMetrics")
    warnings = [
        row
        for row in capture.of("traces")
        if row.get("properties", {}).get("measure") == UNKNOWN_MEASURE
    ]
    assert [(row["severityLevel"], row["properties"]["orders.consumer"]) for row in warnings] == [
        (2, "stock-reservation")
    ]
    # The reconciliation is a dead letter with its reason, as Q19 reads it.
    [parked] = [
        row["properties"]
        for row in capture.of("traces")
        if row.get("properties", {}).get("deadletter_reason") == "NeedsReconciliation"
    ]
    assert (parked["orders.consumer"], parked["settlement"], parked["order_id"]) == (
        "payment-capture",
        "deadletter",
        "ord-8",
    )


# ---- the orders API (issue 33) ------------------------------------------------------------------

EDGE_DIMENSIONS = {"orders.edge.route", "orders.edge.outcome", "orders.edge.status_code"}


def test_the_orders_api_is_counted_by_route_outcome_and_status_as_q20_and_q21_read_it(
    capture: Capture,
) -> None:
    """What the scenario's client was answered = the counter's rows = the SERVER spans."""
    expected = Counter(
        (route, outcome, status)
        for route, outcome, status in capture.summary["orders_api"]["answered"]
    )
    assert {status for _, _, status in expected} == {200, 201, 404, 412, 415, 422, 503}
    from_metrics: Counter[tuple[str, str, int]] = Counter()
    for properties, value, count in capture.metric_rows("orders.edge.requests"):
        assert count == 1 and set(properties) == EDGE_DIMENSIONS  # bounded: nothing else
        key = (
            properties["orders.edge.route"],
            properties["orders.edge.outcome"],
            int(properties["orders.edge.status_code"]),
        )
        from_metrics[key] += int(value)
    assert from_metrics == expected
    rows = edge_requests(capture)
    assert {row["name"] for row in rows} == EDGE_SPANS
    from_spans = Counter(
        (
            row["properties"]["orders.edge.route"],
            row["properties"]["orders.edge.outcome"],
            int(row["responseCode"]),
        )
        for row in rows
    )
    assert from_spans == expected
    # http.* dropped, the kept copies arrive. success: false from 400 on (the exporter's rule,
    # _utils._is_status_code_success: a 4xx is not a success; a 5xx by the span's ERROR status).
    for row in rows:
        assert not {key for key in row["properties"] if key.startswith("http.")}
        assert set(row["properties"]) >= EDGE_DIMENSIONS
        assert row["success"] is (int(row["responseCode"]) < 400)


def test_the_key_s_record_age_at_replay_arrives_as_q22_reads_it(capture: Capture) -> None:
    expected = sorted((route, age) for route, age in capture.summary["orders_api"]["replay_ages"])
    from_spans = sorted(
        (
            row["properties"]["orders.edge.route"],
            float(row["properties"]["orders.edge.record_age_s"]),
        )
        for row in edge_requests(capture)
        if row["properties"]["orders.edge.outcome"] == "replayed"
    )
    assert from_spans == expected == [("amend", 30.0), ("cancel", 10800.0), ("place", 90.0)]
    ages = capture.metric_rows("orders.edge.replay_age")
    assert {route for properties, _, _ in ages for route in [properties["orders.edge.route"]]} == {
        "place",
        "amend",
        "cancel",
    }
    assert all(set(properties) == {"orders.edge.route"} for properties, _, _ in ages)
    assert sum(value for _, value, _ in ages) == sum(age for _, age in expected)
    maxima = [
        point["max"]
        for data in capture.of("customMetrics")
        for point in data["metrics"]
        if point["name"] == "orders.edge.replay_age"
    ]
    assert max(maxima) == 10800.0  # Q22's max_age_s


def test_an_orders_api_5xx_is_logged_as_q23_reads_it(capture: Capture) -> None:
    logged = [
        (row["severityLevel"], row["properties"])
        for row in capture.of("traces")
        if row.get("properties", {}).get("logger_name") == "orders.edge"
        and row["severityLevel"] >= 2
    ]
    assert [(level, p.get("setting"), p.get("orders.edge.outcome")) for level, p in logged] == [
        (4, "REQUESTS_CONTAINER", None),  # the edge cannot be built: its setting named
        (2, None, "unavailable"),  # the request's answer, 503
    ]
    assert logged[1][1]["orders.edge.route"] == "place"
    assert logged[1][1]["orders.edge.status_code"] == "503"
