"""No field value of a customer's order reaches what operators and Service Bus keep: a
dead-letter description, a log record (message and every extra field) or a span (attributes,
status, events), whatever invalid body arrives. Hypothesis generates invalid bodies whose field
values are marked secrets, and runs each through the consumer with real OpenTelemetry SDK
exporters and the consumer's own logger.

The message id is the one input value that is meant to be seen (it names the delivery), so the
secrets go everywhere else: every contract field, a line's fields, an unknown field, a body cut
short in the middle of a value.

Kills any mutant that lets an input value into a description: ``schema_violations``'s problem
lines (``shared.kit.message``), the schema-version echo, the parse error's text.
(``include_input=True`` there is equivalent: pydantic then adds an ``input`` key that
``schema_violations`` never reads; docs/testing.md.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import string
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from idempotent_consumer import Outcome
from idempotent_consumer.servicebus import Settler, to_incoming
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from local.standins.doubles import DEADLETTER, InMemoryOrderStore, RecordingActions
from shared.consumer.service import OrderConsumer
from shared.telemetry.consumer import ConsumerTelemetry
from shared.telemetry.names import LOGGER_NAME
from tests.orders import order_body
from tests.unit.doubles import received

MARK = "S3cr3t"
SECRETS = st.text(string.ascii_letters + string.digits, min_size=12, max_size=24).map(
    lambda text: MARK + text
)

# Each puts a secret where the contract refuses it (too long, wrong pattern, wrong type).
Breaker = Callable[[dict[str, Any], str], None]
BREAKERS: dict[str, Breaker] = {
    "customerId too long": lambda body, secret: body.update(customerId=secret * 4),
    "currency": lambda body, secret: body.update(currency=secret),
    "placedAt": lambda body, secret: body.update(placedAt=secret),
    "schemaVersion as text": lambda body, secret: body.update(schemaVersion=secret),
    "sku too long": lambda body, secret: body["lines"][0].update(sku=secret * 4),
    "quantity as text": lambda body, secret: body["lines"][0].update(quantity=secret),
    "price as text": lambda body, secret: body["lines"][1].update(unitPriceMinor=secret),
    "a line as text": lambda body, secret: body["lines"].append(secret),
    "lines as text": lambda body, secret: body.update(lines=secret),  # last: replaces the lines
}


@st.composite
def invalid_bodies(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """An invalid body and the secrets it carries."""
    body = order_body()
    secrets: list[str] = []
    names = draw(st.lists(st.sampled_from(list(BREAKERS)), min_size=1, unique=True))
    for name in sorted(names, key=list(BREAKERS).index):
        secret = draw(SECRETS)
        BREAKERS[name](body, secret)
        secrets.append(secret)
    if draw(st.booleans()):  # an unknown field: ignored by the contract, never echoed either
        secret = draw(SECRETS)
        body["note"] = secret
        secrets.append(secret)
    raw = json.dumps(body).encode()
    if draw(st.booleans()):  # cut short inside a secret: not JSON at all
        raw = raw[: raw.index(MARK.encode()) + len(MARK) + 3]
    return raw, secrets


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def span_texts(spans: InMemorySpanExporter) -> list[str]:
    texts: list[str] = []
    for span in spans.get_finished_spans():
        texts += [str(value) for value in (span.attributes or {}).values()]
        texts.append(span.status.description or "")
        for event in span.events:
            texts += [event.name, *(str(value) for value in (event.attributes or {}).values())]
    return texts


def record_texts(records: list[logging.LogRecord]) -> list[str]:
    return [record.getMessage() for record in records] + [
        str(value) for record in records for value in vars(record).values()
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=invalid_bodies())
def test_no_input_value_reaches_a_dead_letter_description_a_log_or_a_span(
    case: tuple[bytes, list[str]],
) -> None:
    raw, secrets = case
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    consumer = OrderConsumer(InMemoryOrderStore(), ConsumerTelemetry("orders", provider))
    actions = RecordingActions()
    message = received(order_body())
    message.body = raw
    records = Records()
    logger = logging.getLogger(LOGGER_NAME)  # its own: whatever propagation is set to
    logger.addHandler(records)
    level, logger.level = logger.level, logging.DEBUG
    try:
        settler = Settler()
        decision = asyncio.run(
            consumer.handle(to_incoming(message), settler.bound(actions, message))
        )
    finally:
        settler.close()
        logger.removeHandler(records)
        logger.setLevel(level)

    assert decision.outcome is Outcome.INVALID
    descriptions = [call.deadletter_error_description for call in actions.calls]
    assert actions.operations == [DEADLETTER] and descriptions[0]
    seen = [*descriptions, *record_texts(records.records), *span_texts(spans)]
    assert records.records and spans.get_finished_spans()
    leaked = [text for text in seen if text and MARK in text]
    assert leaked == [], f"input values reached {leaked!r} (secrets {secrets})"
