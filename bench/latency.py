"""Round trips for the relay bench (``bench.relay``): the local Cosmos server and the topic model
answer in microseconds, so a relay that marks one event after another would look as fast here
as one that marks them together. These two stand-ins add the round trip Azure would.

- ``RoundTripTransport``: an azure-core transport (the shared counting one: fault rules and
  counts still work, and the runtimes the bench replaces do not close it) that holds every
  document request (``/docs``: creates, batches, patches, reads) ``round_trip_s`` of real time
  before sending it. Metadata reads (account, collection, ranges)
  are once per client and are not held.
- ``RoundTripTopicSender``: the topic model at the SDK sender's surface, each
  ``send_messages`` held ``round_trip_s`` before it reaches the topic; ``create_message_batch``
  is not, as the SDK opens the link only when it has no max message size yet and then builds
  the batch locally (aio/_servicebus_sender_async.py:508-517).

The values (``COSMOS_ROUND_TRIP_S``, ``SEND_ROUND_TRIP_S``, ``FEED_READ_ROUND_TRIP_S``) are this
bench's assumptions, each named with what it rests on. Nothing here is product code.
"""

from __future__ import annotations

import asyncio
from typing import Any

from azure.core.pipeline.transport import AsyncHttpResponse, HttpRequest
from azure.servicebus import ServiceBusMessageBatch

from bench.transport import METADATA, SharedCountingTransport, classify
from shared.adapters.servicebus_out import MessageBatchSender

# A Cosmos DB document request in the app's region. Microsoft publishes "calls made from within
# the same region complete within 1-2 ms" (learn.microsoft.com/azure/cosmos-db/nosql/
# performance-tips-java-sdk-v4, Networking) and "<10-ms latency reads and <15-ms latency writes
# at the 99th percentile" (learn.microsoft.com/azure/cosmos-db/table-support, the Cosmos DB
# SLA's figures): 10 ms is five times the typical figure, near the bound for writes.
COSMOS_ROUND_TRIP_S = 0.010
# A send to a Service Bus topic: no figure is published [assumption: as a Cosmos DB write].
SEND_ROUND_TRIP_S = 0.010
# One page of the change feed, read by the host before each batch [assumption: a Cosmos DB read].
FEED_READ_ROUND_TRIP_S = 0.010


class RoundTripTransport(SharedCountingTransport):
    def __init__(self, round_trip_s: float = COSMOS_ROUND_TRIP_S, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.round_trip_s = round_trip_s

    async def send(self, request: HttpRequest, **kwargs: Any) -> AsyncHttpResponse:
        if self.round_trip_s and classify(request) != METADATA:
            await asyncio.sleep(self.round_trip_s)
        return await super().send(request, **kwargs)


class RoundTripTopicSender:
    """``MessageBatchSender`` over another one (the world's topic model), sends held."""

    def __init__(self, inner: MessageBatchSender, round_trip_s: float = SEND_ROUND_TRIP_S) -> None:
        self._inner = inner
        self.round_trip_s = round_trip_s
        self.sends = 0

    async def create_message_batch(
        self, max_size_in_bytes: int | None = None
    ) -> ServiceBusMessageBatch:
        return await self._inner.create_message_batch(max_size_in_bytes)

    async def send_messages(
        self,
        message: Any,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the SDK's signature
    ) -> None:
        self.sends += 1
        await asyncio.sleep(self.round_trip_s)
        await self._inner.send_messages(message, timeout=timeout)
