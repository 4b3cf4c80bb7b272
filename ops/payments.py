"""``python -m ops payments``: the payment capture consumer's calls parked for an operator, listed
with what the provider says of them now, and resolved on the operator's word, checked against
the provider.

A call is parked (``shared.kit.external``) when the provider honours no Idempotency-Key and its
lookup keeps saying the operation is in progress after the client gave up on it: the call may or
may not have moved money, so the consumer marks the order's ``payment`` state (``pending`` with
``reconcile: true``), dead-letters the event ``NeedsReconciliation`` and never calls again on its
own. Every later event of the order is dead-lettered behind it. An operator establishes at the
provider what happened (its lookup by the merchant's reference, or its dashboard), then:

- ``--happened``: the call is completed exactly as the consumer completes one, by the kit's own
  completion (one transactional batch in the order's partition, conditional on the revision
  read: the message's inbox marker, the state moved to the call's version with what the call did,
  ``pending`` cleared, the call's record ``call:<key>``). Its result is the provider's lookup
  result when the lookup found the operation (exactly what the consumer would have recorded:
  ``shared.payments.capture``'s conversion), else the operator's: the request's amount moved,
  with ``--provider-id`` if given. The event's resubmitted copy is then a duplicate.
- ``--did-not-happen``: ``pending`` is cleared (conditional on the revision read), nothing else:
  the resubmitted event begins the call again under its same key (derived from the consumer,
  the MessageId and the operation), and moves the money once.

The operator's word is checked against the provider's lookup first and refused when they
disagree (``--force`` overrides): ``--did-not-happen`` while the provider has the operation
(completed, or still processing: it may yet complete), ``--happened`` while it has none, and
either when the lookup cannot be made. A wrong ``--did-not-happen`` charges the customer twice
with a provider that honours no key; a wrong ``--happened`` records money that never moved.

Pure over its ports: the kit's ``DocumentStore`` on the payments container, the parked states'
query (``ParkedStates``; ``ops.cosmos_payments``) and the provider port
(``shared.payments.provider.PaymentProvider``; the app's HTTP adapter). It never calls the
provider to move money, never writes a payment that is not parked, and writes nothing when the
operator's word is refused.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

# The tool writes exactly what the consumer writes: the kit's completion and release, never a copy.
from idempotent_consumer import (
    Call,
    CallField,
    DocumentStore,
    Inbox,
    StateField,
    complete_call,
    release_call,
)

from shared.payments.capture import STATE_ID, CapturePayment, PaymentField, result_record
from shared.payments.consumer import CONSUMER_NAME, PARK_AFTER_DELIVERIES, PARTITION_FIELD
from shared.payments.provider import (
    LookupStatus,
    PaymentProvider,
    ProviderError,
    ProviderResult,
    ResultStatus,
)

OPERATOR_DETAIL = "recorded by an operator (python -m ops payments resolve --happened)"


@dataclass(frozen=True)
class ParkedRead:
    """The parked payment states, and what the query cost (RU)."""

    states: list[dict[str, Any]]
    request_charge: float


class ParkedStates(Protocol):
    async def parked(self) -> ParkedRead:
        """Every ``payment`` state whose pending call is marked ``reconcile``."""
        ...


class Said(enum.StrEnum):
    """What the provider's lookup by reference says of a call now."""

    FOUND = "found"  # it completed the operation: its result
    NOT_FOUND = "not-found"  # it has no operation under the reference
    IN_PROGRESS = "in-progress"  # it is processing one: it may yet complete
    UNKNOWN = "unknown"  # the lookup failed (unreachable, credential, unreadable answer)


@dataclass(frozen=True)
class ProviderView:
    said: Said
    detail: str
    result: ProviderResult | None = None  # FOUND: the first operation under the reference
    repeats: int = 0  # FOUND: operations performed again under it (a provider without keys)


async def provider_view(provider: PaymentProvider, reference: str) -> ProviderView:
    """The provider's lookup of ``reference``, as the operator reads it. Never raises for what
    the provider answers."""
    try:
        looked = await provider.lookup(reference)
    except ProviderError as error:
        return ProviderView(Said.UNKNOWN, f"the lookup failed: {error.description}")
    if looked.status is LookupStatus.IN_PROGRESS:
        return ProviderView(Said.IN_PROGRESS, "the provider is still processing it")
    if looked.status is LookupStatus.NOT_FOUND or looked.result is None:
        return ProviderView(Said.NOT_FOUND, "the provider has no operation under its reference")
    result = looked.result
    detail = f"{result.status}: {result.detail}"
    if looked.repeats:
        moved = sum(r.amount_minor for r in looked.repeats if r.status is ResultStatus.SUCCEEDED)
        detail += (
            f"; performed {len(looked.repeats)} more time(s) under the same reference "
            f"({moved} more moved): put that right at the provider"
        )
    return ProviderView(Said.FOUND, detail, result, len(looked.repeats))


@dataclass(frozen=True)
class ParkedPayment:
    """One order's parked call, and what the provider says of it now."""

    order_id: str
    message_id: str
    message_type: str
    version: int
    operation: str
    key: str
    amount_minor: int
    currency: str
    started_at: str
    captured_minor: int  # what the order holds at the provider before this call
    provider: ProviderView


def _call(pending: Mapping[str, Any]) -> Call:
    return Call(pending[CallField.OPERATION], pending[CallField.KEY], pending[CallField.REQUEST])


def _reference(call: Call) -> str:
    return str(call.request.get("reference") or call.key)


