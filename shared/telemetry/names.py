"""Every name the app's telemetry exports: span, attribute, metric, logger and scope names, and
the values operators filter on. They are the contract of the KQL queries, alert rules and
workbook in ``infra/`` and of docs/operations.md: change them together
(``tests/telemetry/test_envelopes.py`` holds each name read in infra/ against what the real
exporter sends).

Span attributes follow the OpenTelemetry messaging semantic conventions (``messaging.*``, as of
semconv 1.27+: ``messaging.operation.type``, ``messaging.message.conversation_id``,
``messaging.servicebus.*``). The Azure Monitor exporter drops attributes with the standard
prefixes (``messaging.``, ``db.``, ``http.`` ...) and ``error.type`` from ``customDimensions``, so
every field an operator filters on is ALSO set under a kept ``orders.*`` name
(``orders.message_id``, ``orders.delivery_count`` ...).

The app runs several consumers of the kit (names.md: ``orders``, ``stock-reservation``,
``payment-capture``): they share the consumer's span and metric names, told apart by
``orders.consumer``; their business counts are the counters of ``BUSINESS_MEASURES``.

Names only: no import, no behaviour.
"""

from __future__ import annotations

# ---- the consumer -----------------------------------------------------------------------------

INSTRUMENTATION_SCOPE = "orders.consumer"
LOGGER_NAME = "orders.consumer"
# The distro's logging handler goes on this logger: our records only, not every library's.
EXPORTED_LOGGER_NAME = "orders"

# Span names and attributes (semconv messaging, Azure Service Bus).
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
ATTR_ERROR_TYPE = "error.type"
# The kept copies of the semconv fields operators filter on (the exporter drops the originals).
ATTR_KEPT_QUEUE = "orders.queue"  # a queue consumer's destination
# A subscription consumer's topic; the relay's publish spans and metrics carry it too.
ATTR_TOPIC = "orders.topic"
ATTR_KEPT_SUBSCRIPTION = "orders.subscription"
ATTR_KEPT_MESSAGE_ID = "orders.message_id"
ATTR_KEPT_CORRELATION_ID = "orders.correlation_id"
ATTR_KEPT_DELIVERY_COUNT = "orders.delivery_count"
ATTR_KEPT_ERROR_TYPE = "orders.error_type"
# Which of the app's consumers handled the delivery: the kit's consumer name (part of every inbox
# marker key), on the consumer span, every consumer metric point and every consumer log record.
# Data written before it existed has none: queries read an empty value as DEFAULT_CONSUMER.
ATTR_CONSUMER = "orders.consumer"
DEFAULT_CONSUMER = "orders"
# Ours: what the consumer decided, in the vocabulary of docs/orders.md ("Outcomes and settlement")
# and the metrics.
ATTR_ORDER_ID = "orders.order_id"
ATTR_OUTCOME = "orders.outcome"
ATTR_SETTLEMENT = "orders.settlement"
ATTR_ATTEMPTS = "orders.attempts"
ATTR_DEADLETTER_REASON = "orders.deadletter_reason"
ATTR_REQUEST_CHARGE = "orders.cosmos.request_charge"
# The order lifecycle: the message's type (bounded: MESSAGE_TYPES, else OTHER_MESSAGE_TYPE), its
# order version and, for a stale one, the stored version it lost to.
ATTR_MESSAGE_TYPE = "orders.message_type"
ATTR_ORDER_VERSION = "orders.order_version"
ATTR_STORED_VERSION = "orders.stored_version"
# (The order-events subscriptions read OrderAccepted, OrderAmended and OrderCancelled.)
MESSAGE_TYPES = frozenset({"OrderPlaced", "OrderAccepted", "OrderAmended", "OrderCancelled"})
OTHER_MESSAGE_TYPE = "other"

# Metric names: the alert rules and KQL in infra/ query these.
METRIC_MESSAGES = "orders.messages"
METRIC_DURATION = "orders.processing.duration"
METRIC_REQUEST_CHARGE = "orders.cosmos.request_charge"
METRIC_DELIVERY_COUNT = "orders.delivery_count"
METRIC_RETRIES = "orders.retries"
METRIC_SETTLEMENT_HUNG = "orders.settlement.hung"
# The settlement attribute when the settlement call itself failed (lock lost, host gone).
NOT_SETTLED = "none"

