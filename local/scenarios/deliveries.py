"""Deliveries, as every scenario troubles and counts them: ``Trouble`` (the host's
``on_delivery`` hook: a crash after the commit, a lock expiry) and ``OutcomeLog`` (one consumer's
structured outcome log records, counted: the telemetry an operator sees), and ``quiet_logs``
(those records to the counters, not the console), and ``ExportedCounters`` (a consumer's
business counters as its telemetry exports them). Used by the orders, the inventory and the
lifecycle alike; imports no scenario."""

from __future__ import annotations

import contextlib
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from local.standins.broker import Delivery, PeekLockQueue
from local.standins.settlement_server import SettlementServer
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.names import (
    ATTR_CONSUMER,
    DEFAULT_CONSUMER,
    LOGGER_NAME,
    RELAY_LOGGER_NAME,
)

ORDERS_CONSUMER = DEFAULT_CONSUMER  # consume_order's kit name (the telemetry's orders.consumer)


class OutcomeLog(logging.Handler):
    """One consumer's structured log records, counted: the telemetry an operator sees. Every
    consumer of the app logs to the same logger; a record says whose it is (``orders.consumer``,
    ``shared.telemetry.consumer``)."""

    def __init__(self, consumer: str = ORDERS_CONSUMER) -> None:
        super().__init__(logging.INFO)
        self.consumer = consumer
        self.outcomes: Counter[str] = Counter()
        self.settlement_failures = 0
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, ATTR_CONSUMER, DEFAULT_CONSUMER) != self.consumer:
            return
        if hasattr(record, "settlement_error"):
            self.settlement_failures += 1
        elif hasattr(record, "attempt_outcome"):
            self.retries += 1
        elif isinstance(getattr(record, "outcome", None), str):
            self.outcomes[record.outcome] += 1  # type: ignore[attr-defined]


@dataclass
class Trouble:
    """The host's ``on_delivery`` hook: on the first delivery of a message it picks, a crash
    after the commit (the settlement never reaches the broker: the lock lapses and the message
    comes back) or a lock expiry (a second delivery starts at once, concurrently). Counts the
    deliveries of each message."""

    queue: PeekLockQueue
    settlement: SettlementServer
    crash: Callable[[str], bool]
    lock_expiry: Callable[[str], bool]
    on_settled: Callable[[], None] = lambda: None
    deliveries: Counter[str] = field(default_factory=Counter)
    _troubled: set[str] = field(default_factory=set)

    async def __call__(self, delivery: Delivery, invoke: Callable[[], Awaitable[None]]) -> None:
        message_id = delivery.message.message_id or ""
        self.deliveries[message_id] += 1
        if delivery.delivery_count == 1 and message_id not in self._troubled:
            if self.crash(message_id):
                self._troubled.add(message_id)
                self.settlement.servicer.lost_settlements.add(delivery.lock_token)
            elif self.lock_expiry(message_id):
                self._troubled.add(message_id)
                self.queue.expire_lock(delivery.lock_token)  # a second delivery starts now
        await invoke()
        self.on_settled()

    def spread(self) -> Counter[int]:
        """Deliveries -> how many messages had that many."""
        return Counter(count for message_id, count in self.deliveries.items() if message_id)


def drawn(seed: int, kind: str, rate: float) -> Callable[[str], bool]:
    """A message's share of trouble, drawn from the seed and its MessageId alone (the relay
    publishes the events in an order the trouble must not depend on)."""
    return lambda message_id: random.Random(f"{seed}-{kind}-{message_id}").random() < rate


def settled_for_good(queue: PeekLockQueue) -> int:
    stats = queue.stats
    return stats.completed + stats.dead_lettered


@contextlib.contextmanager
def quiet_logs(*handlers: logging.Handler) -> Iterator[None]:
    """The consumers' outcome records go to ``handlers`` (counted), the relay's injected
    failures nowhere: the tables tell the story, no log spam on the console."""
    consumer_logger, relay_logger = (
        logging.getLogger(LOGGER_NAME),
        logging.getLogger(RELAY_LOGGER_NAME),
    )
    quiet_relay = logging.NullHandler()
    for handler in handlers:
        consumer_logger.addHandler(handler)
    consumer_logger.setLevel(logging.INFO)
    consumer_logger.propagate = False
    relay_logger.propagate = False
    relay_logger.addHandler(quiet_relay)
    try:
        yield
    finally:
        for handler in handlers:
            consumer_logger.removeHandler(handler)
        consumer_logger.propagate = True
        relay_logger.propagate = True
        relay_logger.removeHandler(quiet_relay)


class ExportedCounters:
    """A consumer's counters as its telemetry exports them: an SDK meter provider with an
    in-memory reader, composed in as the consumer's telemetry (``World.compose``'s
    ``stock_telemetry``, ``payment_telemetry``)."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def telemetry(self, topic: str, subscription: str, consumer: str) -> ConsumerTelemetry:
        return ConsumerTelemetry(
            topic, meter_provider=self.provider, subscription=subscription, consumer=consumer
        )

    def total(self, metric: str, consumer: str) -> int:
        """The counter ``metric``'s total for ``consumer`` (``orders.consumer``)."""
        exported = self.reader.get_metrics_data()
        total = 0
        for resource in exported.resource_metrics if exported else []:
            for scope in resource.scope_metrics:
                for found in scope.metrics:
                    if found.name != metric:
                        continue
                    for point in found.data.data_points:
                        attributes = point.attributes or {}
                        if isinstance(point, NumberDataPoint) and (
                            attributes.get(ATTR_CONSUMER) == consumer
                        ):
                            total += int(point.value)
        return total
