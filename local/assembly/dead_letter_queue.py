"""The dead-letter port over the local broker model (``local.standins.broker.PeekLockQueue``), for
tests, the demo and the benchmark: the Service Bus adapter itself (``ops.servicebus``), on a real
``ServiceBusClient`` whose AMQP handlers speak to the model (``local.standins.servicebus_link``). So
the tool takes the same receive-and-settle path here as in Azure, and the model offers only what
Service Bus offers. Like Service Bus, a send is not told whether duplicate detection dropped the
copy: the tool must find out by looking, as it must in Azure."""

from __future__ import annotations

from idempotent_consumer import SYSTEM_CLOCK, Clock

from local.standins.broker import PeekLockQueue
from local.standins.servicebus_link import LocalNamespace, servicebus_client
from ops.servicebus import ServiceBusDeadLetterQueue

# The model delivers at once: a short wait tells "nothing left to give" quickly.
LOCAL_RECEIVE_WAIT_S = 0.2


class LocalDeadLetterQueue(ServiceBusDeadLetterQueue):
    """The Service Bus adapter on ``queue``: the window from the queue's settings (what
    infra/messaging.json deploys) and its clock; ``namespace`` to share one with other entities
    or to inject faults (``LocalNamespace.before_operation``). Construction only: it behaves as
    the Service Bus adapter, because it is that adapter."""

    def __init__(
        self,
        queue: PeekLockQueue,
        namespace: LocalNamespace | None = None,
        *,
        wall_clock: Clock = SYSTEM_CLOCK,
        peek_limit: int = 10_000,
        receive_batch: int = 100,
        max_receives: int = 3,
    ) -> None:
        name = queue.settings.queue_name
        super().__init__(
            servicebus_client(namespace or LocalNamespace({name: queue}, client_clock=wall_clock)),
            name,
            queue.settings.duplicate_detection_window,
            clock=queue.clock,
            wall_clock=wall_clock,
            peek_limit=peek_limit,
            receive_batch=receive_batch,
            receive_wait_s=LOCAL_RECEIVE_WAIT_S,
            max_receives=max_receives,
        )
