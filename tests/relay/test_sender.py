"""The topic sender, held at the SDK's lowest boundary: a real ``ServiceBusSender`` over the fake
AMQP link of ``tests.relay.amqp_link`` (the sender's own ``_open``, retries and error mapping
run; only the pyamqp client under it is replaced).

Each test fails on 223dafd:
- concurrent invocations on one cold sender opened two links and closed one under the other
  (no serialisation in ``ServiceBusEventPublisher``);
- a hung link was waited on for ever (no timeout on ``create_message_batch`` or
  ``send_messages``);
- a retryable ``ServiceBusError`` (``amqp:internal-error``) was unclassified, so the relay
  parked a healthy event after ten attempts;
- a malformed ``ServiceBusConnection`` failed with the SDK's bare ``ValueError``, not a
  configuration error naming the setting, and was recorded as nothing but a log.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest
from azure.cosmos.aio import ContainerProxy
from azure.servicebus._pyamqp.error import ErrorCondition

from local.assembly.world import World
from local.standins.broker import ManualClock
from local.standins.change_feed import ChangeFeedEmulator
from shared.adapters.servicebus_out import ServiceBusEventPublisher, translate
from shared.relay.core import FailureKind, PublishUnavailable, build_event, classify
from tests.relay.amqp_link import LinkNetwork, sender_on, service_bus_error
from tests.relay.conftest import RelayCaptured, accept_order, new_order_ids, outbox_by_order

TOPIC = "order-events"


async def test_concurrent_relay_invocations_share_one_link_and_never_close_it_under_a_send(
    world: World,
    container: ContainerProxy,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    network = LinkNetwork()
    sender = sender_on(network, TOPIC)
    world.compose(topic_sender=sender, relay_telemetry=captured_relay.telemetry)
    ids = new_order_ids(8)
    for order_id in ids:
        await accept_order(container, order_id, accepted_at=clock.now())
    outbox = [d for d in (await outbox_by_order(container)).values()]
    feed = world.change_feed

    # Four leases, four invocations at once on the process's one (cold) sender.
    results = await asyncio.gather(*(feed.invoke(outbox[i::4]) for i in range(4)))

    assert [r.error for r in results if not r.succeeded] == []
    assert len(network.links) == 1  # opened once, not once per invocation
    assert network.closed_under_use == 0
    assert network.in_flight_peak == 1  # one operation at a time on the sender
    assert sorted(network.sent_ids) == sorted(d["eventId"] for d in outbox)
    assert {d["status"] for d in (await outbox_by_order(container)).values()} == {"dispatched"}
    await sender.close()


def _event(order_id: str) -> object:
    created = "2026-11-29T12:00:00.000000Z"
    return build_event(
        {
            "id": f"{order_id}:OrderAccepted",
            "orderId": order_id,
            "type": "outbox",
            "eventType": "OrderAccepted",
            "eventId": "5d0f4c58-1a6f-5b7c-9d4e-3c2b1a0f9e8d",
            "status": "pending",
            "createdAt": created,
            "payload": {
                "orderId": order_id,
                "customerId": "cust-1",
                "currency": "EUR",
                "totalMinor": 100,
                "placedAt": created,
                "lineCount": 1,
            },
        }
    )


@pytest.mark.parametrize("where", ["hang_open", "hang_send"])
async def test_a_hung_link_is_bounded_and_reported_as_unavailable(where: str) -> None:
    network = LinkNetwork(hang_open=where == "hang_open", hang_send=where == "hang_send")
    sender = sender_on(network, TOPIC)
    publisher = ServiceBusEventPublisher(sender, timeout_s=0.2)
    events = [_event("ord-a"), _event("ord-b")]

    started = datetime.now(UTC)
    results = await asyncio.wait_for(publisher.publish(events), timeout=10)  # type: ignore[arg-type]

    assert (datetime.now(UTC) - started).total_seconds() < 5
    assert all(isinstance(r, PublishUnavailable) for r in results), results
    assert network.sent_ids == []


async def test_publishes_queued_behind_a_hung_link_give_up_within_the_lock_wait() -> None:
    """Twelve invocations publish at once on one sender whose link never answers a send. Each
    holder fails after its bound (0.2 s, plus the 1 s grace); a waiter gives up after
    ``lock_wait_s`` and reports its event unavailable, not after every holder before it. Fails
    on 95191bf: the k-th publish returned after k holds (the 12th after about 14 s; in Azure,
    the 10th after 311 s, past functionTimeout)."""
    network = LinkNetwork(hang_send=True)
    sender = sender_on(network, TOPIC)
    publisher = ServiceBusEventPublisher(sender, timeout_s=0.2, lock_wait_s=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def publish_one(order_id: str) -> tuple[float, BaseException | None]:
        [result] = await publisher.publish([_event(order_id)])  # type: ignore[list-item]
        return loop.time() - started, result

    outcomes = await asyncio.wait_for(
        asyncio.gather(*(publish_one(f"ord-{index}") for index in range(12))), timeout=60
    )

    hold_s = 0.2 + 1.0  # one hung send: the adapter's bound
    slack_s = 1.0  # a loaded machine
    assert max(elapsed for elapsed, _ in outcomes) <= 0.5 + hold_s + slack_s, outcomes
    assert all(isinstance(result, PublishUnavailable) for _, result in outcomes), outcomes
    waited = [result for _, result in outcomes if result is not None and "busy" in str(result)]
    assert len(waited) >= 10  # gave up waiting (one or two got the sender in time)
    assert all(isinstance(result.__cause__, TimeoutError) for result in waited)
    assert network.sent_ids == []
    await sender.close()


@pytest.mark.parametrize(
    ("condition", "on", "kind"),
    [
        # The link, its session or its connection: a new link cures it.
        (ErrorCondition.LinkStolen, "link", FailureKind.TRANSIENT),
        (ErrorCondition.LinkRedirect, "link", FailureKind.TRANSIENT),
        (ErrorCondition.SessionErrantLink, "link", FailureKind.TRANSIENT),
        (ErrorCondition.SessionUnattachedHandle, "link", FailureKind.TRANSIENT),
        (ErrorCondition.IllegalState, "link", FailureKind.TRANSIENT),
        (ErrorCondition.ConnectionFramingError, "connection", FailureKind.TRANSIENT),
        (ErrorCondition.InternalError, "disposition", FailureKind.TRANSIENT),  # retryable
        # The system: the topic gone, the identity refused.
        (ErrorCondition.ResourceDeleted, "link", FailureKind.SYSTEMIC),
        (ErrorCondition.NotFound, "link", FailureKind.SYSTEMIC),
        (ErrorCondition.UnauthorizedAccess, "link", FailureKind.SYSTEMIC),
        # Maybe the message's: charged to an event only once it fails alone.
        (ErrorCondition.DecodeError, "disposition", FailureKind.UNEXPECTED),
        (ErrorCondition.InvalidField, "disposition", FailureKind.UNEXPECTED),
        (ErrorCondition.NotAllowed, "disposition", FailureKind.UNEXPECTED),
        # Alone too large: the event's own.
        (ErrorCondition.LinkMessageSizeExceeded, "disposition", FailureKind.EVENT),
    ],
)
def test_the_sdk_s_errors_are_classified_by_their_amqp_condition(
    condition: ErrorCondition, on: str, kind: FailureKind
) -> None:
    """What a retry can fix, read from the condition the SDK keeps on its error. Fails on
    95191bf for the link and session conditions and ``amqp:resource-deleted`` (a plain,
    non-retryable ``ServiceBusError``: unclassified, parked at the tenth attempt)."""
    assert classify(translate(service_bus_error(condition, on=on))) is kind


async def test_a_retryable_service_bus_error_is_transient_and_never_parks(
    world: World,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    captured_relay: RelayCaptured,
) -> None:
    # Every send rejected with amqp:internal-error: the SDK marks it retryable and retries it
    # itself (retry_total 3: four attempts; its backoff shortened here), then raises.
    network = LinkNetwork(reject_with=ErrorCondition.InternalError)
    sender = sender_on(network, TOPIC, retry_backoff_factor=0.001)
    world.compose(topic_sender=sender, relay_telemetry=captured_relay.telemetry)
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())
    batch = await change_feed.read_changes()

    # Past the relay's bound for unclassified errors (10 attempts): still not parked.
    result = await change_feed.invoke(batch, retry_count=20)

    assert not result.succeeded and str(result.error).startswith("RelayIncomplete")
    assert network.send_attempts == 4  # the SDK's own: 1 + retry_total (3)
    assert (await outbox_by_order(container))[order_id]["status"] == "pending"
    assert captured_relay.total("orders.relay.parked") == 0
    [span] = captured_relay.send_spans()
    assert span.attributes is not None
    assert span.attributes["orders.relay.outcome"] == "failed"
    assert span.attributes["orders.error_type"] == "ServiceBusError"
    await sender.close()


async def test_a_malformed_connection_string_is_a_configuration_error_naming_the_setting(
    world: World,
    container: ContainerProxy,
    change_feed: ChangeFeedEmulator,
    clock: ManualClock,
    captured_relay: RelayCaptured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {
        **{k: v for k, v in world.env.items() if not k.startswith("ServiceBusConnection")},
        "ServiceBusConnection": "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k",
    }
    # No sender passed in: the app builds its own from the settings, as in Azure.
    world.compose(env=env, topic_model=False, relay_telemetry=captured_relay.telemetry)
    [order_id] = new_order_ids(1)
    await accept_order(container, order_id, accepted_at=clock.now())

    with caplog.at_level(logging.CRITICAL, logger="orders.relay"):
        stats = await change_feed.drain(max_attempts_per_batch=2)

    assert stats.stalled and stats.failed_invocations == 2
    assert all(
        error.startswith("ConfigurationError: ServiceBusConnection:") for error in stats.errors
    )
    [critical, _] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical.setting == "ServiceBusConnection"  # type: ignore[attr-defined]
    assert "sb://x.servicebus" not in critical.getMessage()  # the string is never echoed
    # Recorded like any failed send: the failed-sends alert and Q12 see it.
    [failed] = captured_relay.points("orders.relay.failed")
    assert failed.attributes == {"orders.topic": TOPIC, "error.type": "ConfigurationError"}
    assert getattr(failed, "value", None) == 2
    assert (await outbox_by_order(container))[order_id]["status"] == "pending"
