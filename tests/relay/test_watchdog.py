"""The outbox watchdog (``outbox_watchdog``, a timer trigger) through Microsoft's worker: what the
change feed never delivers is published anyway, with the same MessageId and the same
etag-conditional mark, while the change-feed relay may run at the same moment; every run
reports the stuck count and the oldest age, the quiet runs too.

Each test fails on 223dafd, which had no watchdog: a document the change feed skipped stayed
pending for ever and nothing reported it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import ConfigurationError, document_timestamp
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    InMemoryMetricReader,
)

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from local.standins.topic import OrderEventsTopic
from shared.adapters.cosmos_outbox import CosmosOutboxStore
from shared.config import WATCHDOG_MIN_AGE_SETTING, WatchdogSettings
from shared.relay.watchdog import MAX_PAGES_PER_RUN, WatchdogPolicy
from shared.telemetry.relay import RelayTelemetry
from shared.triggers import WATCHDOG_PERIOD_S, WATCHDOG_SCHEDULE
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order

MIN_AGE = timedelta(seconds=300)  # OUTBOX_WATCHDOG_MIN_AGE_SECONDS' default


async def skipped_by_the_change_feed(
    world: World, container: ContainerProxy, clock: ManualClock, count: int
) -> list[str]:
    """Orders accepted before the leases existed, the trigger then started "from now" (as a
    binding without startFromBeginning does): the change feed never delivers their events."""
    ids = new_order_ids(count)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    feed = world.recreate_leases(start_from_beginning=False)
    await feed.drain()
    assert feed.stats.skipped_at_start == 2 * count
    return ids


def test_the_watchdog_is_a_timer_trigger_every_five_minutes(world: World) -> None:
    timer = world.watchdog
    assert timer.function.name == "outbox_watchdog"
    assert timer.schedule == WATCHDOG_SCHEDULE == "0 */5 * * * *"
    assert WATCHDOG_PERIOD_S == 5 * 60  # the period the capacity and the alert are stated in
    assert timer.function.trigger["useMonitor"] is True
    assert timer.function.trigger["runOnStartup"] is False


async def test_the_watchdog_publishes_what_the_change_feed_skipped(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = await skipped_by_the_change_feed(world, container, clock, 3)
    assert topic.stats.sends == 0
    clock.advance(MIN_AGE + timedelta(seconds=30))

    with caplog.at_level(logging.WARNING, logger="orders.relay"):
        result = await world.watchdog.tick()  # one occurrence, through the worker

    assert result.succeeded, result.error
    outbox = await outbox_by_order(container)
    assert {outbox[i]["status"] for i in ids} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        outbox[i]["eventId"] for i in ids
    )
    # Reported before it republished: three stuck, the oldest 330 s after its acceptance.
    [stuck] = captured_relay.points("orders.relay.stuck")
    [age] = captured_relay.points("orders.relay.stuck_age")
    assert (getattr(stuck, "sum", None), getattr(stuck, "count", None)) == (3, 1)
    assert getattr(age, "max", None) == 330.0
    [warning] = [r for r in caplog.records if hasattr(r, "stuck_outbox_documents")]
    assert warning.stuck_outbox_documents == 3
    # Published through the relay: the same span, counter and lag as the change feed's.
    assert captured_relay.total("orders.relay.published") == 3
    assert {s.attributes["orders.relay.outcome"] for s in captured_relay.send_spans()} == {  # type: ignore[index]
        "published"
    }


async def test_more_stuck_documents_than_a_page_are_all_published_in_one_run(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Seven stuck events, pages of two: one run reads four pages and publishes all seven, and
    reports the whole count before it starts. Fails with the run stopping after its first page
    (``OutboxWatchdog.run`` not asking the scanner again, or asking it with another cutoff or
    page size): mutation testing found no test with more than one page."""
    world.compose(env={**world.env, "OUTBOX_WATCHDOG_MAX_DOCUMENTS": "2"})
    ids = await skipped_by_the_change_feed(world, container, clock, 7)
    clock.advance(MIN_AGE)  # exactly the minimum age: stuck, and the oldest is 300 s old

    with caplog.at_level(logging.WARNING, logger="orders.relay"):
        result = await world.watchdog.tick()

    assert result.succeeded, result.error
    outbox = await outbox_by_order(container)
    assert {outbox[i]["status"] for i in ids} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        outbox[i]["eventId"] for i in ids
    )
    # The recomposed app's meters are its own; its report is read from the run's warning.
    [warning] = [r for r in caplog.records if hasattr(r, "stuck_outbox_documents")]
    assert warning.stuck_outbox_documents == 7
    assert warning.oldest_stuck_age_s == 300.0  # type: ignore[attr-defined]


