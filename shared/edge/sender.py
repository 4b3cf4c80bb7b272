"""The port through which the public edge hands a message to the ``orders`` queue.

``send`` sends one message, its MessageId, Subject and body as given, or raises: ``SendFailed``
when the queue did not take it for a reason a retry can fix (throttled, unreachable, a timeout:
whether it was enqueued is then unknown), anything else for a bug. Sending the same MessageId
again is safe by design: the queue's duplicate detection drops a copy inside its window, and
past it the consumer recognises it (an OrderPlaced's order document, a change's inbox marker
or its version: docs/lifecycle.md).

The adapter is ``shared.adapters.servicebus_out.ServiceBusOrderSender`` (azure-servicebus);
``tests/edge`` use a recording double for the core.
"""

from __future__ import annotations

from typing import Protocol


class SendFailed(Exception):
    """The queue did not take the message, for now; whether a copy got through is unknown."""


class MessageSender(Protocol):
    async def send(self, message_id: str, subject: str, body: bytes) -> None: ...