def _parked(state: Mapping[str, Any], view: ProviderView) -> ParkedPayment:
    pending = state[StateField.PENDING]
    request = pending.get(CallField.REQUEST) or {}
    return ParkedPayment(
        order_id=str(state.get(PaymentField.ORDER_ID)),
        message_id=str(pending.get(CallField.MESSAGE_ID)),
        message_type=str(pending.get(CallField.MESSAGE_TYPE)),
        version=int(pending.get(CallField.VERSION, 0)),
        operation=str(pending.get(CallField.OPERATION)),
        key=str(pending.get(CallField.KEY)),
        amount_minor=int(request.get("amountMinor", 0)),
        currency=str(request.get("currency", "")),
        started_at=str(pending.get(CallField.STARTED_AT)),
        captured_minor=int(state.get(PaymentField.CAPTURED, 0)),
        provider=view,
    )


async def parked_payments(
    states: ParkedStates, provider: PaymentProvider
) -> tuple[list[ParkedPayment], float]:
    """Every parked call with the provider's lookup of it (one lookup each), oldest first; and
    the query's charge."""
    read = await states.parked()
    listed = []
    for state in read.states:
        pending = state.get(StateField.PENDING) or {}
        if not pending.get(CallField.RECONCILE):
            continue  # resolved between the query's pages
        listed.append(_parked(state, await provider_view(provider, _reference(_call(pending)))))
    listed.sort(key=lambda parked: (parked.started_at, parked.order_id))
    return listed, read.request_charge


class Verdict(enum.StrEnum):
    COMPLETED = "completed"  # recorded as happened: marker, state, call record
    CLEARED = "cleared"  # recorded as not happened: pending cleared
    REFUSED = "refused"  # the provider contradicts the operator (or cannot say): nothing written
    NOT_PARKED = "not-parked"  # no parked call for the order: nothing written
    MOVED = "moved"  # the state changed since it was read: nothing written; run again


@dataclass(frozen=True)
class Resolution:
    order_id: str
    verdict: Verdict
    detail: str
    parked: ParkedPayment | None = None

    @property
    def done(self) -> bool:
        return self.verdict in (Verdict.COMPLETED, Verdict.CLEARED)


def contradiction(view: ProviderView, *, happened: bool) -> str | None:
    """Why the provider's lookup disagrees with the operator's word (None: it does not)."""
    if view.said is Said.UNKNOWN:
        return f"the provider cannot be asked ({view.detail})"
    if happened and view.said is Said.NOT_FOUND:
        return "the provider has no operation under the call's reference"
    if not happened and view.said is Said.FOUND:
        return f"the provider has the operation ({view.detail})"
    if not happened and view.said is Said.IN_PROGRESS:
        return "the provider is still processing the operation: it may yet complete"
    return None


async def resolve(
    store: DocumentStore,
    provider: PaymentProvider,
    order_id: str,
    *,
    happened: bool,
    force: bool = False,
    provider_id: str | None = None,
    marker_ttl_s: int,
    now: datetime,
) -> Resolution:
    """Resolve the order's parked call (module docstring): one point read, one lookup, and at
    most one write, conditional on the revision read."""
    state = await store.read(order_id, STATE_ID)
    pending = (state or {}).get(StateField.PENDING)
    if state is None or not pending:
        return Resolution(order_id, Verdict.NOT_PARKED, "no call in progress for this order")
    if not pending.get(CallField.RECONCILE):
        return Resolution(
            order_id,
            Verdict.NOT_PARKED,
            "its call is in progress, not parked: the consumer finishes it on the event's next "
            "delivery",
        )
    call = _call(pending)
    view = await provider_view(provider, _reference(call))
    parked = _parked(state, view)
    why = contradiction(view, happened=happened)
    if why is not None and not force:
        word = "--happened" if happened else "--did-not-happen"
        return Resolution(
            order_id,
            Verdict.REFUSED,
            f"refused: {word}, but {why}. Nothing written; --force records your word anyway",
            parked,
        )
    forced = f" (forced: {why})" if why is not None else ""
    # The payment consumer's effect, for the kit's completion and release (no call is made).
    effect = CapturePayment(
        CONSUMER_NAME, provider, call_deadline_s=0.0, park_after_deliveries=PARK_AFTER_DELIVERIES
    )
    if not happened:
        if not await release_call(store, order_id, effect, state):
            return _moved(order_id, parked)
        return Resolution(
            order_id,
            Verdict.CLEARED,
            f"the call is cleared{forced}: resubmit the order's NeedsReconciliation dead "
            f"letters; {parked.message_type} {parked.message_id} makes the {call.operation} "
            "again under its same key",
            parked,
        )
    if view.said is Said.FOUND and view.result is not None:
        result, what = result_record(view.result), f"the provider's result ({view.detail})"
    else:
        operator = ProviderResult(
            ResultStatus.SUCCEEDED,
            _reference(call),
            provider_id,
            parked.amount_minor,
            OPERATOR_DETAIL,
        )
        result, what = result_record(operator), f"your word: {parked.amount_minor} moved{forced}"
    inbox = Inbox(CONSUMER_NAME, PARTITION_FIELD, marker_ttl_s)
    if not await complete_call(store, inbox, order_id, effect, state, pending, result, now):
        return _moved(order_id, parked)
    return Resolution(
        order_id,
        Verdict.COMPLETED,
        f"the call is completed with {what}: resubmit the order's NeedsReconciliation dead "
        f"letters ({parked.message_type} {parked.message_id} is then a duplicate)",
        parked,
    )


def _moved(order_id: str, parked: ParkedPayment) -> Resolution:
    return Resolution(
        order_id,
        Verdict.MOVED,
        "the payment changed since it was read (its revision moved): nothing written; run the "
        "command again",
        parked,
    )