async def test_the_configured_minimum_age_is_the_one_the_watchdog_waits(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    """``OUTBOX_WATCHDOG_MIN_AGE_SECONDS=900``: an event 600 s old is left to the change feed, one
    900 s old is published. Fails with ``OutboxWatchdog`` ignoring the policy it is given (the
    default's 300 s would publish at 600 s)."""
    world.compose(env={**world.env, WATCHDOG_MIN_AGE_SETTING: "900"})
    [order_id] = await skipped_by_the_change_feed(world, container, clock, 1)

    clock.advance(timedelta(seconds=600))
    early = await world.watchdog.tick()
    sent_early = topic.stats.sends
    clock.advance(timedelta(seconds=300))
    due = await world.watchdog.tick()

    assert early.succeeded and due.succeeded, (early.error, due.error)
    assert sent_early == 0
    outbox = await outbox_by_order(container)
    assert outbox[order_id]["status"] == "dispatched"
    assert [m.message_id for m in topic.delivered()] == [outbox[order_id]["eventId"]]


async def test_a_quiet_run_still_reports_and_leaves_young_documents_to_the_change_feed(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    [order_id] = await skipped_by_the_change_feed(world, container, clock, 1)
    clock.advance(MIN_AGE - timedelta(seconds=1))  # pending, but not for long enough

    await world.watchdog.tick()
    await world.watchdog.tick()

    assert (await outbox_by_order(container))[order_id]["status"] == "pending"
    assert topic.stats.sends == 0
    [stuck] = captured_relay.points("orders.relay.stuck")
    [age] = captured_relay.points("orders.relay.stuck_age")
    # Two runs, two observations of nothing: a silent watchdog is told from a quiet one.
    assert (getattr(stuck, "sum", None), getattr(stuck, "count", None)) == (0, 2)
    assert (getattr(age, "max", None), getattr(age, "count", None)) == (0.0, 2)


async def test_the_change_feed_republishing_after_the_watchdog_doubles_nothing(
    world: World,
    relay: object,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both at the same moment, deterministically: the change feed reads the pending batch,
    the watchdog publishes and marks it, then the change feed's invocation runs on what it
    read. Both send; the topic drops the second copy (same MessageId); the second mark meets
    the first one's etag (412) and changes nothing."""
    ids = new_order_ids(2)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(MIN_AGE + timedelta(seconds=1))
    batch = await change_feed.read_changes()  # pending, as the change feed read them

    assert (await world.watchdog.tick()).succeeded
    marked = await outbox_by_order(container)
    with caplog.at_level(logging.INFO, logger="orders.relay"):
        late = await change_feed.invoke(batch)

    assert late.succeeded, late.error
    assert topic.stats.messages == 4 and topic.stats.dropped_duplicates == 2  # both sent
    assert [d["_etag"] for d in (await outbox_by_order(container)).values()] == [
        d["_etag"] for d in marked.values()
    ]  # one mark won: the watchdog's
    assert sum("already marked" in r.getMessage() for r in caplog.records) == 2
    delivered = [m.message_id or "" for m in topic.delivered()]
    assert sorted(delivered) == sorted(marked[i]["eventId"] for i in ids)  # one each


async def test_the_watchdog_and_the_change_feed_running_concurrently_deliver_one_event_each(
    world: World,
    relay: object,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    topic: OrderEventsTopic,
    clock: ManualClock,
) -> None:
    ids = new_order_ids(6)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    clock.advance(MIN_AGE + timedelta(seconds=1))

    ticks, stats = await asyncio.gather(world.watchdog.tick(), change_feed.drain())

    assert ticks.succeeded and stats.failed_invocations == 0
    assert topic.stats.accepted == len(ids)  # whatever both sent, each event accepted once
    outbox = await outbox_by_order(container)
    assert {d["status"] for d in outbox.values()} == {"dispatched"}
    assert sorted(m.message_id or "" for m in topic.delivered()) == sorted(
        d["eventId"] for d in outbox.values()
    )


async def test_a_failed_republish_fails_the_run_and_leaves_the_event_pending(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    from azure.servicebus.exceptions import ServiceBusConnectionError

    [order_id] = await skipped_by_the_change_feed(world, container, clock, 1)
    clock.advance(MIN_AGE + timedelta(seconds=1))
    topic.fail_next_sends(lambda: ServiceBusConnectionError(message="namespace down"))

    failed = await world.watchdog.tick()
    assert not failed.succeeded and str(failed.error).startswith("RelayIncomplete")
    assert (await outbox_by_order(container))[order_id]["status"] == "pending"
    assert captured_relay.total("orders.relay.failed") == 1  # the failed-sends alert sees it
    # The failed run still reports what it read, and that it failed.
    [stuck] = captured_relay.points("orders.relay.stuck")
    assert (getattr(stuck, "sum", None), stuck.attributes) == (
        1,
        {"orders.topic": "order-events", "orders.relay.watchdog_end": "failed"},
    )

    assert (await world.watchdog.tick()).succeeded  # the next occurrence (no retry of its own)
    assert (await outbox_by_order(container))[order_id]["status"] == "dispatched"


async def test_a_bad_watchdog_setting_fails_the_run_naming_it(
    world: World,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world.compose(env={**world.env, WATCHDOG_MIN_AGE_SETTING: "5"})

    with caplog.at_level(logging.CRITICAL, logger="orders.relay"):
        result = await world.watchdog.tick()

    assert not result.succeeded
    assert str(result.error).startswith(f"ConfigurationError: {WATCHDOG_MIN_AGE_SETTING}")
    [critical] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical.setting == WATCHDOG_MIN_AGE_SETTING  # type: ignore[attr-defined]


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def outbox_document(name: str, age_s: float, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"{name}:OrderAccepted",
        "orderId": name,
        "type": "outbox",
        "eventType": "OrderAccepted",
        "status": "pending",
        "createdAt": document_timestamp(NOW - timedelta(seconds=age_s)),
        **fields,
    }


CANDIDATES = [
    outbox_document("old-pending", 3600),
    outbox_document("just-stuck", 300),  # exactly the minimum age: stuck
    outbox_document("young-pending", 299.999),
    outbox_document("old-dispatched", 3600, status="dispatched"),
    outbox_document("old-parked", 3600, status="parked"),
    outbox_document("a-cancellation", 3600, eventType="OrderCancelled"),  # every event type
    {
        "id": "inbox:orders:m-1",  # an inbox marker: never an outbox document
        "orderId": "an-order",
        "type": "inbox",
        "status": "pending",
        "createdAt": document_timestamp(NOW - timedelta(hours=2)),
    },
    {
        "id": "an-order",
        "orderId": "an-order",
        "type": "order",
        "status": "accepted",
        "acceptedAt": document_timestamp(NOW - timedelta(hours=2)),
    },
    outbox_document("oldest-pending", 86400),
]


@pytest.mark.parametrize("page_size", [500, 2], ids=["one page", "more than a page"])
async def test_the_store_s_query_finds_exactly_what_the_rule_calls_stuck(
    container: ContainerProxy, page_size: int
) -> None:
    for document in CANDIDATES:
        await container.create_item(document)
    policy = WatchdogPolicy(min_age_s=300, max_documents=page_size)
    expected = {d["id"] for d in CANDIDATES if policy.is_stuck(d, NOW)}
    assert expected == {
        "old-pending:OrderAccepted",
        "just-stuck:OrderAccepted",
        "a-cancellation:OrderAccepted",
        "oldest-pending:OrderAccepted",
    }

    pages = [
        page async for page in CosmosOutboxStore(container).stuck(policy.cutoff(NOW), page_size)
    ]

    found = [d["id"] for page in pages for d in page]
    assert sorted(found) == sorted(expected)
    assert [len(page) for page in pages] == ([4] if page_size == 500 else [2, 2])
    assert found[0] == "oldest-pending:OrderAccepted"  # oldest first: the run's oldest age


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (300, 500)),
        ({WATCHDOG_MIN_AGE_SETTING: "900", "OUTBOX_WATCHDOG_MAX_DOCUMENTS": "50"}, (900, 50)),
        ({WATCHDOG_MIN_AGE_SETTING: "59"}, WATCHDOG_MIN_AGE_SETTING),  # below the floor
        ({WATCHDOG_MIN_AGE_SETTING: "5m"}, WATCHDOG_MIN_AGE_SETTING),
        ({"OUTBOX_WATCHDOG_MAX_DOCUMENTS": "0"}, "OUTBOX_WATCHDOG_MAX_DOCUMENTS"),
    ],
)
def test_the_watchdog_settings_are_validated_naming_the_setting(
    env: dict[str, str], expected: tuple[int, int] | str
) -> None:
    if isinstance(expected, str):
        with pytest.raises(ConfigurationError) as raised:
            WatchdogSettings.from_env(env)
        assert raised.value.setting == expected
        return
    settings = WatchdogSettings.from_env(env)
    assert (settings.min_age_s, settings.max_documents) == expected


# ---- the cost of a run over a backlog (issue 25) ----------------------------------------------

BACKLOG_PAGE = 25  # OUTBOX_WATCHDOG_MAX_DOCUMENTS: a run publishes at most 20 pages, 500 events


async def stuck_backlog(
    container: ContainerProxy, clock: ManualClock, count: int, spacing_s: float = 1.0
) -> list[str]:
    """``count`` pending outbox documents, ``spacing_s`` apart up to now, the first one the
    oldest (as a relay that does not run at all leaves them); the ids oldest first."""
    ids = new_order_ids(count)
    start = clock.now() - timedelta(seconds=count * spacing_s)
    writes = asyncio.Semaphore(16)

    async def write(index: int, order_id: str) -> None:
        async with writes:
            accepted_at = start + timedelta(seconds=index * spacing_s)
            await accept_order(container, order_id, accepted_at=accepted_at)

    await asyncio.gather(*(write(index, order_id) for index, order_id in enumerate(ids)))
    return ids


async def test_one_run_over_a_backlog_loads_what_it_publishes_and_runs_no_aggregate(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1,500 stuck events, pages of 25: one run publishes the 500 oldest (its 20 pages) through
    the real SDK, and its queries load, as the azure-core transport sees them, no more than
    1.1 x what it publishes plus a page, with no COUNT or MIN: an aggregate's response says
    nothing of what it loaded, and over the pending documents it loads them all. Fails on
    95191bf, which ran a COUNT and a MIN after each page (42 aggregates a run here, each loading
    every pending document in Azure: createdAt was not indexed) and published in no order."""
    from bench.transport import CountingTransport

    transport = CountingTransport(connection_verify=False)
    world.compose(
        env={**world.env, "OUTBOX_WATCHDOG_MAX_DOCUMENTS": str(BACKLOG_PAGE)}, transport=transport
    )
    ids = await stuck_backlog(container, clock, 1_500)
    clock.advance(MIN_AGE)
    capacity = BACKLOG_PAGE * MAX_PAGES_PER_RUN

    with caplog.at_level(logging.WARNING, logger="orders.relay"):
        result = await world.watchdog.tick()

    assert result.succeeded, result.error
    queries = transport.queries
    assert [q.query for q in queries if q.aggregate] == []
    assert len(queries) <= MAX_PAGES_PER_RUN + 1  # one query, read page by page
    loaded = sum(q.documents for q in queries)
    assert capacity <= loaded <= 1.1 * capacity + BACKLOG_PAGE
    outbox = await outbox_by_order(container)
    published = sorted(m.message_id or "" for m in topic.delivered())
    assert published == sorted(outbox[i]["eventId"] for i in ids[:capacity])  # the oldest first
    assert {outbox[i]["status"] for i in ids[capacity:]} == {"pending"}
    # Its report: what it read, the oldest's age, and that it stopped at its page limit.
    [warning] = [r for r in caplog.records if hasattr(r, "stuck_outbox_documents")]
    assert warning.stuck_outbox_documents == capacity
    assert warning.oldest_stuck_age_s == MIN_AGE.total_seconds() + 1_500  # type: ignore[attr-defined]
    assert warning.watchdog_end == "page_limit"  # type: ignore[attr-defined]


async def test_runs_at_their_page_limit_drain_the_backlog_oldest_first(
    world: World,
    relay: object,
    container: ContainerProxy,
    topic: OrderEventsTopic,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three runs over 2.2 runs' worth: two stop at their page limit, the third drains the
    rest and says so; each run's oldest age is the oldest still pending when it starts."""
    world.compose(env={**world.env, "OUTBOX_WATCHDOG_MAX_DOCUMENTS": "5"})
    capacity = 5 * MAX_PAGES_PER_RUN
    ids = await stuck_backlog(container, clock, capacity * 2 + capacity // 5)
    clock.advance(MIN_AGE)

    with caplog.at_level(logging.WARNING, logger="orders.relay"):
        for _ in range(3):
            assert (await world.watchdog.tick()).succeeded

    warnings = [r for r in caplog.records if hasattr(r, "stuck_outbox_documents")]
    assert [
        (r.stuck_outbox_documents, r.watchdog_end, r.oldest_stuck_age_s)  # type: ignore[attr-defined]
        for r in warnings
    ] == [
        (capacity, "page_limit", MIN_AGE.total_seconds() + len(ids)),
        (capacity, "page_limit", MIN_AGE.total_seconds() + len(ids) - capacity),
        (capacity // 5, "drained", MIN_AGE.total_seconds() + len(ids) - 2 * capacity),
    ]
    outbox = await outbox_by_order(container)
    assert {d["status"] for d in outbox.values()} == {"dispatched"}
    assert topic.stats.accepted == len(ids)


@dataclass(frozen=True)
class StuckAgeRow:
    """One export interval's ``orders.relay.stuck_age`` row, as customMetrics holds it."""

    watchdog_end: str  # customDimensions["orders.relay.watchdog_end"]
    value_count: int
    value_max: float


def watchdog_behind_growth_s(rows: list[StuckAgeRow]) -> float:
    """relay-alerts.bicep's ``relayWatchdogBehindQuery`` over a window's rows, oldest first:
    ``GrowthS`` (the alert fires above 0)."""
    runs = sum(row.value_count for row in rows)
    at_page_limit = sum(row.value_count for row in rows if row.watchdog_end == "page_limit")
    if runs < 2 or at_page_limit != runs:
        return 0.0
    return rows[-1].value_max - rows[0].value_max


async def watchdog_rows(
    world: World, clock: ManualClock, reader: InMemoryMetricReader, runs: int, arrive: Any
) -> list[StuckAgeRow]:
    """``runs`` runs five minutes apart, ``arrive`` awaited before each; one export interval
    (a delta collection) per run, as the exporter's every minute would hold one run."""
    rows = []
    for _ in range(runs):
        await arrive()
        assert (await world.watchdog.tick()).succeeded
        data = reader.get_metrics_data()
        assert data is not None
        [point] = [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "orders.relay.stuck_age"
            for point in metric.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]
        end = str(point.attributes["orders.relay.watchdog_end"])  # type: ignore[index]
        rows.append(StuckAgeRow(end, point.count, point.max))
        clock.advance(timedelta(seconds=WATCHDOG_PERIOD_S))
    return rows


@pytest.mark.parametrize(
    ("spacing_s", "alert"), [(1.0, True), (6.0, False)], ids=["falling behind", "catching up"]
)
async def test_the_falling_behind_alert_reads_page_limit_runs_whose_oldest_age_rises(
    world: World,
    container: ContainerProxy,
    clock: ManualClock,
    spacing_s: float,
    alert: bool,
) -> None:
    """A dead relay, the watchdog's capacity 100 events a run (20 pages of 5), a backlog of 400
    and more arriving. One a second (300 a run) outgrows it: each run drains 100 s of orders in
    300 s, every run stops at its page limit and the oldest age rises (GrowthS > 0: the alert
    fires). One every 6 s (50 a run) does not: each run drains 600 s of orders, the oldest age
    falls run over run though every run is still at its limit (no alert). The rows are the
    exported histogram's, one delta collection per run."""
    reader = InMemoryMetricReader(preferred_temporality={Histogram: AggregationTemporality.DELTA})
    telemetry = RelayTelemetry("order-events", meter_provider=MeterProvider([reader]))
    world.compose(
        env={**world.env, "OUTBOX_WATCHDOG_MAX_DOCUMENTS": "5"}, relay_telemetry=telemetry
    )
    await stuck_backlog(container, clock, 400, spacing_s)
    clock.advance(MIN_AGE)

    async def arrive() -> None:  # the orders accepted since the last run
        await stuck_backlog(container, clock, round(WATCHDOG_PERIOD_S / spacing_s), spacing_s)

    rows = await watchdog_rows(world, clock, reader, 3, arrive)

    assert [row.watchdog_end for row in rows] == ["page_limit"] * 3
    assert (watchdog_behind_growth_s(rows) > 0) is alert
