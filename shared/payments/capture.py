"""The payment capture's effect: the order's payment moved to what its highest version asks,
by captures and refunds at the provider, each made once (``shared.kit.external``). No Azure
imports; the provider is the port ``shared.payments.provider.PaymentProvider``.

The payment's state (document ``payment`` in the order's partition of the ``payments``
container) holds ``capturedMinor``, the net the provider holds for the order, with the kit's
version, revision and pending call. An event's version asks for its total (zero once
cancelled): the difference is captured (more) or refunded (less), nothing when equal. A
cancellation before any capture moves only the version, so the late acceptance is stale.

What the provider says about the request itself is a business outcome, recorded on the state
(``lastOutcome``) and on the call's record, counted, completed, never retried: a declined card
(``payments.declined``: nothing captured, the next version tries again for its whole total),
a refused request (``payments.refused``: a refund the provider says exceeds what it holds, say).
Its errors are classified by what a retry can fix: a timeout, a 5xx, a 429 or a 409 for the
same key in progress are the moment (retried, then redelivered, the same key every time); a
refused credential, a key reused with another payload, an answer outside its API are the system
(held, alerted, never dead-lettered).

The payer is fixed once money has moved: a version whose customer or currency differs from
the payment's while the provider holds money for the order (``capturedMinor`` not zero) is
never executed (a capture from another customer, a refund to another account, a difference in
another currency would move money on the wrong account): it is escalated to a person,
dead-lettered ``PayerChanged``, counted (``payments.payer_changed``) and alerted (the
consumer's dead-letter alert). Before any money moved (nothing captured yet, or a decline) the
version's payer is the one its call uses, and a successful capture records it.

Not modelled: authorisations and voids (a capture is immediate).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from idempotent_consumer import (
    Call,
    Escalation,
    Found,
    InProgress,
    Looked,
    NotFound,
    NotMade,
    PatchOperation,
    SystemicStoreError,
    TransientStoreError,
    ValidEvent,
    call_key,
    set_field,
)

from shared.payments.contract import charged, target_minor
from shared.payments.provider import (
    LookupStatus,
    Operation,
    PaymentProvider,
    PaymentRequest,
    ProviderBusy,
    ProviderResult,
    ProviderUnavailable,
    ResultStatus,
    SystemicProviderError,
)

STATE_ID = "payment"
PAYMENT_TYPE = "payment"
DECLINED = "payments.declined"
REFUSED = "payments.refused"
# Two instances' clocks differ by far less on Azure (its hosts keep time from the Windows Time
# service, learn.microsoft.com/azure/virtual-machines/windows/time-sync); the margin is wide
# because it only delays a call made again without keys.
DEFAULT_CLOCK_SKEW_S = 2.0
PAYER_CHANGED = "PayerChanged"  # the dead-letter reason of a version naming another payer
PAYER_CHANGED_MEASURE = "payments.payer_changed"


class PaymentField:
    CAPTURED = "capturedMinor"
    CUSTOMER = "customerId"
    CURRENCY = "currency"
    ORDER_ID = "orderId"
    LAST_OUTCOME = "lastOutcome"


@dataclass(frozen=True)
class CapturePayment:
    """``shared.kit.external.ExternalEffect`` for one order's payment."""

    consumer: str
    provider: PaymentProvider
    call_deadline_s: float
    park_after_deliveries: int
    # The provider's stated bound on how long a request it received can still take effect
    # (None: not stated), and the margin for clock skew between instances (module
    # shared.kit.external: when a call may be made again without keys).
    processing_bound_s: float | None = None
    clock_skew_s: float = DEFAULT_CLOCK_SKEW_S
    state_id: str = STATE_ID

    @property
    def honours_keys(self) -> bool:
        return self.provider.honours_idempotency_keys

    def new_state(self, event: ValidEvent) -> dict[str, Any]:
        return {
            "type": PAYMENT_TYPE,
            PaymentField.ORDER_ID: event.order_id,
            PaymentField.CAPTURED: 0,
            **charged(event),
        }

    def plan(self, event: ValidEvent, state: Mapping[str, Any] | None) -> Call | Escalation | None:
        captured = int((state or {}).get(PaymentField.CAPTURED, 0))
        stored_payer = {k: v for k, v in (state or {}).items() if k in _PAYER}
        payer = {**stored_payer, **charged(event)}
        if captured != 0 and payer != stored_payer:
            changed = " and ".join(
                name for name in _PAYER if payer.get(name) != stored_payer.get(name)
            )
            return Escalation(
                PAYER_CHANGED,
                f"{event.message_type} version {event.version} names another {changed} than the "
                f"payment holding money for the order: a person decides (docs/operations.md, "
                "A payer changed after money moved)",
                PAYER_CHANGED_MEASURE,
            )
        difference = target_minor(event) - captured
        if difference == 0:
            return None
        operation = Operation.CAPTURE if difference > 0 else Operation.REFUND
        key = call_key(self.consumer, event.message_id, operation)
        request = {
            "orderId": event.order_id,
            "reference": key,
            "customerId": payer.get(PaymentField.CUSTOMER, ""),
            "currency": payer.get(PaymentField.CURRENCY, ""),
            "amountMinor": abs(difference),
        }
        return Call(operation, key, request)

    async def perform(self, call: Call) -> Mapping[str, Any]:
        with _classified(call, performing=True):
            result = await self.provider.perform(_request(call))
        return result_record(result)

    async def look_up(self, call: Call) -> Looked:
        with _classified(call, performing=False):
            looked = await self.provider.lookup(str(call.request["reference"]))
        if looked.status is LookupStatus.FOUND and looked.result is not None:
            # Repeats (a provider that honours no key performed it again): never accepted
            # silently; the kit parks the call for a person to refund the surplus.
            return Found(result_record(looked.result), repeats=len(looked.repeats))
        if looked.status is LookupStatus.IN_PROGRESS:
            return InProgress()
        return NotFound()

    def settled(
        self, state: Mapping[str, Any], call: Call, result: Mapping[str, Any]
    ) -> Sequence[PatchOperation]:
        operations = [set_field(PaymentField.LAST_OUTCOME, result["status"])]
        if result["status"] == ResultStatus.SUCCEEDED:
            captured = int(state.get(PaymentField.CAPTURED, 0))
            moved = int(result["amountMinor"])
            sign = 1 if call.operation == Operation.CAPTURE else -1
            operations.append(set_field(PaymentField.CAPTURED, captured + sign * moved))
            # Money moved with this payer: from now on it is the order's (``plan``).
            operations.extend(
                set_field(name, call.request[name])
                for name in _PAYER
                if call.request.get(name) and state.get(name) != call.request[name]
            )
        return operations

    def measures(self, result: Mapping[str, Any]) -> Mapping[str, int]:
        status = result["status"]
        if status == ResultStatus.DECLINED:
            return {DECLINED: 1}
        if status == ResultStatus.REFUSED:
            return {REFUSED: 1}
        return {}


