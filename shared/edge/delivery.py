"""Step 6 of a request (``shared.edge.core``'s docstring), one function for everyone who takes
it: send a recorded intent's message, then mark its record sent.

``send_then_mark`` sends the intent's message as recorded (MessageId, Subject, the exact body
bytes) through the ``MessageSender`` port, then commits the record's sent mark
(``requests.mark_sent``: ``sent`` true, the key's 24 h ttl starting). The send's errors are
raised as the sender raised them, nothing marked (``SendFailed``: the queue did not take it for
now; the intent stays recorded, ``sent: false``, for a retry of the key or the completer). A
mark the store refused is returned, not raised: the message is sent, so the request is done;
unmarked, the next one to find the record (a retry of the key, the completer) sends it once
more, with the same MessageId, which the queue's duplicate detection and the consumer absorb
(``shared.edge.sender``).

Its callers: the edge's first handling of a request and a repeat that finds it unsent
(``OrdersEdge._deliver``), and the request completer (``shared.edge.completer``), which sends
what nobody retried. Pure: no Azure, no I/O of its own.
"""

from __future__ import annotations

from idempotent_consumer import DocumentStore, StoreError

from shared.edge.requests import Intent, mark_sent
from shared.edge.sender import MessageSender


async def send_then_mark(
    store: DocumentStore, sender: MessageSender, intent: Intent
) -> StoreError | None:
    """Send ``intent``'s message, then mark its record sent; the store's error when the mark
    was not made (the message is sent all the same), else None. Raises what the send raised."""
    await sender.send(intent.message_id, intent.subject, intent.message_body)
    try:
        await store.commit(intent.order_id, [mark_sent(intent.client_id, intent.key)])
    except StoreError as error:
        return error
    return None
