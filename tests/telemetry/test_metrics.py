"""The metrics the alert rules and KQL use: names, units, one data point per attribute set, and
no identifier in any attribute."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import Meter
from opentelemetry.sdk.metrics.export import HistogramDataPoint, NumberDataPoint

from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.host import LocalFunctionsHost
from tests.orders import message, order_body
from tests.telemetry.conftest import (
    Captured,
    InstallConsumer,
    deliver_twice,
    make_captured,
)

IDENTIFIERS = {"ord-1001", "ord-9", "corr-1", "cust-42"}
# Bounded by construction: message_type is one of the known types or "other"; the consumer is
# one of the app's consumers, fixed per ConsumerTelemetry.
ALLOWED_ATTRIBUTE_KEYS = {"orders.consumer", "outcome", "settlement", "operation", "message_type"}
ORDERS = ("orders.consumer", "orders")


def by_attributes(points: list[NumberDataPoint | HistogramDataPoint]) -> dict[Any, Any]:
    return {tuple(sorted((point.attributes or {}).items())): point for point in points}


def counter_values(captured: Captured) -> dict[tuple[str, str], float]:
    values: dict[tuple[str, str], float] = {}
    for point in captured.points("orders.messages"):
        assert isinstance(point, NumberDataPoint)
        attributes = dict(point.attributes or {})
        assert set(attributes) == {"orders.consumer", "outcome", "settlement", "message_type"}
        assert attributes["orders.consumer"] == "orders"  # every point of the queue's consumer
        assert attributes["message_type"] == "OrderPlaced"  # every message here is one
        values[(str(attributes["outcome"]), str(attributes["settlement"]))] = point.value
    return values


async def deliver_four_outcomes(
    host: LocalFunctionsHost, queue: PeekLockQueue, clock: ManualClock
) -> None:
    """processed, duplicate, mismatch (dead-letter), invalid (dead-letter)."""
    await deliver_twice(host, queue, clock)
    clock.advance(queue.settings.duplicate_detection_window)
    changed = order_body()
    changed["lines"][0]["quantity"] = 3
    queue.send(message(changed))
    await host.run_until_idle()
    queue.send(message(order_body(), message_id="ord-9"))  # MessageId differs from orderId
    await host.run_until_idle()


async def test_one_data_point_per_outcome_and_settlement(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    clock: ManualClock,
) -> None:
    await deliver_four_outcomes(telemetry_host, queue, clock)

    assert counter_values(captured) == {
        ("processed", "complete"): 1,
        ("duplicate", "complete"): 1,
        ("mismatch", "deadletter"): 1,
        ("invalid", "deadletter"): 1,
    }
    durations = by_attributes(captured.points("orders.processing.duration"))
    assert set(durations) == {
        (ORDERS, ("outcome", outcome))
        for outcome in ("processed", "duplicate", "mismatch", "invalid")
    }
    for point in durations.values():
        assert isinstance(point, HistogramDataPoint)
        assert point.count == 1
        assert 0 < point.sum < 5  # seconds, not milliseconds
        assert point.explicit_bounds[0] < 0.01  # bucket advice for seconds
    delivery_counts = by_attributes(captured.points("orders.delivery_count"))
    assert {key: (point.count, point.sum) for key, point in delivery_counts.items()} == {
        (ORDERS, ("outcome", outcome)): (1, 1)
        for outcome in ("processed", "duplicate", "mismatch", "invalid")
    }


async def test_no_metric_attribute_carries_an_identifier(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    clock: ManualClock,
) -> None:
    await deliver_four_outcomes(telemetry_host, queue, clock)

    metrics = list(captured.metrics())
    assert {metric.name for metric in metrics} == {
        "orders.messages",
        "orders.processing.duration",
        "orders.cosmos.request_charge",
        "orders.delivery_count",
    }
    for metric in metrics:
        for point in metric.data.data_points:
            attributes = dict(point.attributes or {})
            assert set(attributes) <= ALLOWED_ATTRIBUTE_KEYS, metric.name
            assert not IDENTIFIERS & {str(value) for value in attributes.values()}, metric.name


async def test_units_are_the_documented_ones(
    telemetry_host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    clock: ManualClock,
) -> None:
    await deliver_four_outcomes(telemetry_host, queue, clock)

    assert {metric.name: metric.unit for metric in captured.metrics()} == {
        "orders.messages": "{message}",
        "orders.processing.duration": "s",
        "orders.cosmos.request_charge": "{request_unit}",
        "orders.delivery_count": "{delivery}",
    }


async def test_request_charge_gets_a_point_per_cosmos_operation(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured, clock: ManualClock
) -> None:
    await deliver_twice(telemetry_host, queue, clock)

    charges = by_attributes(captured.points("orders.cosmos.request_charge"))
    # New order: one transactional batch. Duplicate: the conflicting batch (its charge is read
    # from the error's headers) and the point read.
    assert {key: point.count for key, point in charges.items()} == {
        (("operation", "batch"), ORDERS): 2,
        (("operation", "read"), ORDERS): 1,
    }
    assert all(point.sum > 0 for point in charges.values())
    processed, duplicate = captured.consumer_spans()
    assert processed.attributes is not None
    assert duplicate.attributes is not None
    batch, read = (
        charges[(("operation", "batch"), ORDERS)],
        charges[(("operation", "read"), ORDERS)],
    )
    processed_charge = processed.attributes["orders.cosmos.request_charge"]
    duplicate_charge = duplicate.attributes["orders.cosmos.request_charge"]
    assert isinstance(processed_charge, float)
    assert isinstance(duplicate_charge, float)
    assert processed_charge + duplicate_charge == pytest.approx(batch.sum + read.sum)
    assert duplicate_charge > read.sum  # the conflicting batch was charged too


async def test_request_charge_of_a_single_create_without_outbox(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    captured: Captured,
    install_consumer: InstallConsumer,
    app_env: dict[str, str],
) -> None:
    app_env["OUTBOX_ENABLED"] = "false"
    install_consumer()
    queue.send(message(order_body()))

    await host.run_until_idle()

    charges = by_attributes(captured.points("orders.cosmos.request_charge"))
    assert {key: point.count for key, point in charges.items()} == {
        (("operation", "create"), ORDERS): 1
    }


async def test_a_failed_settlement_counts_as_settlement_none(
    telemetry_host: LocalFunctionsHost, queue: PeekLockQueue, captured: Captured
) -> None:
    queue.send(message(order_body()))
    [delivery] = queue.receive(1)
    queue.expire_lock(delivery.lock_token)
    await telemetry_host.invoke(delivery)
    await telemetry_host.run_until_idle()  # the redelivery: a duplicate, completed

    assert counter_values(captured) == {
        ("processed", "none"): 1,
        ("duplicate", "complete"): 1,
    }
    delivery_counts = by_attributes(captured.points("orders.delivery_count"))
    duplicate = delivery_counts[(ORDERS, ("outcome", "duplicate"))]
    assert isinstance(duplicate, HistogramDataPoint)
    assert (duplicate.count, duplicate.sum) == (1, 2)  # the second delivery


async def test_instruments_are_created_once_not_per_message(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    install_consumer: InstallConsumer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created: list[str] = []
    for method in ("create_counter", "create_histogram"):
        original = getattr(Meter, method)

        def spy(
            self: Meter, name: str, *args: Any, _original: Any = original, **kwargs: Any
        ) -> Any:
            created.append(name)
            return _original(self, name, *args, **kwargs)

        monkeypatch.setattr(Meter, method, spy)
    fresh = make_captured()
    assert len(created) == 10  # the consumer's five, and the five business counters
    install_consumer(telemetry=fresh.telemetry)

    for order_id in ("ord-1", "ord-2", "ord-3"):
        queue.send(message(order_body(order_id), message_id=order_id))
    await host.run_until_idle()

    assert sorted(created) == sorted(
        [
            "orders.messages",
            "orders.processing.duration",
            "orders.cosmos.request_charge",
            "orders.retries",
            "orders.delivery_count",
            "orders.stock.shortfall",
            "orders.payments.reconciliation_needed",
            "orders.payments.declined",
            "orders.payments.refused",
            "orders.payments.payer_changed",
        ]
    )
    assert counter_values(fresh) == {("processed", "complete"): 3}
