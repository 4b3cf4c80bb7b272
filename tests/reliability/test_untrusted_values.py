"""Untrusted text in what operators read (issue 36, findings 6 to 8), through the real function on
the local Functions host (Microsoft's worker, the real azure-cosmos SDK), the telemetry on
in-memory OpenTelemetry SDK exporters:

- a message's field values reach no dead-letter description, span or log record, whichever
  consumer refuses it (the stock and payment consumers' own tests hold theirs;
  ``examples/units_sold.py`` has no function: the kit's ``Consumer`` runs it here);
- a MessageId is quoted in a log message: a newline forges no second line, an ESC reaches no
  terminal;
- a connection string pasted into ``COSMOS_ENDPOINT`` shows nothing of itself in the critical
  log, and a bad endpoint URL only its scheme and host.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from idempotent_consumer import Consumer, Decision, IncomingMessage, decide
from idempotent_consumer.testing import InMemoryDocumentStore

from examples.units_sold import units_sold
from local.standins.broker import ManualClock, PeekLockQueue
from local.standins.host import LocalFunctionsHost
from shared import bootstrap
from shared.telemetry import names
from tests.conftest import ComposeApp, manual_time
from tests.orders import message, order_body
from tests.payments.conftest import exported
from tests.state import settlements
from tests.telemetry.conftest import make_captured
from tests.telemetry.kept_out import (
    ADDRESS,
    FORGING_ID,
    MARK,
    TOO_LONG,
    consumer_records,
    exported_logs,
    marked_event,
    showing,
    unquoted,
)

# ---- finding 6: no field value in a description, a span or a log record ----------------------


async def test_an_unknown_subject_reaches_no_description(
    host: LocalFunctionsHost, queue: PeekLockQueue
) -> None:
    """A Subject is the sender's text, markup and control characters included: the dead letter
    keeps it, its description names only what the consumer reads."""
    subject = f"[/]{MARK}\x1b]52;c;AAAA\x07"
    queue.send(replace(message(order_body()), subject=subject))

    await host.run_until_idle()

    [dead] = queue.dead_letters
    assert dead.reason == "UnsupportedMessageType"
    assert dead.description == (
        "the Subject is not a type it reads (OrderPlaced, OrderAmended, OrderCancelled)"
    )


async def test_an_invalid_order_s_values_reach_no_description_span_or_log(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    compose_app: ComposeApp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The order consumer: an address (echoed by pydantic with its whole object for the missing
    currency) and a customer id over its limit."""
    captured = make_captured()
    compose_app(telemetry=captured.telemetry)
    body = {**ADDRESS, **order_body(), "customerId": TOO_LONG}
    del body["currency"]
    queue.send(message(body))

    with exported_logs() as logs:
        await host.run_until_idle()

    [dead] = queue.dead_letters
    assert dead.reason == "InvalidPayload"
    places = showing(
        MARK,
        descriptions=[dead.description],
        spans=captured.consumer_spans(),
        records=caplog.records,
        exported=logs,
    )
    assert places == []
    assert dead.description == (
        "customerId: String should have at most 64 characters; currency: Field required"
    )


async def test_an_invalid_sale_s_values_reach_no_description_span_or_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/your-own-consumer.md's consumer (``examples/units_sold.py``), run as the kit runs every
    consumer (``Consumer``: decide, settle, report to a ``ConsumerTelemetry``); its refusal never
    reads the store, so the kit's in-memory one stands for it."""
    now = datetime(2026, 11, 30, 9, tzinfo=UTC)
    telemetry = exported("order-events", "units-sold", units_sold.name)
    settled: list[Decision] = []

    async def decide_sale(incoming: IncomingMessage, _traceparent: str | None) -> Decision:
        return await decide(
            units_sold, incoming, InMemoryDocumentStore(), marker_ttl_s=600, now=now
        )

    async def settle(decision: Decision) -> None:
        settled.append(decision)

    sale = IncomingMessage(
        "m-6",
        json.dumps(marked_event()).encode(),
        delivery_count=1,
        locked_until=now + timedelta(seconds=60),
        subject="OrderAccepted",
    )
    consumer = Consumer(decide_sale, telemetry.telemetry, clock=ManualClock(now))

    with exported_logs() as logs:
        await consumer.handle(sale, settle)

    [dead] = settled
    assert dead.deadletter_reason == "InvalidPayload"
    places = showing(
        MARK,
        descriptions=[dead.description],
        spans=telemetry.spans.get_finished_spans(),
        records=caplog.records,
        exported=logs,
    )
    assert places == []
    assert dead.description == "payload.orderId: Field required"


