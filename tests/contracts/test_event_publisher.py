"""The ``EventPublisher`` contract (``shared.relay.core.EventPublisher``), run by the Service Bus
adapter over the topic model (``local.standins.topic``: the SDK sender's surface, real
``ServiceBusMessage`` and ``ServiceBusMessageBatch``) and over a real ``ServiceBusSender`` whose
AMQP link is ``tests.relay.amqp_link``'s (the SDK's own batching, retries and error mapping).

What the relay relies on (``OutboxRelay._publish``): one result per event, aligned with the
events: None when the event was sent, else the error, a ``PublishError`` when classified (an
event too large for the entity is ``EventRejected``: parked; a refused send is retried); an
event whose entry is not None was not sent by this call, and one whose entry is None was, under
its ``eventId`` as MessageId (the topic's duplicate detection and downstream deduplication key
on it). No double implements this port (``local.standins.doubles`` says why).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from azure.servicebus._pyamqp.error import ErrorCondition
from azure.servicebus.exceptions import OperationTimeoutError

from local.standins.topic import OrderEventsTopic
from shared.adapters.servicebus_out import ServiceBusEventPublisher
from shared.relay.core import (
    EventPublisher,
    EventRejected,
    OutboundEvent,
    PublishError,
    build_event,
)
from tests.contracts.test_outbox_store import pending
from tests.relay.amqp_link import FakeSendLink, LinkNetwork, sender_on


@dataclass
class PublisherUnderTest:
    publisher: EventPublisher
    delivered_ids: Callable[[], list[str]]  # MessageIds the entity accepted, in order
    limit_message_bytes: Callable[[int], None]  # the entity's size limit, from now on
    refuse_next_send: Callable[[], None]  # the next send is refused as a whole


def event(order_id: str, **overrides: str) -> OutboundEvent:
    document = pending(order_id)
    document["payload"].update(overrides)
    return build_event({**document, "_etag": f"etag-{order_id}"})


def events(count: int) -> list[OutboundEvent]:
    return [event(f"ord-{index}") for index in range(count)]


class EventPublisherContract:
    """What every ``EventPublisher`` must do. Subclasses provide ``subject``."""

    @pytest.fixture
    def subject(self) -> PublisherUnderTest:
        raise NotImplementedError

    async def test_each_event_sent_is_none_and_goes_out_under_its_event_id(
        self, subject: PublisherUnderTest
    ) -> None:
        sent = events(3)

        results = await subject.publisher.publish(sent)

        assert results == [None, None, None]
        assert subject.delivered_ids() == [e.event_id for e in sent]

    async def test_nothing_to_publish_sends_nothing(self, subject: PublisherUnderTest) -> None:
        assert await subject.publisher.publish([]) == []
        assert subject.delivered_ids() == []

    async def test_events_beyond_one_send_s_size_all_go_out(
        self, subject: PublisherUnderTest
    ) -> None:
        subject.limit_message_bytes(1_500)  # two or three of these per send
        sent = events(7)

        results = await subject.publisher.publish(sent)

        assert results == [None] * 7
        assert subject.delivered_ids() == [e.event_id for e in sent]

    async def test_an_event_too_large_for_the_entity_is_rejected_alone(
        self, subject: PublisherUnderTest
    ) -> None:
        subject.limit_message_bytes(600)  # one event of ~570 bytes fits; the large one (~630) not
        small, large, last = event("ord-s"), event("ord-l", customerId="c" * 64), event("ord-t")

        results = await subject.publisher.publish([small, large, last])

        assert results[0] is None and results[2] is None
        assert isinstance(results[1], EventRejected)
        assert subject.delivered_ids() == [small.event_id, last.event_id]

    async def test_a_refused_send_reports_each_of_its_events_and_sends_none(
        self, subject: PublisherUnderTest
    ) -> None:
        subject.refuse_next_send()
        sent = events(3)

        results = await subject.publisher.publish(sent)

        assert len(results) == 3
        assert all(isinstance(result, PublishError) for result in results), results
        assert subject.delivered_ids() == []

    async def test_an_event_published_again_is_sent_again_without_error(
        self, subject: PublisherUnderTest
    ) -> None:
        """The relay's replay after a crash between the send and the mark: same MessageId; the
        entity's duplicate detection, not the publisher, drops the copy."""
        [again] = events(1)
        assert await subject.publisher.publish([again]) == [None]

        assert await subject.publisher.publish([again]) == [None]
        assert set(subject.delivered_ids()) == {again.event_id}


class TestServiceBusPublisherOnTheTopicModel(EventPublisherContract):
    @pytest.fixture
    def subject(self) -> PublisherUnderTest:
        topic = OrderEventsTopic.from_messaging_file()

        def limit(size: int) -> None:
            topic.max_batch_bytes = size

        def refuse() -> None:
            topic.fail_next_sends(lambda: OperationTimeoutError(message="injected: timed out"))

        return PublisherUnderTest(
            ServiceBusEventPublisher(topic),
            lambda: [m.message_id or "" for m in topic.delivered()],
            limit,
            refuse,
        )


@dataclass
class SizedLinkNetwork(LinkNetwork):
    """Links that advertise a batch size limit: the sender sizes its batches from the vendor
    link property ``com.microsoft:max-message-batch-size`` when present
    (aio/_servicebus_sender_async.py:248-258, _transport/_pyamqp_transport.py:411-428)."""

    max_batch_bytes: int | None = None

    def new_link(self) -> FakeSendLink:
        link = super().new_link()
        if self.max_batch_bytes is not None:
            properties = {b"com.microsoft:max-message-batch-size": self.max_batch_bytes}
            link._link.remote_properties = properties
        return link


class TestServiceBusPublisherOnTheSdkSender(EventPublisherContract):
    """The SDK's sender over a link without duplicate detection: the copy of an event published
    again is delivered twice here, which the contract allows (``delivered_ids`` as a set)."""

    @pytest.fixture
    async def subject(self) -> AsyncIterator[PublisherUnderTest]:
        network = SizedLinkNetwork(latency_s=0)
        sender = sender_on(network, "order-events")

        def limit(size: int) -> None:
            network.max_batch_bytes = size  # read when the sender opens its (first) link

        def refuse() -> None:
            # Not in the SDK's retryable set: one attempt, no backoff.
            network.reject_with = ErrorCondition.UnauthorizedAccess

        yield PublisherUnderTest(
            ServiceBusEventPublisher(sender, timeout_s=5), lambda: network.sent_ids, limit, refuse
        )
        await sender.close()
