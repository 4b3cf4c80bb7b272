"""Which document of a failed transactional batch of creates conflicted, as the kit's store reads
it (``batch_failure``, then ``refused_write``: the ``DocumentExists`` index the order store turns
into ``OrderAlreadyExists`` at 0 and ``OrphanedDocument`` elsewhere), from the SDK's own
``CosmosBatchOperationError`` as azure-cosmos builds it, and from the shapes it could take that
today's SDK never builds.

Today's SDK sets ``error_index`` to the last non-424 operation and ``status_code`` to its status
(azure/cosmos/aio/_cosmos_client_connection_async.py:2091-2104), so the index branch and the
statuses fallback agree on every error it raises (tests/integration/test_batch_failure_reading.py
drives those through the SDK). The cases below are where they differ: an index missing, out of
range or pointing elsewhere, a status that is the response's 207, empty or partial operation
responses, more responses than documents. The verdict decides between "the order exists"
(complete as a duplicate), "an orphaned document" (dead-letter) and a classified failure: read
wrongly, a throttled batch would complete an order never stored.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos.exceptions import CosmosBatchOperationError
from idempotent_consumer import Create, DocumentExists
from idempotent_consumer.cosmos import batch_failure, refused_write

DOCUMENTS = [
    {"id": "ord-1", "orderId": "ord-1", "type": "order"},
    {"id": "ord-1:OrderAccepted", "orderId": "ord-1", "type": "outbox"},
]


def conflicting_document(
    error: CosmosBatchOperationError, documents: list[dict[str, Any]]
) -> int | None:
    """The index of the create the batch refused with 409, or None when it failed otherwise."""
    refused = refused_write(batch_failure(error), [Create(document) for document in documents])
    return refused.index if isinstance(refused, DocumentExists) else None


def failed_batch(
    statuses: list[int | None], *, index: Any, status: int | None
) -> CosmosBatchOperationError:
    responses = [{} if code is None else {"statusCode": code} for code in statuses]
    return CosmosBatchOperationError(  # type: ignore[no-untyped-call]
        error_index=index, headers={}, status_code=status, operation_responses=responses
    )


@pytest.mark.parametrize(
    ("statuses", "index", "status", "conflict"),
    [
        # As the SDK raises them: the index and the status of the failing operation.
        ([409, 424], 0, 409, 0),
        ([424, 409], 1, 409, 1),
        # The index alone says it: a status that is not the operation's (the response's 207).
        ([409, 424], 0, 207, 0),
        ([424, 409], 1, 207, 1),
        ([424, 409], 1, 0, 1),
        # No usable index: the statuses say which (the first 409).
        ([424, 409], None, 409, 1),
        ([409, 424], "0", 409, 0),
        ([424, 409], 2, 409, 1),
        ([409, 424], 2, 409, 0),
        ([409, 424], -1, 409, 0),
        ([424, 409], -2, 409, 1),
        ([409, 409], None, 409, 0),
        ([424, 409], 0, 409, 1),  # an index that points at a 424
        # An operation response without its status is no conflict, and breaks nothing.
        ([None, 409], 1, 409, 1),
        ([None, 409], None, 409, 1),
    ],
)
def test_the_conflicting_document_is_the_operation_that_answered_409(
    statuses: list[int | None], index: Any, status: int | None, conflict: int
) -> None:
    assert conflicting_document(failed_batch(statuses, index=index, status=status), DOCUMENTS) == (
        conflict
    )


@pytest.mark.parametrize("failing", [0, 1])
@pytest.mark.parametrize("status", [400, 403, 404, 408, 412, 413, 429, 449, 500, 503])
def test_a_batch_that_failed_otherwise_at_any_index_has_no_conflict(
    failing: int, status: int
) -> None:
    statuses = [status if position == failing else 424 for position in range(2)]
    for index in (failing, None, 2, -1):
        error = failed_batch(list(statuses), index=index, status=status)
        assert conflicting_document(error, DOCUMENTS) is None, index


@pytest.mark.parametrize("index", [0, 1, None, -1])
@pytest.mark.parametrize("responses", [None, []])
def test_a_409_without_operation_responses_names_no_document(
    index: int | None, responses: list[dict[str, Any]] | None
) -> None:
    # Nothing says which document conflicted: never taken for the order (index 0).
    error = CosmosBatchOperationError(  # type: ignore[no-untyped-call]
        error_index=index, headers={}, status_code=409, operation_responses=responses
    )
    assert conflicting_document(error, DOCUMENTS) is None


@pytest.mark.parametrize("index", [2, None])
def test_a_409_beyond_the_batch_s_documents_names_no_document(index: int | None) -> None:
    error = failed_batch([424, 424, 409], index=index, status=409)
    assert conflicting_document(error, DOCUMENTS) is None
    # The same answer for a batch of three documents names the third.
    assert conflicting_document(error, [*DOCUMENTS, {"id": "x", "orderId": "ord-1"}]) == 2
