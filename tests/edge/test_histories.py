"""A property over generated histories of one client's retries: a place and amendments, each
under its own key, each tried any number of times in any order, with answers lost, stops in
every window of a request (before the batch, after it with its answer lost, before the send,
before the sent mark), sends the queue refuses, and waits past the in-progress window; then the
client retries every intent until it is answered. Whatever the history: each intent yields
exactly one version and one MessageId, every answer it got is its first, its message carries
its own content, and a MessageId is never sent with two bodies, nor more than once more per
stop that hit its intent."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from hypothesis import example, given, settings
from hypothesis import strategies as st
from idempotent_consumer.testing import InMemoryDocumentStore

from local.standins.broker import ManualClock
from shared.consumer.contract import parse_message
from shared.edge import EdgeResponse, OrdersEdge, SendFailed
from shared.edge.requests import order_id_for
from tests.edge.conftest import (
    CLIENT,
    PAST_THE_WINDOW,
    RecordingSender,
    Stopped,
    StoppingStore,
    amend_body,
    place_body,
)

ORDER = order_id_for(CLIENT, "key-0")
STOPS = ("before the batch", "after the batch", "before the mark")
FAULTS = ("none", "before the send", "refused send", *STOPS)
# What an attempt may be answered besides its success: an amendment before its order was
# placed (404), a repeat while its first is not yet sent (409), a send the queue refused (503).
PASSING_REFUSALS = {404, 409, 503}


@dataclass(frozen=True, slots=True)
class Attempt:
    intent: int  # 0 the place, i > 0 the i-th amendment
    fault: str
    wait: bool  # the client waits past the in-progress window first


def histories() -> st.SearchStrategy[tuple[int, list[Attempt]]]:
    def attempts(amendments: int) -> st.SearchStrategy[tuple[int, list[Attempt]]]:
        attempt = st.builds(
            Attempt, st.integers(0, amendments), st.sampled_from(FAULTS), st.booleans()
        )
        return st.lists(attempt, max_size=14).map(lambda steps: (amendments, steps))

    return st.integers(0, 4).flatmap(attempts)


async def _run(amendments: int, steps: list[Attempt]) -> None:
    clock = ManualClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))
    stopping = StoppingStore(InMemoryDocumentStore(clock=lambda: clock.now().timestamp()))
    sender = RecordingSender()
    edge = OrdersEdge(stopping, sender, clock)
    answers: dict[int, list[EdgeResponse]] = defaultdict(list)
    stops: Counter[int] = Counter()

    async def attempt(intent: int) -> EdgeResponse:
        if intent == 0:
            return await edge.place(CLIENT, "key-0", place_body())
        return await edge.amend(CLIENT, f"key-{intent}", ORDER, amend_body(intent))

    for step in steps:
        if step.wait:
            clock.advance(PAST_THE_WINDOW)
        if step.fault in STOPS:
            stopping.stop = step.fault
        elif step.fault == "before the send":
            sender.fail_next = [Stopped()]
        elif step.fault == "refused send":
            sender.fail_next = [SendFailed("throttled")]
        try:
            answers[step.intent].append(await attempt(step.intent))
        except Stopped:
            stops[step.intent] += 1
        finally:  # a fault the attempt did not reach is not left for the next one
            stopping.stop = None
            sender.fail_next.clear()

    clock.advance(PAST_THE_WINDOW)
    for intent in range(amendments + 1):
        answers[intent].append(await attempt(intent))

    versions: dict[int, int] = {}
    for intent in range(amendments + 1):
        successes = [answer for answer in answers[intent] if answer.status in (200, 201)]
        refusals = {answer.status for answer in answers[intent]} - {200, 201}
        # Past the in-progress window and with no fault, a retry is answered: its first answer.
        assert answers[intent][-1].status in (200, 201), answers[intent][-1]
        assert all(answer == successes[0] for answer in successes), "an answer not the first"
        assert refusals <= PASSING_REFUSALS, refusals
        versions[intent] = int(successes[0].headers["ETag"].strip('"'))
    assert versions[0] == 1
    assert sorted(versions.values()) == list(range(1, amendments + 2))  # one version each

    expected = {
        intent: ORDER if version == 1 else f"{ORDER}:v{version}"
        for intent, version in versions.items()
    }
    assert set(sender.message_ids()) == set(expected.values())  # one MessageId each
    copies = Counter(sender.message_ids())
    for intent, message_id in expected.items():
        bodies = {message.body for message in sender.sent if message.message_id == message_id}
        assert len(bodies) == 1, f"{message_id} sent with {len(bodies)} bodies"
        assert copies[message_id] <= 1 + stops[intent]
        sent = next(message for message in sender.sent if message.message_id == message_id)
        valid = parse_message(sent.body, sent.message_id, sent.subject)
        assert valid.version == versions[intent]
        if intent > 0:  # its own content: the amendment's quantity is its number
            assert valid.fields["lines"][0]["quantity"] == intent


# Every window, and every window again on a repeat, as one history (a generator that lost one
# would still pass the random examples).
_EVERY_WINDOW = (
    1,
    [Attempt(0, fault, wait=True) for fault in FAULTS]
    + [Attempt(1, fault, wait=False) for fault in FAULTS]
    + [Attempt(1, fault, wait=True) for fault in FAULTS],
)


@settings(max_examples=300, deadline=None)
@example(_EVERY_WINDOW)
@given(histories())
def test_each_intent_yields_one_version_and_one_message_id(
    history: tuple[int, list[Attempt]],
) -> None:
    asyncio.run(_run(*history))
