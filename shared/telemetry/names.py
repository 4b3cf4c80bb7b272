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

Names only, no behaviour: the consumer's are the kit's ``TelemetryNames`` in the ``orders``
namespace.
"""

from __future__ import annotations

# The semconv names, the same in every namespace: the kit's, re-exported for the app's modules.
from idempotent_consumer.telemetry import (
    ATTR_CONVERSATION_ID as ATTR_CONVERSATION_ID,
)
from idempotent_consumer.telemetry import (
    ATTR_DELIVERY_COUNT as ATTR_DELIVERY_COUNT,
)
from idempotent_consumer.telemetry import (
    ATTR_DESTINATION as ATTR_DESTINATION,
)
from idempotent_consumer.telemetry import (
    ATTR_DISPOSITION as ATTR_DISPOSITION,
)
from idempotent_consumer.telemetry import ATTR_ERROR_TYPE as KIT_ATTR_ERROR_TYPE
from idempotent_consumer.telemetry import (
    ATTR_MESSAGE_ID as ATTR_MESSAGE_ID,
)
from idempotent_consumer.telemetry import (
    ATTR_OPERATION_NAME as ATTR_OPERATION_NAME,
)
from idempotent_consumer.telemetry import (
    ATTR_OPERATION_TYPE as ATTR_OPERATION_TYPE,
)
from idempotent_consumer.telemetry import (
    ATTR_SUBSCRIPTION as ATTR_SUBSCRIPTION,
)
from idempotent_consumer.telemetry import (
    ATTR_SYSTEM as ATTR_SYSTEM,
)
from idempotent_consumer.telemetry import (
    MESSAGING_SYSTEM as MESSAGING_SYSTEM,
)
from idempotent_consumer.telemetry import (
    NOT_SETTLED as NOT_SETTLED,
)
from idempotent_consumer.telemetry import (
    OPERATION_TYPE as OPERATION_TYPE,
)
from idempotent_consumer.telemetry import (
    OTHER_MESSAGE_TYPE as OTHER_MESSAGE_TYPE,
)
from idempotent_consumer.telemetry import (
    BusinessCounter,
    TelemetryNames,
)

# ---- the consumer -----------------------------------------------------------------------------
# The kit's consumer telemetry (``idempotent_consumer.telemetry``) in the ``orders`` namespace:
# each name below is the kit's, spelled out here because infra/ and the docs read them.

CONSUMER_NAMES = TelemetryNames("orders")
INSTRUMENTATION_SCOPE = CONSUMER_NAMES.instrumentation_scope  # "orders.consumer"
LOGGER_NAME = CONSUMER_NAMES.logger_name  # "orders.consumer"
# The distro's logging handler goes on this logger: our records only, not every library's.
EXPORTED_LOGGER_NAME = "orders"

# Span names and attributes (semconv messaging, Azure Service Bus): the kit's.
ATTR_ERROR_TYPE = KIT_ATTR_ERROR_TYPE
# The kept copies of the semconv fields operators filter on (the exporter drops the originals).
ATTR_KEPT_QUEUE = CONSUMER_NAMES.kept_queue  # "orders.queue": a queue consumer's destination
# A subscription consumer's topic; the relay's publish spans and metrics carry it too.
ATTR_TOPIC = CONSUMER_NAMES.topic  # "orders.topic"
ATTR_KEPT_SUBSCRIPTION = CONSUMER_NAMES.kept_subscription
ATTR_KEPT_MESSAGE_ID = CONSUMER_NAMES.kept_message_id
ATTR_KEPT_CORRELATION_ID = CONSUMER_NAMES.kept_correlation_id
ATTR_KEPT_DELIVERY_COUNT = CONSUMER_NAMES.kept_delivery_count
ATTR_KEPT_ERROR_TYPE = CONSUMER_NAMES.kept_error_type  # "orders.error_type"
# Which of the app's consumers handled the delivery: the kit's consumer name (part of every inbox
# marker key), on the consumer span, every consumer metric point and every consumer log record.
# Data written before it existed has none: queries read an empty value as DEFAULT_CONSUMER.
ATTR_CONSUMER = CONSUMER_NAMES.consumer  # "orders.consumer"
DEFAULT_CONSUMER = "orders"
# Ours: what the consumer decided, in the vocabulary of docs/orders.md ("Outcomes and settlement")
# and the metrics.
ATTR_ORDER_ID = CONSUMER_NAMES.order_id
ATTR_OUTCOME = CONSUMER_NAMES.outcome
ATTR_SETTLEMENT = CONSUMER_NAMES.settlement
ATTR_ATTEMPTS = CONSUMER_NAMES.attempts
ATTR_DEADLETTER_REASON = CONSUMER_NAMES.deadletter_reason
ATTR_REQUEST_CHARGE = CONSUMER_NAMES.request_charge  # "orders.cosmos.request_charge"
# The order lifecycle: the message's type (bounded: MESSAGE_TYPES, else OTHER_MESSAGE_TYPE), its
# order version and, for a stale one, the stored version it lost to.
ATTR_MESSAGE_TYPE = CONSUMER_NAMES.message_type
ATTR_ORDER_VERSION = CONSUMER_NAMES.order_version
ATTR_STORED_VERSION = CONSUMER_NAMES.stored_version
# (The order-events subscriptions read OrderAccepted, OrderAmended and OrderCancelled.)
MESSAGE_TYPES = frozenset({"OrderPlaced", "OrderAccepted", "OrderAmended", "OrderCancelled"})

# Metric names: the alert rules and KQL in infra/ query these.
METRIC_MESSAGES = CONSUMER_NAMES.metric_messages  # "orders.messages"
METRIC_DURATION = CONSUMER_NAMES.metric_duration  # "orders.processing.duration"
METRIC_REQUEST_CHARGE = CONSUMER_NAMES.metric_request_charge  # "orders.cosmos.request_charge"
METRIC_DELIVERY_COUNT = CONSUMER_NAMES.metric_delivery_count  # "orders.delivery_count"
METRIC_RETRIES = CONSUMER_NAMES.metric_retries  # "orders.retries"
METRIC_SETTLEMENT_HUNG = CONSUMER_NAMES.metric_settlement_hung  # "orders.settlement.hung"

# The consumers' business counts (``Decision.measures``), each exported as the counter
# ``orders.<measure>`` with ATTR_CONSUMER. Only these: a measure not listed is not exported (a
# metric name is a time series for good), and logged once.
BUSINESS_COUNTERS = {
    # units not reserved for lack of stock
    "stock.shortfall": BusinessCounter(
        "{unit}", "Units not reserved for lack of stock, by consumer"
    ),
    # Events parked (dead-lettered NeedsReconciliation) until an operator reconciles the payment.
    "payments.reconciliation_needed": BusinessCounter(
        "{event}", "Events parked until an operator reconciles the payment, by consumer"
    ),
    # a business outcome: processed, completed
    "payments.declined": BusinessCounter(
        "{payment}", "Payments the provider declined, by consumer"
    ),
    # A request the provider refused as wrong (a refund above what it holds): recorded, completed.
    "payments.refused": BusinessCounter(
        "{payment}", "Payment requests the provider refused, by consumer"
    ),
    # An amendment naming another payer once money moved: dead-lettered PayerChanged for a person.
    "payments.payer_changed": BusinessCounter(
        "{event}",
        "Amendments naming another payer once money moved, sent to a person, by consumer",
    ),
}
BUSINESS_MEASURES = {
    measure: CONSUMER_NAMES.metric_of_measure(measure) for measure in BUSINESS_COUNTERS
}
METRIC_STOCK_SHORTFALL = BUSINESS_MEASURES["stock.shortfall"]
METRIC_PAYMENTS_RECONCILIATION_NEEDED = BUSINESS_MEASURES["payments.reconciliation_needed"]
METRIC_PAYMENTS_DECLINED = BUSINESS_MEASURES["payments.declined"]
METRIC_PAYMENTS_REFUSED = BUSINESS_MEASURES["payments.refused"]
METRIC_PAYMENTS_PAYER_CHANGED = BUSINESS_MEASURES["payments.payer_changed"]

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
