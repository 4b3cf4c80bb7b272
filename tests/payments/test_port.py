"""The payment provider port's own rules: a request that cannot be right never leaves, and every
text the port carries to records and dead-letter descriptions is bounded."""

from __future__ import annotations

import pytest
from idempotent_consumer import MAX_DESCRIPTION_CHARS

from shared.payments.provider import (
    KeyReused,
    Operation,
    PaymentRequest,
    ProviderRejectedCredentials,
    ProviderResult,
    ProviderUnavailable,
    ResultStatus,
    SystemicProviderError,
    UnexpectedProviderAnswer,
)


def capture(**changes: object) -> PaymentRequest:
    fields: dict[str, object] = {
        "operation": Operation.CAPTURE,
        "order_id": "order-1",
        "reference": "order-1:capture:1",
        "idempotency_key": "payment-capture:m-1:capture",
        "customer_id": "customer-1",
        "amount_minor": 100,
        "currency": "EUR",
    }
    return PaymentRequest(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("amount", [0, -1])
def test_a_request_moves_a_positive_amount(amount: int) -> None:
    with pytest.raises(ValueError, match="amount_minor"):
        capture(amount_minor=amount)


@pytest.mark.parametrize("name", ["order_id", "reference", "idempotency_key", "currency"])
def test_a_request_names_its_order_reference_key_and_currency(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        capture(**{name: ""})


def test_a_result_and_an_error_carry_bounded_texts() -> None:
    long = "x" * (MAX_DESCRIPTION_CHARS * 2)

    result = ProviderResult(ResultStatus.REFUSED, "ref", None, 100, long)
    error = ProviderUnavailable(long, may_have_committed=True)

    assert len(result.detail) == MAX_DESCRIPTION_CHARS
    assert len(error.description) == MAX_DESCRIPTION_CHARS
    assert str(error) == error.description


@pytest.mark.parametrize("kind", [KeyReused, ProviderRejectedCredentials, UnexpectedProviderAnswer])
def test_what_no_retry_fixes_is_one_systemic_kind(kind: type[SystemicProviderError]) -> None:
    assert issubclass(kind, SystemicProviderError)
    assert not issubclass(ProviderUnavailable, SystemicProviderError)
