"""What failed in a transactional batch (``batch_failure``): the failing operation's index,
status, sub-status and retry-after, read from the SDK's own ``CosmosBatchOperationError``.

They decide the classification (429 transient, 403 systemic, 403.3 transient...) and the
consumer's backoff (a throttled operation's ``retryAfterMilliseconds``). Today's SDK points
``error_index`` at the last non-424 operation (azure/cosmos/aio/_cosmos_client_connection_async
.py:2091-2104), so its errors take the index path (tests/reliability/test_throttled_batch.py
drives them through the SDK); every other shape below takes the fallback, which must find the
same operation: an index missing, not an int, out of range or pointing at a 424, an operation
without a usable status, and the response headers when the operation says nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.cosmos.exceptions import CosmosBatchOperationError
from idempotent_consumer.cosmos import BatchFailure, batch_failure

THROTTLED = {"statusCode": 429, "subStatusCode": 3200, "retryAfterMilliseconds": 150}
DEPENDENT = {"statusCode": 424}


def failed_batch(
    responses: list[dict[str, Any]] | None,
    *,
    index: Any,
    status: int = 429,
    headers: dict[str, str] | None = None,
) -> CosmosBatchOperationError:
    return CosmosBatchOperationError(  # type: ignore[no-untyped-call]
        error_index=index,
        headers=headers or {},
        status_code=status,
        operation_responses=responses,
    )


@pytest.mark.parametrize(
    ("responses", "index", "expected_index"),
    [
        ([DEPENDENT, THROTTLED], 1, 1),  # as the SDK raises it
        ([THROTTLED, DEPENDENT], 0, 0),
        ([THROTTLED, DEPENDENT], 1, 0),  # points at a 424
        ([DEPENDENT, THROTTLED], None, 1),
        ([DEPENDENT, THROTTLED], "1", 1),
        ([DEPENDENT, THROTTLED], 2, 1),
        ([THROTTLED, DEPENDENT], -1, 0),
        ([DEPENDENT, {"statusCode": 200}, THROTTLED], 1, 2),  # a success is no failure
        ([{}, THROTTLED], 0, 1),  # no status at all
        ([{"statusCode": "x"}, THROTTLED], 0, 1),
        ([{"statusCode": ""}, DEPENDENT, THROTTLED], 0, 2),
        ([DEPENDENT, THROTTLED, {"statusCode": 503}], None, 1),  # the first failure
        # An index that points at a failure is read, even past an earlier one (the SDK's
        # error_index is the last non-424 operation).
        ([{"statusCode": 503}, THROTTLED], 1, 1),
    ],
)
def test_the_failing_operation_is_found_whatever_the_index_says(
    responses: list[dict[str, Any]], index: Any, expected_index: int
) -> None:
    assert batch_failure(failed_batch(responses, index=index)) == BatchFailure(
        expected_index, 429, 3200, 0.15
    )


def test_an_operation_s_status_may_come_as_text() -> None:
    failing = {"statusCode": "503", "subStatusCode": "21008", "retryAfterMilliseconds": "20"}
    assert batch_failure(failed_batch([DEPENDENT, failing], index=1)) == BatchFailure(
        1, 503, 21008, 0.02
    )


@pytest.mark.parametrize("responses", [None, [], [DEPENDENT, DEPENDENT], [{}, {}]])
def test_without_a_failing_operation_the_error_s_own_status_and_the_headers_say_it(
    responses: list[dict[str, Any]] | None,
) -> None:
    headers = {"x-ms-substatus": "3", "x-ms-retry-after-ms": "250"}
    error = failed_batch(responses, index=0, status=403, headers=headers)
    assert batch_failure(error) == BatchFailure(None, 403, 3, 0.25)


def test_without_any_status_the_failure_has_status_0() -> None:
    error = failed_batch([DEPENDENT], index=0, status=0)
    assert batch_failure(error) == BatchFailure(None, 0, None, None)


def test_the_operation_s_fields_win_over_the_headers_and_the_headers_fill_in() -> None:
    headers = {"x-ms-substatus": "1", "x-ms-retry-after-ms": "900"}
    own = failed_batch([DEPENDENT, THROTTLED], index=1, headers=headers)
    bare = failed_batch([DEPENDENT, {"statusCode": 429}], index=1, headers=headers)
    assert batch_failure(own) == BatchFailure(1, 429, 3200, 0.15)
    assert batch_failure(bare) == BatchFailure(1, 429, 1, 0.9)


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(0, 0.0), (-5, 0.0), ("", None), ("soon", None), (None, None), (1500, 1.5)],
)
def test_a_retry_after_is_never_negative_and_unreadable_is_none(
    retry_after: Any, expected: float | None
) -> None:
    failing: dict[str, Any] = {"statusCode": 429}
    if retry_after is not None:
        failing["retryAfterMilliseconds"] = retry_after
    assert batch_failure(failed_batch([failing], index=0)).retry_after_s == expected


@pytest.mark.parametrize("sub_status", ["", "n/a", None])
def test_an_unreadable_sub_status_is_none(sub_status: str | None) -> None:
    failing: dict[str, Any] = {"statusCode": 429}
    if sub_status is not None:
        failing["subStatusCode"] = sub_status
    assert batch_failure(failed_batch([failing], index=0)).sub_status is None


BAD_REQUEST = {"statusCode": 400}


@pytest.mark.parametrize(
    ("responses", "index"),
    [
        ([{"statusCode": 503}, BAD_REQUEST], 1),  # the index, past an earlier failure
        ([DEPENDENT, BAD_REQUEST], None),  # the fallback
    ],
)
def test_a_400_is_a_failure_like_every_status_from_400_up(
    responses: list[dict[str, Any]], index: int | None
) -> None:
    """400 is the lowest failing status: read at the index and found by the fallback, with
    its status from the operation (the error itself carries none here)."""
    assert batch_failure(failed_batch(responses, index=index, status=0)) == BatchFailure(
        1, 400, None, None
    )
