"""What ``python -m ops`` prints when the data is hostile: every command that prints a dead
letter, a stored document or a provider's answer, fed values a producer (or anyone with Send or
Listen rights, or a compromised writer of the containers) chose: rich markup (``[/]`` closes a
tag nobody opened, ``[link=...]`` makes a clickable link), a screen clear, an OSC 52 clipboard
write, a C1 control. Through the same real SDKs as the other tests of the tool: the dead letters
over the real azure-servicebus client on the local broker link, the documents through
azure-cosmos against the local Cosmos DB server, written by the real function and consumers.

What an operator's terminal must receive, checked on the bytes written: no ESC, BEL or C1
control (no control character at all but the newlines of the layout), the markup as the
characters it is, the control characters visible (``\\x1b``), no crash, and every other item of
the batch handled as it would have been without the hostile one."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from azure.cosmos.aio import ContainerProxy
from idempotent_consumer import Outcome

from local.assembly.dead_letter_queue import LocalDeadLetterQueue
from local.standins.broker import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    ManualClock,
    OutgoingMessage,
    PeekLockQueue,
)
from local.standins.host import LocalFunctionsHost
from local.standins.payment_provider import Fault, FaultRule, PaymentProviderStandIn
from ops.cli import main
from ops.cosmos import CosmosAuditReader, CosmosOrderHistory, CosmosOutboxDocuments
from ops.cosmos import container_client as ops_container
from ops.cosmos_inventory import CosmosInventory
from ops.sample_orders import cancelled_body, order_body
from shared.relay.outbox import STATUS_PARKED, OutboxField
from tests.ops.test_dead_letter_tool import WINDOW, dead_ids, exhaust, queued_ids
from tests.ops.test_payments import ACCEPTED, Consumer, consumer_client, payments, provider
from tests.ops.test_stock import inventory, inventory_name, reserve, transport
from tests.orders import message
from tests.relay.conftest import accept_order
from tests.stock.events import event_message

__all__ = ["inventory", "inventory_name", "payments", "provider", "transport"]  # fixtures

CLOSE_TAG = "[/]"  # rich: "closing tag '[/]' at position 0 has nothing to close"
LINK = "[link=https://evil.example/]docs[/link]"  # rich: a clickable link to anywhere
CLEAR_SCREEN = "\x1b[2J\x1b[H"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52, ST-terminated: "rm -rf ~" to the clipboard
C1_CSI = "\x9b2J"  # the screen clear again, its CSI as one C1 character
HOSTILE = f"{CLOSE_TAG}{CLEAR_SCREEN}{C1_CSI}"

_C1_IN_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


def assert_printed_as_text(printed: bytes) -> str:
    """No control character reached the bytes raw but the layout's newlines; the text."""
    assert b"\x1b" not in printed, printed
    assert b"\x07" not in printed, printed
    assert not _C1_IN_UTF8.search(printed), printed
    text = printed.decode("utf-8")  # strict: what was written is UTF-8
    controls = {hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F}
    assert not controls, (controls, text)
    return text


def assert_shown_literally(text: str, *values: str) -> None:
    """The markup and the control characters of ``values`` are in the text as characters."""
    for value in values:
        if CLOSE_TAG in value:
            assert CLOSE_TAG in text, text
        if "[link=" in value:
            assert "[link=https://evil.example/]" in text, text
        if "\x1b" in value:
            assert "\\x1b" in text, text
        if "\x9b" in value:
            assert "\\x9b" in text, text


def ops(*argv: str, **adapters: Any) -> tuple[int, bytes]:
    """``python -m ops argv`` writing to a UTF-8 byte stream, as to a terminal's stdout."""
    stream = io.BytesIO()
    out = io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline="\n")
    code = main(list(argv), out=out, **adapters)
    out.flush()
    return code, stream.getvalue()


# ---- the dead-letter commands and the audit ---------------------------------------------------


