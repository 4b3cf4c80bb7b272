"""``python -m ops ... --subscription inventory``: the stock reservation's dead letters, read from
its subscription of the local ``order-events`` topic through the tool's Service Bus adapter on
the real SDK (its subscription receiver and its topic sender, over the local broker link). What
an operator checks: each verdict and its reason, what is left in the subscription's dead-letter
queue, and where the copies went. (The payments subscription's, around a parked call, are in
tests/ops/test_payments.py.)"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

from idempotent_consumer import IncomingMessage

from local.standins.broker import ManualClock, OutgoingMessage
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from local.standins.topic import RETAINED_SUBSCRIPTION, OrderEventsTopic
from ops.cli import main
from ops.servicebus import ServiceBusDeadLetterQueue
from tests.stock.events import event_body, event_message

EXHAUSTED = event_message("o-1", 1, {"A": 2})


def without_lines() -> IncomingMessage:
    subject, body = event_body("o-2", 1, {"A": 1})
    del body["payload"]["lines"]
    return IncomingMessage(body["eventId"], json.dumps(body).encode(), subject=subject)


MISSING_LINES = without_lines()


def published(event: IncomingMessage) -> OutgoingMessage:
    return OutgoingMessage(event.message_id, event.body, subject=event.subject)


def dead_letters_of(topic: OrderEventsTopic, clock: ManualClock) -> ServiceBusDeadLetterQueue:
    namespace = LocalNamespace(
        {
            f"{topic.name}/subscriptions/{name}": queue
            for name, queue in topic.subscriptions.items()
        },
        topics={topic.name: topic},
    )
    return ServiceBusDeadLetterQueue(
        servicebus_client(namespace),
        topic.name,
        timedelta(days=1),
        subscription="inventory",
        clock=clock,
        receive_wait_s=0.2,
    )


def tool(queue: ServiceBusDeadLetterQueue, *argv: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main([*argv, "--subscription", "inventory", "--json"], queue=queue, out=out)
    return code, json.loads(out.getvalue())


def test_inventory_dead_letters_are_refused_by_its_contract_or_resubmitted_to_the_topic() -> None:
    clock = ManualClock()
    topic = OrderEventsTopic.from_messaging_file(
        clock, subscriptions=(RETAINED_SUBSCRIPTION, "inventory", "payments")
    )
    inventory, payments = topic.subscriptions["inventory"], topic.subscriptions["payments"]
    topic.send_batch([published(EXHAUSTED), published(MISSING_LINES)])
    for reason in ("MaxDeliveryCountExceeded", "MissingLines"):  # as the consumer's settlement
        [delivery] = inventory.receive(1)
        inventory.dead_letter(delivery.lock_token, reason, "test")
    queue = dead_letters_of(topic, clock)

    code, listed = tool(queue, "list")
    assert code == 0
    assert [row["reason"] for row in listed] == ["MaxDeliveryCountExceeded", "MissingLines"]

    ids = [str(EXHAUSTED.message_id), str(MISSING_LINES.message_id)]
    code, report = tool(queue, "resubmit", *ids)
    results = {row["messageId"]: row for row in report["results"]}
    assert code == 1
    assert results[ids[0]]["verdict"] == "held"  # the topic would drop a copy inside its window
    assert results[ids[1]]["verdict"] == "refused"
    assert "MissingLines" in results[ids[1]]["detail"]

    clock.advance(timedelta(days=2))
    code, report = tool(queue, "resubmit", *ids)
    results = {row["messageId"]: row for row in report["results"]}
    assert code == 1  # the refused one
    assert results[ids[0]]["verdict"] == "resubmitted", results
    assert results[ids[1]]["verdict"] == "refused"
    assert [letter.message.message_id for letter in inventory.dead_letters] == [ids[1]]
    # The copy went to the topic: a copy in each subscription (the payment capture's a duplicate).
    assert [m.message.message_id for m in inventory.peek(1, 10)] == [ids[0]]
    assert [m.message.message_id for m in payments.peek(1, 10)][-1] == ids[0]