# ---- finding 7: a message's values quoted in every log message -------------------------------


async def test_a_message_id_that_would_forge_a_line_is_one_quoted_log_record(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    compose_app: ComposeApp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Dead-lettered (an OrderPlaced's MessageId is its orderId): one record, one line, the
    MessageId escaped as Python escapes a string (``repr``)."""
    compose_app()
    caplog.set_level(logging.INFO, logger=names.LOGGER_NAME)
    queue.send(message(order_body(), message_id=FORGING_ID))

    await host.run_until_idle()

    assert [r.reason for r in queue.dead_letters] == ["MessageIdMismatch"]
    [record] = consumer_records(caplog.records)
    assert unquoted([record]) == []
    assert repr(FORGING_ID) in record.getMessage()
    assert getattr(record, "message_id") == FORGING_ID  # noqa: B009 (the field keeps it as sent)


async def test_a_failed_settlement_s_log_quotes_the_message_id(
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    compose_app: ComposeApp,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The delivery's lock expired before it was decided: its settlement fails (lock lost). The
    failure's own text is the host's, over gRPC (several lines, none of them the sender's)."""
    compose_app()
    queue.send(message(order_body(), message_id=FORGING_ID))
    [delivery] = queue.receive(1)
    clock.advance(delivery.locked_until - clock.now() + timedelta(seconds=1))

    await host.invoke(delivery)

    records = consumer_records(caplog.records)
    [failed] = [r for r in records if hasattr(r, "settlement_error")]
    assert repr(FORGING_ID) in failed.getMessage()
    assert FORGING_ID not in failed.getMessage()
    assert unquoted([r for r in records if r is not failed]) == []


# ---- finding 8: nothing of a connection string, only scheme and host of a bad URL ------------

ACCOUNT_KEY = f"{MARK}KeyMaterial0123456789abcdefghijklmnopqrstuvwxyzAB=="


@pytest.mark.parametrize(
    ("endpoint", "shown", "hidden"),
    [
        (
            f"AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey={ACCOUNT_KEY};",
            "looks like a connection string",
            ("acct.documents", ACCOUNT_KEY[:4], "AccountKey="),
        ),
        (
            f"http://admin:{MARK}@acct.example:8081/path?sig={MARK}",
            "'http://acct.example'",
            (MARK, "admin", "/path", "sig="),
        ),
    ],
    ids=["connection-string", "url-with-userinfo-path-query"],
)
async def test_a_bad_cosmos_endpoint_shows_only_scheme_and_host_in_the_critical_log(
    endpoint: str,
    shown: str,
    hidden: tuple[str, ...],
    host: LocalFunctionsHost,
    queue: PeekLockQueue,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("COSMOS_ENDPOINT", endpoint)
    bootstrap.configure(bootstrap.Composition(**manual_time(clock)))  # the worker's environment
    queue.send(message(order_body(), message_id=FORGING_ID))

    await host.invoke(queue.receive(1)[0])

    assert settlements(queue) == [("abandon", True)]
    [critical] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert getattr(critical, "setting") == "COSMOS_ENDPOINT"  # noqa: B009
    assert shown in critical.getMessage()
    logged = caplog.text + "".join(str(vars(r)) for r in caplog.records)
    assert [piece for piece in hidden if piece in logged] == []
    assert unquoted(consumer_records(caplog.records)) == []