async def test_dead_letter_commands_print_hostile_fields_as_text_and_finish_the_batch(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """The finding: a MessageId ``[/]`` crashed ``list``, and ``resubmit`` after its copies were
    sent; ``[link=...]`` made a link; a screen clear and an OSC 52 write reached the terminal."""
    exhaust(queue, message(order_body("ord-1"), message_id="ord-1"))  # healthy: resubmitted
    # An OrderPlaced whose MessageId is not its orderId: refused, its MessageId in the report.
    exhaust(queue, message(order_body("ord-2"), message_id=HOSTILE))
    # A Subject the consumer does not read: the function dead-letters it, the Subject in its
    # description; the properties and the body come back in ``show``.
    queue.send(
        OutgoingMessage(
            "ord-3",
            json.dumps(order_body("ord-3", customerId=CLIPBOARD)).encode(),
            subject=f"{LINK}{CLIPBOARD}",
            application_properties={HOSTILE: CLEAR_SCREEN},
        )
    )
    await host.run_until_idle()
    # Dead-lettered by another receiver, with a reason and a description of its choosing.
    other = f"ord-4{CLOSE_TAG}{CLIPBOARD}"
    queue.send(message(order_body("ord-4"), message_id=other))
    [delivery] = queue.receive(1)
    queue.dead_letter(delivery.lock_token, LINK, f"{CLEAR_SCREEN}{CLIPBOARD}{C1_CSI}")
    clock.advance(WINDOW)
    dead = LocalDeadLetterQueue(queue)

    code, printed = ops("list", queue=dead)
    text = assert_printed_as_text(printed)
    assert code == 0
    assert_shown_literally(text, HOSTILE, LINK)
    assert "4 dead letter(s)" in text

    code, printed = ops("list", "--json", queue=dead)
    rows = json.loads(assert_printed_as_text(printed))
    assert [row["messageId"] for row in rows] == ["ord-1", HOSTILE, "ord-3", other]  # exact
    assert rows[3]["reason"] == LINK

    code, printed = ops("show", HOSTILE, queue=dead)
    assert code == 0
    assert json.loads(assert_printed_as_text(printed))["messageId"] == HOSTILE
    code, printed = ops("show", "ord-3", queue=dead)
    shown = json.loads(assert_printed_as_text(printed))
    assert (shown["subject"], shown["applicationProperties"]) == (
        f"{LINK}{CLIPBOARD}",
        {HOSTILE: CLEAR_SCREEN},
    )

    code, printed = ops("resubmit", "--reason", MAX_DELIVERY_COUNT_EXCEEDED, queue=dead)
    text = assert_printed_as_text(printed)
    assert code == 1  # the hostile one refused: the operator must look
    assert_shown_literally(text, HOSTILE)
    assert "1 refused, 1 resubmitted" in text
    assert queued_ids(queue) == ["ord-1"]  # its copy sent, verified ...
    assert dead_ids(queue) == [HOSTILE, "ord-3", other]  # ... and its dead letter removed

    code, printed = ops("audit", "--since", "1h", queue=dead, audit=reader(app_env), clock=clock)
    text = assert_printed_as_text(printed)
    assert code == 1  # ord-4's reason is nobody's: its MessageId named
    assert_shown_literally(text, other)

    code, printed = ops("purge", "--reason", LINK, "--older-than", "1h", "--yes", queue=dead)
    text = assert_printed_as_text(printed)
    assert code == 0, text
    assert_shown_literally(text, LINK)
    assert dead_ids(queue) == [HOSTILE, "ord-3"]


def reader(app_env: dict[str, str]) -> CosmosAuditReader:
    return CosmosAuditReader(orders_container(app_env))


def orders_container(app_env: dict[str, str]) -> Any:
    return ops_container(
        app_env["COSMOS_ENDPOINT"],
        app_env["COSMOS_DATABASE"],
        app_env["COSMOS_CONTAINER"],
        key=app_env["COSMOS_KEY"],
        verify_tls=False,
    )


# ---- an order's history, as the function stored it -------------------------------------------


async def test_history_prints_a_hostile_change_as_text(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    app_env: dict[str, str],
    container: ContainerProxy,
) -> None:
    """A cancellation's reason and a change's MessageId are the producer's text, stored by the
    consumer as they came: the order's header line and its marker's row print them."""
    queue.send(message(order_body("ord-h1"), message_id="ord-h1"))
    # Placed first: with both in the queue at once the host may take the cancellation first,
    # and the OrderPlaced then ends stale with a marker of its own.
    await host.run_until_idle()
    reason = f"{LINK} {CLIPBOARD} {C1_CSI}"
    cancel_id = f"ord-h1:v2{HOSTILE}"
    queue.send(
        OutgoingMessage(
            cancel_id,
            json.dumps(cancelled_body("ord-h1", 2, reason=reason)).encode(),
            subject="OrderCancelled",
        )
    )
    await host.run_until_idle()
    partition = CosmosOrderHistory(orders_container(app_env))

    code, printed = ops("history", "ord-h1", partition=partition)
    text = assert_printed_as_text(printed)
    assert code == 0
    assert_shown_literally(text, HOSTILE, reason)
    assert "order ord-h1: cancelled" in text

    code, printed = ops("history", "ord-h1", "--json", partition=partition)
    history = json.loads(assert_printed_as_text(printed))
    assert history["order"]["cancellationReason"] == reason
    assert [marker["messageId"] for marker in history["markers"]] == [cancel_id]


# ---- the parked outbox events -----------------------------------------------------------------


async def test_parked_commands_print_hostile_documents_as_text(
    container: ContainerProxy, clock: ManualClock, app_env: dict[str, str]
) -> None:
    """A customerId is the producer's; a parked reason and description whatever the writer of
    the outbox document put there."""
    _, event = await accept_order(container, "ord-p1", accepted_at=clock.now(), customerId=HOSTILE)
    await container.replace_item(
        event["id"],
        {
            **event,
            OutboxField.STATUS: STATUS_PARKED,
            OutboxField.PARKED_AT: clock.now().isoformat(),
            OutboxField.PARKED_REASON: LINK,
            OutboxField.PARKED_DESCRIPTION: f"{HOSTILE}{CLIPBOARD}",
        },
    )
    clock.advance(timedelta(hours=1))
    outbox = CosmosOutboxDocuments(orders_container(app_env))

    code, printed = ops("parked", "list", outbox=outbox, clock=clock)
    text = assert_printed_as_text(printed)
    assert code == 0
    assert_shown_literally(text, HOSTILE, LINK)

    code, printed = ops("parked", "show", "ord-p1", outbox=outbox, clock=clock)
    shown = json.loads(assert_printed_as_text(printed))
    assert shown["order"]["customerId"] == HOSTILE

    code, printed = ops(
        "parked", "republish", "--reason", LINK, "--dry-run", outbox=outbox, clock=clock
    )
    text = assert_printed_as_text(printed)
    assert code == 0, text
    assert "1 outbox event(s)" in text


# ---- the stock items, as the stock reservation consumer wrote them ---------------------------

HOSTILE_SKU = f"{CLOSE_TAG}{CLEAR_SCREEN}{C1_CSI}{LINK}"  # 64 characters at most


async def test_stock_commands_print_a_hostile_sku_as_text(
    app_env: dict[str, str], inventory_name: str, inventory: Any
) -> None:
    """A SKU comes in an order's lines: any text of up to 64 characters."""
    tool = CosmosInventory(inventory)
    code, printed = ops("stock", "set", HOSTILE_SKU, "5", inventory=tool)
    assert code == 0
    assert_shown_literally(assert_printed_as_text(printed), HOSTILE_SKU)
    outcomes = await reserve(app_env, inventory_name, event_message("o-1", 1, {HOSTILE_SKU: 2}))
    assert outcomes == [Outcome.PROCESSED]

    for command in ("show", "audit"):
        code, printed = ops("stock", command, inventory=tool)
        text = assert_printed_as_text(printed)
        assert code == 0, text
        assert_shown_literally(text, HOSTILE_SKU)
    code, printed = ops("stock", "show", "--json", inventory=tool)
    [row] = json.loads(assert_printed_as_text(printed))["skus"]
    assert (row["sku"], row["onHand"], row["reserved"]) == (HOSTILE_SKU, 5, 2)


# ---- the payment calls parked for reconciliation ----------------------------------------------


@pytest.fixture
async def parked_hostile(
    payments: ContainerProxy, provider: PaymentProviderStandIn
) -> AsyncIterator[ContainerProxy]:
    """A capture parked by the consumer for an event whose MessageId is hostile (the kit keys
    the call, and so the Idempotency-Key, by it)."""
    accepted = replace(ACCEPTED, message_id=HOSTILE)
    async with consumer_client(provider) as client:
        consumer = Consumer(payments, client)
        provider.inject(FaultRule(Fault.SLOW_BEFORE_COMMIT, delay_s=2.0))
        for count in (1, 2, 3):
            decision = await consumer.deliver(replace(accepted, delivery_count=count))
        assert decision.outcome is Outcome.INVALID  # parked: NeedsReconciliation
        yield payments


async def test_payments_commands_print_a_hostile_message_id_as_text(
    parked_hostile: ContainerProxy, provider: PaymentProviderStandIn
) -> None:
    base = [
        "--no-verify-tls",
        "payments",
        "--payments-container",
        parked_hostile.id,
        "--provider-url",
        provider.url,
    ]
    code, printed = await asyncio.to_thread(ops, *base, "parked")
    text = assert_printed_as_text(printed)
    assert code == 0
    assert_shown_literally(text, HOSTILE)
    assert "1 parked payment call(s)" in text

    code, printed = await asyncio.to_thread(ops, *base, "parked", "--json")
    [row] = json.loads(assert_printed_as_text(printed))["parked"]
    assert row["messageId"] == HOSTILE

    code, printed = await asyncio.to_thread(ops, *base, "resolve", "o-1", "--did-not-happen")
    text = assert_printed_as_text(printed)
    assert code == 1  # refused: the provider is still processing it
    assert_shown_literally(text, HOSTILE)
