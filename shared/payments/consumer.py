"""The payment capture consumer, as the kit takes it: its name, its contract, its partition (the
order's) and its effect, a call to the payment provider made once (``shared.kit.external``).
Everything else (the in-progress record, the marker, the retry, the classification, the
settlement, the telemetry) is the kit's.

For every order, whatever the arrival order, duplicates, stops between the call and the
completed record, lock expiries and concurrent deliveries, the provider's captures minus refunds
equal the total of its highest version (zero once cancelled), unless the provider declined or
refused that version's call (recorded, counted). No Azure imports.
"""

from __future__ import annotations

from idempotent_consumer import CallingConsumerDefinition, ValidEvent

from shared.payments.capture import DEFAULT_CLOCK_SKEW_S, CapturePayment
from shared.payments.contract import parse_event
from shared.payments.provider import PaymentProvider

# Part of every marker's key and of every idempotency key sent to the provider: never rename it
# (a retained or replayed event would be charged again under new keys).
CONSUMER_NAME = "payment-capture"
PARTITION_FIELD = "orderId"
# An inconclusive call (a provider that honours no key and cannot say yet) is parked after this
# many deliveries: lockDuration x 3 of retries within deliveries first.
PARK_AFTER_DELIVERIES = 3
# Named in every parked event's dead-letter description: this app's runbook for it.
RECONCILIATION_RUNBOOK = "docs/operations.md, Payments needing reconciliation"
# The count of payments parked for an operator (alerted on: infra/app/order-events-alerts.bicep).
RECONCILIATION_MEASURE = "payments.reconciliation_needed"


def payment_capture(
    provider: PaymentProvider,
    *,
    call_deadline_s: float,
    processing_bound_s: float | None = None,
    clock_skew_s: float = DEFAULT_CLOCK_SKEW_S,
    park_after_deliveries: int = PARK_AFTER_DELIVERIES,
) -> CallingConsumerDefinition[ValidEvent]:
    """The consumer on ``provider``; ``call_deadline_s`` is the provider client's timeout,
    ``processing_bound_s`` the provider's stated bound on how long a request it received can
    still take effect (None: not stated; without keys, an unknown outcome is then parked)."""
    effect = CapturePayment(
        CONSUMER_NAME,
        provider,
        call_deadline_s,
        park_after_deliveries,
        processing_bound_s=processing_bound_s,
        clock_skew_s=clock_skew_s,
    )
    return CallingConsumerDefinition(
        name=CONSUMER_NAME,
        partition_field=PARTITION_FIELD,
        parse=parse_event,
        partition=lambda event: event.order_id,
        effect=lambda event: effect,
        reconciliation_runbook=RECONCILIATION_RUNBOOK,
        reconciliation_measure=RECONCILIATION_MEASURE,
    )