_PAYER = (PaymentField.CUSTOMER, PaymentField.CURRENCY)


def _request(call: Call) -> PaymentRequest:
    request = call.request
    return PaymentRequest(
        operation=Operation(call.operation),
        order_id=str(request["orderId"]),
        reference=str(request["reference"]),
        idempotency_key=call.key,
        customer_id=str(request["customerId"]),
        amount_minor=int(request["amountMinor"]),
        currency=str(request["currency"]),
    )


def result_record(result: ProviderResult) -> dict[str, Any]:
    """A provider's result as the call's record and the state's ``settled`` read it."""
    return {
        "status": str(result.status),
        "providerId": result.provider_id,
        "amountMinor": result.amount_minor,
        "detail": result.detail,
    }


@contextmanager
def _classified(call: Call, *, performing: bool) -> Iterator[None]:
    """The provider's errors as the kit's: the moment, or the system; an attempt the provider
    provably did not perform (``ProviderError.performed_nothing``), when ``performing`` it, as
    ``NotMade``, so that the kit withdraws it rather than wait out its window (with no
    processing bound: park it). A lookup's errors are never ``NotMade``: it performs nothing."""
    what = f"{call.operation} {call.key}"
    try:
        yield
    except (ProviderUnavailable, ProviderBusy) as error:
        transient = TransientStoreError(
            f"provider, {what}: {error.description}", retry_after_s=error.retry_after_s
        )
        if performing and error.performed_nothing:
            raise NotMade(transient) from error
        raise transient from error
    except SystemicProviderError as error:
        systemic = SystemicStoreError(f"provider, {what}: {error.description}")
        if performing and error.performed_nothing:
            raise NotMade(systemic) from error
        raise systemic from error
