"""A calling consumer whose effect is built from the message it handles, as the kit's
``CallingConsumerDefinition.effect`` (``Callable[[M], ExternalEffect[M]]``) lets a user write
one: the call the other side receives and the state stored are that message's.

The payment capture builds one effect for every event, so nothing in tests/payments would notice
an effect built from anything else. Checked to fail with ``decide_call`` building the effect
from ``None`` (run 5's ``decide_call`` ``_17``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from idempotent_consumer import (
    HASH_ALGORITHM,
    Call,
    CallingConsumerDefinition,
    IncomingMessage,
    Looked,
    NotFound,
    Outcome,
    PatchOperation,
    call_key,
    decide_call,
    set_field,
)
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock

CONSUMER = "tips"


@dataclass(frozen=True, slots=True)
class Tip:
    """A message as ``decide_call`` handles it (the kit's ``Handled``): a tip for an order."""

    message_id: str
    amount: int
    message_type: str = "TipGiven"
    order_id: str = "o-1"
    version: int = 1
    request_hash: str = "0" * 64
    hash_algorithm: str = HASH_ALGORITHM


class PayTip:
    """The effect of one tip: pay its amount to the other side (``paid``, the calls it
    received, in order), and keep what was paid in the order's state."""

    state_id = "tips"
    honours_keys = True
    call_deadline_s = 5.0
    processing_bound_s = None
    clock_skew_s = 1.0
    park_after_deliveries = 3

    def __init__(self, tip: Tip, paid: list[int]) -> None:
        self._tip, self._paid = tip, paid

    def new_state(self, message: Tip) -> dict[str, Any]:
        return {"paidMinor": 0}

    def plan(self, message: Tip, state: Mapping[str, Any] | None) -> Call | None:
        key = call_key(CONSUMER, self._tip.message_id, "pay")
        return Call("pay", key, {"amountMinor": self._tip.amount})

    async def perform(self, call: Call) -> Mapping[str, Any]:
        self._paid.append(int(call.request["amountMinor"]))
        return {"paidMinor": call.request["amountMinor"]}

    async def look_up(self, call: Call) -> Looked:
        return NotFound()

    def settled(
        self, state: Mapping[str, Any], call: Call, result: Mapping[str, Any]
    ) -> Sequence[PatchOperation]:
        return [set_field("paidMinor", int(state["paidMinor"]) + int(result["paidMinor"]))]

    def measures(self, result: Mapping[str, Any]) -> Mapping[str, int]:
        return {}


async def test_a_calling_consumer_s_effect_is_built_from_the_message_it_handles() -> None:
    paid: list[int] = []
    tips = CallingConsumerDefinition(
        name=CONSUMER,
        partition_field="orderId",
        parse=lambda incoming: Tip(str(incoming.message_id), int(incoming.body)),
        partition=lambda tip: tip.order_id,
        effect=lambda tip: PayTip(tip, paid),
    )
    store = InMemoryDocumentStore()

    decision = await decide_call(
        tips,
        IncomingMessage("m-1", b"250", delivery_count=1),
        store,
        marker_ttl_s=600,
        clock=ManualClock(datetime(2026, 12, 5, 9, tzinfo=UTC)),
    )

    assert decision.outcome is Outcome.PROCESSED
    assert paid == [250]
    assert store.documents[("o-1", "tips")]["paidMinor"] == 250
