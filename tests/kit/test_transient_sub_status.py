"""The kit's Cosmos DB classification and predicate rendering, at their public functions.

The two answers whose status alone means "the system" but whose sub-status means "the moment"
(403.3 WriteForbidden during a failover, 404.1002 ReadSessionNotAvailable: ``_store``'s
``_TRANSIENT_SUB_STATUS``) are transient, and keep the wait the service asked for: the consumer's
retry waits at least that long (``RetryPolicy.next_delay``), as for every transient answer.

Mutation run 5, the tenth session: ``idempotent_consumer.cosmos._store.classify_status`` ``_12``
and ``_14`` (the retry-after dropped on that branch), ``_23`` and ``_25`` (on the plain transient
branch); ``_property`` ``_3`` (the refusal of a field name without its text).
"""

from __future__ import annotations

import pytest
from idempotent_consumer import Condition, TransientStoreError
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
