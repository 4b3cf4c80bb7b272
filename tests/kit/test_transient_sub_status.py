"""The kit's Cosmos DB classification and predicate rendering, at their public functions.

The two answers whose status alone means "the system" but whose sub-status means "the moment"
(403.3 WriteForbidden during a failover, 404.1002 ReadSessionNotAvailable: ``_store``'s
``_TRANSIENT_SUB_STATUS``) are transient, and keep the wait the service asked for: the consumer's
retry waits at least that long (``RetryPolicy.next_delay``), as for every transient answer.

Mutation run 5, the tenth session: ``idempotent_consumer.cosmos._store.classify_status`` ``_12``
and ``_14`` (the retry-after dropped on that branch), ``_23`` and ``_25`` (on the plain transient
branch); ``_property`` ``_3`` (the refusal of a field name without its text). The twelfth:
``filter_predicate`` ``_39``, ``_44`` (its keywords in lower case: the local engine reads them,
and no Microsoft page found says the service does).
"""

from __future__ import annotations

import pytest
from idempotent_consumer import Condition, Room, TransientStoreError
from idempotent_consumer.cosmos import classify_status, filter_predicate


@pytest.mark.parametrize(("status", "sub_status"), [(403, 3), (404, 1002), (429, None)])
def test_a_transient_answer_keeps_the_wait_the_service_asked_for(
    status: int, sub_status: int | None
) -> None:
    error = classify_status(
        status, sub_status, writing=True, detail="batch operation 0 failed", retry_after_s=2.5
    )

    assert isinstance(error, TransientStoreError)
    assert error.retry_after_s == 2.5
    shown = f"{status}.{sub_status}" if sub_status else str(status)
    assert str(error) == f"Cosmos DB answered {shown}: batch operation 0 failed"


@pytest.mark.parametrize("name", ["version; DROP", "c.version", "1st", ""])
def test_a_condition_on_a_name_a_filter_predicate_cannot_name_is_refused_saying_which(
    name: str,
) -> None:
    # A field name is rendered into the predicate's text: only an identifier may be, and the
    # refusal names it (quoted), so the consumer's author sees which field of their condition.
    with pytest.raises(ValueError, match="not a field name") as refused:
        filter_predicate(Condition(below={name: 3}))

    assert str(refused.value) == f"not a field name a filter predicate can name: {name!r}"


def test_a_condition_renders_as_the_predicate_the_service_documents() -> None:
    # Every clause of a condition in the form the service documents for a patch's condition
    # ("of format \"FROM X where CONDITION\"", learn.microsoft.com/dotnet/api/microsoft.azure.
    # cosmos.patchitemrequestoptions.filterpredicate): the keywords as written there, clauses
    # joined by AND, JSON literals, a room as arithmetic, a field whose default satisfies its
    # limit allowed to be missing.
    condition = Condition(
        below={"version": 3, "revision": 7},
        equals={"state": "open"},
        defaults={"revision": 0},
        at_least={"onHand": 1},
        room=(Room("reserved", -2, "onHand"), Room("reserved", 3, "onHand")),
    )

    assert filter_predicate(condition) == (
        "FROM c WHERE c.version < 3 AND (NOT IS_DEFINED(c.revision) OR c.revision < 7) AND "
        'c.state = "open" AND c.onHand >= 1 AND c.reserved - 2 <= c.onHand AND '
        "c.reserved + 3 <= c.onHand"
    )