# The consumers' business counts (``Decision.measures``), each exported as the counter
# ``orders.<measure>`` with ATTR_CONSUMER. Only these: a measure not listed is not exported (a
# metric name is a time series for good), and logged once.
METRIC_STOCK_SHORTFALL = "orders.stock.shortfall"  # units not reserved for lack of stock
# Events parked (dead-lettered NeedsReconciliation) until an operator reconciles the payment.
METRIC_PAYMENTS_RECONCILIATION_NEEDED = "orders.payments.reconciliation_needed"
METRIC_PAYMENTS_DECLINED = "orders.payments.declined"  # a business outcome: processed, completed
# A request the provider refused as wrong (a refund above what it holds): recorded, completed.
METRIC_PAYMENTS_REFUSED = "orders.payments.refused"
# An amendment naming another payer once money moved: dead-lettered PayerChanged for a person.
METRIC_PAYMENTS_PAYER_CHANGED = "orders.payments.payer_changed"
BUSINESS_MEASURES = {
    "stock.shortfall": METRIC_STOCK_SHORTFALL,
    "payments.reconciliation_needed": METRIC_PAYMENTS_RECONCILIATION_NEEDED,
    "payments.declined": METRIC_PAYMENTS_DECLINED,
    "payments.refused": METRIC_PAYMENTS_REFUSED,
    "payments.payer_changed": METRIC_PAYMENTS_PAYER_CHANGED,
}

# ---- the outbox relay and its watchdog --------------------------------------------------------


RELAY_INSTRUMENTATION_SCOPE = "orders.relay"
RELAY_LOGGER_NAME = "orders.relay"
RELAY_OPERATION_TYPE = "send"
ATTR_EVENT_ID = "orders.event_id"
ATTR_RELAY_OUTCOME = "orders.relay.outcome"
METRIC_RELAY_PUBLISHED = "orders.relay.published"
METRIC_RELAY_FAILED = "orders.relay.failed"
METRIC_RELAY_PARKED = "orders.relay.parked"
METRIC_RELAY_LAG = "orders.relay.lag"
# The outbox watchdog's (shared/relay/watchdog.py): one observation per run, so that a run that
# finds
# nothing still reports (valueCount = runs: the alert reads a silent watchdog as stuck too).
METRIC_RELAY_STUCK = "orders.relay.stuck"
METRIC_RELAY_STUCK_AGE = "orders.relay.stuck_age"
# How the run ended (``shared.relay.watchdog.RunEnd``), on both: "page_limit" runs whose oldest
# age rises are a backlog growing faster than the watchdog drains (its alert).
ATTR_WATCHDOG_END = "orders.relay.watchdog_end"
WATCHDOG_DRAINED = "drained"
WATCHDOG_PAGE_LIMIT = "page_limit"
WATCHDOG_FAILED = "failed"
RELAY_PUBLISHED = "published"
RELAY_FAILED = "failed"
RELAY_PARKED = "parked"

# ---- the orders API ---------------------------------------------------------------------------

# The orders API's (shared/edge, shared/telemetry/edge.py): one SERVER span per request, named
# "<method> <route>" (the HTTP semantic conventions), a request counter and a replay-age
# histogram. The route and outcome vocabularies are shared.edge.observer's (Route,
# RequestOutcome).
EDGE_INSTRUMENTATION_SCOPE = "orders.edge"
EDGE_LOGGER_NAME = "orders.edge"
ATTR_HTTP_METHOD = "http.request.method"
ATTR_HTTP_ROUTE = "http.route"
ATTR_HTTP_STATUS_CODE = "http.response.status_code"
# Kept (the exporter drops http.*): on the span, every metric point and every log record.
ATTR_EDGE_ROUTE = "orders.edge.route"  # place | amend | cancel | get
ATTR_EDGE_OUTCOME = "orders.edge.outcome"
ATTR_EDGE_STATUS_CODE = "orders.edge.status_code"
# A replay's record age (now - startedAt), seconds, on its span (Q22 ranks it: percentilesw).
ATTR_EDGE_RECORD_AGE = "orders.edge.record_age_s"
METRIC_EDGE_REQUESTS = "orders.edge.requests"
METRIC_EDGE_REPLAY_AGE = "orders.edge.replay_age"

# ---- the request completer --------------------------------------------------------------------

# The public edge's request completer (shared/edge/completer.py, ``complete_requests``): it sends
# the messages of request records committed but never sent, every minute.
COMPLETER_INSTRUMENTATION_SCOPE = "orders.edge.completer"
COMPLETER_LOGGER_NAME = "orders.edge.completer"
# One observation per run of each histogram, the quiet runs too (valueCount = runs): the found
# records and the oldest one's age (now - startedAt, 0 when none). The "oldest unsent request"
# alert reads the age; a completer that stopped reporting is read as silent.
METRIC_COMPLETER_FOUND = "orders.edge.completer.found"
METRIC_COMPLETER_UNSENT_AGE = "orders.edge.completer.unsent_age"
# Counters: the messages the completer sent, and the records it left unsent (by error.type).
METRIC_COMPLETER_SENT = "orders.edge.completer.sent"
METRIC_COMPLETER_FAILED = "orders.edge.completer.failed"
# How the run ended (``shared.edge.completer.RunEnd``: drained, page_limit, failed), on both
# histograms.
ATTR_COMPLETER_END = "orders.edge.completer_end"
