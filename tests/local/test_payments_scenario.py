"""The demo's payments table: each row fails when what it guards is broken, from a ledger as a
provider would hold it after a broken consumer (money moved twice, a refund past the captures, a
key reused, a decline retried or not counted), each case breaking one thing."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from local.scenarios.payments import (
    KEYED,
    KEYLESS,
    LEDGER_PER_ORDER,
    declined_customer,
    declined_recorded,
    expected_nets,
    keyless_customers,
    ledger_per_key_mode,
    ledger_rows,
    nets_are_the_totals,
    never_below_zero,
    nothing_parked,
    one_move_per_key,
    provider_faults,
    subscription_checks,
)
from local.standins.broker import DeadLetteredMessage, OutgoingMessage
from local.standins.payment_provider import Fault, FaultRule, LedgerEntry, PaymentProviderStandIn
from ops.sample_orders import amended_body, order_body
from shared.adapters.payment_provider import HttpPaymentProvider
from shared.payments.provider import Operation, PaymentRequest, ProviderUnavailable

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CAPTURE, REFUND = Operation.CAPTURE, Operation.REFUND
HELD_S = 0.6  # a capture's answer held after its commit, twice the client's timeout


def order(order_id: str, total: int, customer: str = "cust-1", *, cancelled: bool = False) -> Any:
    return {
        "orderId": order_id,
        "type": "order",
        "customerId": customer,
        "totalMinor": total,
        "status": "cancelled" if cancelled else "accepted",
    }


def moved(order_id: str, operation: Operation, amount: int, key: str | None = "") -> LedgerEntry:
    return LedgerEntry(
        order_id,
        operation,
        amount,
        "EUR",
        f"ref-{order_id}",
        key if key != "" else f"key-{order_id}-{operation}-{amount}",
        "p-1",
        NOW,
    )


ORDERS = [
    order("ord-1", 500),  # captured 700, amended down to 500: refunded 200
    order("ord-2", 300, cancelled=True),  # captured, then refunded all
    order("ord-3", 900, "cust-declined"),  # the card declined: nothing
]
LEDGER = [
    moved("ord-1", CAPTURE, 700),
    moved("ord-2", CAPTURE, 300),
    moved("ord-1", REFUND, 200),
    moved("ord-2", REFUND, 300),
]


def test_the_healthy_ledger_passes_every_row() -> None:
    expected = expected_nets(ORDERS, "cust-declined")
    assert expected == {"ord-1": 500, "ord-2": 0, "ord-3": 0}
    assert nets_are_the_totals(expected, LEDGER).passed
    assert never_below_zero(LEDGER).passed
    assert one_move_per_key(LEDGER).passed
    states = [{"orderId": "ord-3", "lastOutcome": "declined"}]
    assert declined_recorded(["ord-3"], states, 1).passed
    assert nothing_parked([], 0).passed


def test_money_moved_twice_or_not_at_all_fails_the_nets() -> None:
    expected = expected_nets(ORDERS, "cust-declined")
    twice = [*LEDGER, moved("ord-1", CAPTURE, 700, key="key-again")]  # a second key: paid twice
    assert nets_are_the_totals(expected, twice).offending == ["ord-1"]
    unrefunded = LEDGER[:3]  # the cancellation never refunded
    assert nets_are_the_totals(expected, unrefunded).offending == ["ord-2"]
    charged = [*LEDGER, moved("ord-3", CAPTURE, 900)]  # the declined card charged after all
    assert nets_are_the_totals(expected, charged).offending == ["ord-3"]
    stranger = [*LEDGER, moved("ord-9", CAPTURE, 1)]  # money for an order never stored
    assert nets_are_the_totals(expected, stranger).offending == ["ord-9"]


def test_a_refund_before_its_capture_fails_even_when_the_net_is_right() -> None:
    early = [LEDGER[3], LEDGER[0], LEDGER[1], LEDGER[2]]  # ord-2 refunded, then captured
    assert never_below_zero(early).offending == ["ord-2"]
    assert nets_are_the_totals(expected_nets(ORDERS, "cust-declined"), early).passed


def test_a_key_that_moved_money_twice_or_no_key_fails() -> None:
    reused = [*LEDGER[:1], moved("ord-1", CAPTURE, 700, key=LEDGER[0].idempotency_key)]
    assert one_move_per_key(reused).offending == ["ord-1"]
    assert one_move_per_key([*LEDGER, moved("ord-3", CAPTURE, 1, key=None)]).offending == ["ord-3"]


def test_a_decline_not_recorded_or_not_counted_once_fails() -> None:
    declined = [{"orderId": "ord-3", "lastOutcome": "declined"}]
    assert not declined_recorded(["ord-3"], declined, 0).passed  # not counted
    assert not declined_recorded(["ord-3"], declined, 2).passed  # counted twice
    retried = [{"orderId": "ord-3", "lastOutcome": "succeeded"}]
    assert declined_recorded(["ord-3"], retried, 1).offending == ["ord-3"]
    assert not declined_recorded([], [], 0).passed  # no declined card: the demo showed none


def test_a_parked_or_dead_lettered_event_and_the_stand_in_s_figures_fail() -> None:
    letter = DeadLetteredMessage(
        OutgoingMessage("e-1", b"{}"), 3, 10, "NeedsReconciliation", None, NOW
    )
    check = nothing_parked([letter], 1)
    assert (check.passed, check.offending, check.detail) == (False, ["e-1"], "NeedsReconciliation")
    assert not nothing_parked([], 1).passed

    def failed(active: int, invocations: int) -> list[str]:
        checks = subscription_checks(
            active_messages=active, failed_invocations=invocations, errors=["e"]
        )
        return [c.name for c in checks if not c.passed]

    assert failed(0, 0) == []
    assert len(failed(1, 0)) == 1 and len(failed(0, 1)) == 1


def test_the_declined_customer_is_never_the_one_the_sample_amendments_carry() -> None:
    amending = amended_body()["customerId"]
    bodies = {
        "ord-1": json.dumps(order_body("ord-1", customerId=amending)).encode(),
        "ord-2": json.dumps(order_body("ord-2", customerId="cust-0007")).encode(),
    }
    assert declined_customer(bodies) == "cust-0007"
    assert declined_customer({"ord-1": bodies["ord-1"]}) is None
    assert [rule.fault for rule in provider_faults(2)] == [
        Fault.TIMEOUT_AFTER_COMMIT,
        Fault.ERROR_AFTER_COMMIT,
        Fault.ERROR_BEFORE_COMMIT,
    ]
    assert all(rule.times == 2 for rule in provider_faults(2))
    assert provider_faults(0) == []


def test_the_ledger_table_shows_the_declined_orders_first_and_sums_the_rest() -> None:
    expected = expected_nets(ORDERS, "cust-declined")
    rows = ledger_rows(ORDERS, expected, LEDGER, "cust-declined", shown=2)
    assert [r.order for r in rows] == ["ord-3", "ord-1", "1 other orders"]
    assert (rows[1].captured, rows[1].refunded, rows[1].net, rows[1].movements) == (
        700,
        200,
        500,
        2,
    )
    assert (rows[2].asks, rows[2].net, rows[2].movements) == (0, 0, 2)


# -- the ledger per order in both key modes ---------------------------------------------------


def test_the_ledger_per_key_mode_checks_each_mode_s_orders_apart() -> None:
    expected = expected_nets(ORDERS, "cust-declined")
    keyless = {"cust-declined"}  # ord-3's customer: their provider honours no key
    healthy = ledger_per_key_mode(ORDERS, expected, LEDGER, keyless)
    assert [(c.name, c.passed) for c in healthy] == [
        (LEDGER_PER_ORDER.format(mode=KEYED), True),
        (LEDGER_PER_ORDER.format(mode=KEYLESS), True),
    ]
    charged = [*LEDGER, moved("ord-3", CAPTURE, 900, key="key-again")]
    keyed, keyless_row = ledger_per_key_mode(ORDERS, expected, charged, keyless)
    assert keyed.passed and keyless_row.offending == ["ord-3"]
    # A mode without an order has no row.
    assert [c.name for c in ledger_per_key_mode(ORDERS, expected, LEDGER, set())] == [
        LEDGER_PER_ORDER.format(mode=KEYED)
    ]


def test_the_keyless_customers_are_a_seeded_share_of_the_orders_customers() -> None:
    bodies = {
        f"o-{n}": json.dumps(order_body(f"o-{n}", customerId=f"c-{n}")).encode() for n in range(200)
    }
    chosen = keyless_customers(bodies, 0.3, seed=7)
    assert chosen == keyless_customers(bodies, 0.3, seed=7)
    assert 30 < len(chosen) < 90 and chosen <= {f"c-{n}" for n in range(200)}
    assert keyless_customers(bodies, 0.0, seed=7) == set()


async def test_a_client_repeating_its_key_to_a_keyless_customer_s_provider_fails_that_row() -> None:
    """The broken product: a capture repeated under its key after a lost answer, as the app
    configured ``honoured`` does, against a provider that honours no key for one customer
    (``keyless_customers``): that customer's order is paid twice and only the keyless row
    fails; the other customer's repeat is answered from the key, nothing moved again."""
    with PaymentProviderStandIn(keyless_customers={"cust-b"}) as provider:
        orders = [order("ord-a", 1250, "cust-a"), order("ord-b", 1250, "cust-b")]
        async with HttpPaymentProvider(
            provider.url, provider.api_key, honours_idempotency_keys=True, timeout_s=HELD_S / 2
        ) as client:
            for placed in orders:
                payment = PaymentRequest(
                    operation=CAPTURE,
                    order_id=placed["orderId"],
                    reference=f"{placed['orderId']}:capture",
                    idempotency_key=f"key-{placed['orderId']}",
                    customer_id=placed["customerId"],
                    amount_minor=1250,
                    currency="EUR",
                )
                provider.inject(FaultRule(Fault.TIMEOUT_AFTER_COMMIT, delay_s=HELD_S))
                with pytest.raises(ProviderUnavailable):
                    await client.perform(payment)
                await client.perform(payment)  # the repeat under the same key
            await asyncio.sleep(HELD_S)  # the held answers over before the provider stops
        ledger = provider.ledger
    keyed, keyless = ledger_per_key_mode(orders, expected_nets(orders, None), ledger, {"cust-b"})
    assert keyed.passed
    assert (keyless.passed, keyless.offending) == (False, ["ord-b"])
    assert one_move_per_key(ledger).offending == ["ord-b"]
