"""Every name a consumer's telemetry exports, under one namespace an app chooses (its metrics,
kept attributes, logger and instrumentation scope: ``<namespace>.messages``,
``<namespace>.message_id`` ...). They are the contract of an app's queries, alerts and
dashboards: a namespace, once deployed, is for good.

Span attributes follow the OpenTelemetry messaging semantic conventions (``messaging.*``, as of
semconv 1.27+: ``messaging.operation.type``, ``messaging.message.conversation_id``,
``messaging.servicebus.*``). The Azure Monitor exporter drops attributes with the standard
prefixes (``messaging.``, ``db.``, ``http.`` ...) and ``error.type`` from ``customDimensions``, so
every field an operator filters on is ALSO set under a kept ``<namespace>.*`` name.

Names only: no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

# Span names and attributes (semconv messaging, Azure Service Bus): the same in every namespace.
MESSAGING_SYSTEM = "servicebus"
OPERATION_TYPE = "process"
ATTR_SYSTEM = "messaging.system"
ATTR_OPERATION_TYPE = "messaging.operation.type"
ATTR_OPERATION_NAME = "messaging.operation.name"
ATTR_DESTINATION = "messaging.destination.name"  # the queue, or the topic of a subscription
ATTR_SUBSCRIPTION = "messaging.destination.subscription.name"  # the subscription, if any
ATTR_MESSAGE_ID = "messaging.message.id"
ATTR_CONVERSATION_ID = "messaging.message.conversation_id"
ATTR_DELIVERY_COUNT = "messaging.servicebus.message.delivery_count"
ATTR_DISPOSITION = "messaging.servicebus.disposition_status"
# The settlement attribute when the settlement call itself failed (lock lost, host gone).
NOT_SETTLED = "none"
# A message type outside the consumer's bounded list (a metric attribute must stay bounded).
OTHER_MESSAGE_TYPE = "other"
DEFAULT_NAMESPACE = "idempotent_consumer"


@dataclass(frozen=True, slots=True)
class TelemetryNames:
    """The exported names of one namespace (default ``idempotent_consumer``)."""

    namespace: str = DEFAULT_NAMESPACE

    def _name(self, suffix: str) -> str:
        return f"{self.namespace}.{suffix}"

    # Where the records come from.
    @property
    def instrumentation_scope(self) -> str:
        return self._name("consumer")

    @property
    def logger_name(self) -> str:
        return self._name("consumer")

    # Kept copies of the semconv fields operators filter on (the exporter drops the originals).
    @property
    def kept_queue(self) -> str:
        return self._name("queue")

    @property
    def topic(self) -> str:
        return self._name("topic")

    @property
    def kept_subscription(self) -> str:
        return self._name("subscription")

    @property
    def kept_message_id(self) -> str:
        return self._name("message_id")

    @property
    def kept_correlation_id(self) -> str:
        return self._name("correlation_id")

    @property
    def kept_delivery_count(self) -> str:
        return self._name("delivery_count")

    @property
    def kept_error_type(self) -> str:
        return self._name("error_type")

    # Which consumer handled the delivery: its name, part of every inbox marker key.
    @property
    def consumer(self) -> str:
        return self._name("consumer")

    # What the consumer decided.
    @property
    def order_id(self) -> str:
        return self._name("order_id")

    @property
    def outcome(self) -> str:
        return self._name("outcome")

    @property
    def settlement(self) -> str:
        return self._name("settlement")

    @property
    def attempts(self) -> str:
        return self._name("attempts")

    @property
    def attempt(self) -> str:
        return self._name("attempt")

    @property
    def deadletter_reason(self) -> str:
        return self._name("deadletter_reason")

    @property
    def request_charge(self) -> str:
        return self._name("cosmos.request_charge")

    @property
    def message_type(self) -> str:
        return self._name("message_type")

    @property
    def order_version(self) -> str:
        return self._name("order_version")

    @property
    def stored_version(self) -> str:
        return self._name("stored_version")

    # Metrics.
    @property
    def metric_messages(self) -> str:
        return self._name("messages")

    @property
    def metric_duration(self) -> str:
        return self._name("processing.duration")

    @property
    def metric_request_charge(self) -> str:
        return self._name("cosmos.request_charge")

    @property
    def metric_delivery_count(self) -> str:
        return self._name("delivery_count")

    @property
    def metric_retries(self) -> str:
        return self._name("retries")

    @property
    def metric_settlement_hung(self) -> str:
        return self._name("settlement.hung")

    def metric_of_measure(self, measure: str) -> str:
        """A business count (``Decision.measures``) as its counter: ``<namespace>.<measure>``."""
        return self._name(measure)


@dataclass(frozen=True, slots=True)
class BusinessCounter:
    """How one business count (a ``Decision.measures`` key) is exported: its counter's unit and
    description (its name is ``TelemetryNames.metric_of_measure``)."""

    unit: str
    description: str
