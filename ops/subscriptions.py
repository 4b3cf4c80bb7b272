"""The order-events topic's consumer subscriptions, as the dead-letter tool reads their dead
letters (``python -m ops list | show | resubmit | purge --subscription NAME``): which consumer
reads each, by which contract (the consumer's own, the same code), and what in its container
tells that it handled an event.

- ``payments`` (``payment-capture``, the payments container): an event is handled when the
  consumer's inbox marker of its MessageId is in the order's partition with the same
  fingerprint: the kit writes that marker only with the call's completion (or alone, for a
  stale event), never before the money moved. A dead letter whose order still has a **parked
  call** (``pending.reconcile``) is refused: its copy would be parked again behind it
  (``NeedsReconciliation``); resolve the call first (``python -m ops payments resolve``).
- ``inventory`` (``stock-reservation``): an event is applied per SKU partition, each recorded
  by its reservation's version (no marker there), and the order index's marker (the gate) is
  committed before the SKUs; no one document says the whole event was applied (a delivery held
  on one SKU has the gate and the SKUs before it committed). So the tool never removes an
  inventory dead letter on what the store says: it sends a copy and verifies it on the
  subscription (its SKUs already applied meet their version and are not reserved twice).

A copy is refused when the consumer's contract refuses it (a Subject it does not read, a body
it cannot read, ``MissingLines``...): the consumer would dead-letter it again. Pure: no Azure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from idempotent_consumer import (
    CallField,
    InboxField,
    IncomingMessage,
    InvalidMessage,
    StateField,
    ValidEvent,
    marker_id,
)

from ops.port import DeadLetter, DocumentKey
from shared.payments import contract as payments_contract
from shared.payments.capture import STATE_ID as PAYMENT_STATE_ID
from shared.payments.consumer import CONSUMER_NAME as PAYMENT_CAPTURE
from shared.stock import contract as stock_contract
from shared.stock.consumer import CONSUMER_NAME as STOCK_RESERVATION

Stored = Mapping[DocumentKey, dict[str, Any]]


@dataclass(frozen=True)
class EventReading:
    """One consumer subscription of the topic, as the tool reads its dead letters."""

    subscription: str  # the deployed name (infra/messaging.json)
    consumer: str  # the kit's consumer name: its markers' key
    container_setting: str  # the app setting naming its container
    default_container: str
    parse: Callable[[IncomingMessage], ValidEvent]
    # The partition whose marker records the whole event handled (None: no one place does).
    handled_in: Callable[[ValidEvent], str] | None = None
    # What else the decision reads, and why a copy would be dead-lettered again given it.
    more_keys: Callable[[ValidEvent], list[DocumentKey]] = lambda _event: []
    blocked: Callable[[ValidEvent, Stored], str | None] = lambda _event, _stored: None

    def valid(self, letter: DeadLetter) -> ValidEvent:
        """The dead letter as the consumer's contract reads it; raises ``InvalidMessage``."""
        return self.parse(
            IncomingMessage(
                message_id=letter.message_id,
                body=letter.body,
                correlation_id=letter.correlation_id,
                application_properties=dict(letter.application_properties),
                subject=letter.subject,
            )
        )

    def _event(self, letter: DeadLetter) -> ValidEvent | None:
        try:
            return self.valid(letter)
        except InvalidMessage:
            return None

    def document_keys(self, letter: DeadLetter) -> list[DocumentKey]:
        """What tells whether the consumer handled this dead letter, and what may block it."""
        event = self._event(letter)
        if event is None or not letter.message_id:
            return []
        keys = list(self.more_keys(event))
        if self.handled_in is not None:
            keys.append((marker_id(self.consumer, letter.message_id), self.handled_in(event)))
        return keys

    def handled(self, letter: DeadLetter, stored: Stored) -> tuple[bool, str] | None:
        """(same fingerprint, what recorded it), or None: not known to be handled."""
        event = self._event(letter)
        if event is None or self.handled_in is None or not letter.message_id:
            return None
        marker = stored.get((marker_id(self.consumer, letter.message_id), self.handled_in(event)))
        if marker is None or marker.get(InboxField.HASH_ALGORITHM) != event.hash_algorithm:
            return None
        return (
            marker.get(InboxField.REQUEST_HASH) == event.request_hash,
            f"{self.consumer} handled MessageId {letter.message_id} as "
            f"{marker.get(InboxField.MESSAGE_TYPE)} version {marker.get(InboxField.ORDER_VERSION)} "
            f"({marker.get(InboxField.OUTCOME)})",
        )

    def block(self, letter: DeadLetter, stored: Stored) -> str | None:
        event = self._event(letter)
        return None if event is None else self.blocked(event, stored)


def _payment_state(event: ValidEvent) -> list[DocumentKey]:
    return [(PAYMENT_STATE_ID, event.order_id)]


def _parked_call(event: ValidEvent, stored: Stored) -> str | None:
    state = stored.get((PAYMENT_STATE_ID, event.order_id)) or {}
    pending = state.get(StateField.PENDING) or {}
    if not pending.get(CallField.RECONCILE):
        return None
    return (
        f"order {event.order_id} has a call parked for reconciliation (its "
        f"{pending.get(CallField.OPERATION)} of {pending.get(CallField.MESSAGE_ID)}): a copy "
        "would be parked again (NeedsReconciliation). Resolve it first: python -m ops payments "
        f"resolve {event.order_id} --happened | --did-not-happen"
    )


SUBSCRIPTIONS: dict[str, EventReading] = {
    "payments": EventReading(
        subscription="payments",
        consumer=PAYMENT_CAPTURE,
        container_setting="PAYMENTS_CONTAINER",
        default_container="payments",
        parse=payments_contract.parse_event,
        handled_in=lambda event: event.order_id,
        more_keys=_payment_state,
        blocked=_parked_call,
    ),
    "inventory": EventReading(
        subscription="inventory",
        consumer=STOCK_RESERVATION,
        container_setting="INVENTORY_CONTAINER",
        default_container="inventory",
        parse=stock_contract.parse_event,
    ),
}
