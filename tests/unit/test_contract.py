"""The OrderPlaced contract: what is accepted, what is rejected with which reason, and what the
fingerprint considers equal."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.contract import (
    HASH_ALGORITHM,
    MAX_BODY_BYTES,
    InvalidMessage,
    normalise_timestamp,
    parse_order,
)
from tests.orders import order_body


def parse(body: dict[str, Any] | bytes, message_id: str | None = "ord-1001") -> str:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_order(raw, message_id).request_hash


def reason(body: dict[str, Any] | bytes, message_id: str | None = "ord-1001") -> str:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(InvalidMessage) as caught:
        parse_order(raw, message_id)
    assert len(caught.value.description) <= 1024
    return caught.value.reason


def test_valid_order_is_normalised_and_hashed() -> None:
    valid = parse_order(json.dumps(order_body()).encode(), "ord-1001")

    assert valid.order_id == "ord-1001"
    assert valid.fields["placedAt"] == "2026-11-29T09:15:00Z"
    assert valid.hash_algorithm == HASH_ALGORITHM
    assert valid.order.total_minor == 3499
    assert set(valid.fields) == {
        "schemaVersion",
        "orderId",
        "customerId",
        "currency",
        "placedAt",
        "lines",
    }


@pytest.mark.parametrize(
    ("written", "normalised"),
    [
        ("2026-11-29T10:15:00+01:00", "2026-11-29T09:15:00Z"),
        ("2026-11-29t09:15:00z", "2026-11-29T09:15:00Z"),
        ("2026-11-29T09:15:00.1234567Z", "2026-11-29T09:15:00.1234567Z"),  # .NET "o" format
        ("2026-11-29T09:15:00.500+00:00", "2026-11-29T09:15:00.5Z"),
        ("2026-01-01T00:30:00+01:00", "2025-12-31T23:30:00Z"),
    ],
)
def test_placed_at_is_normalised_to_utc(written: str, normalised: str) -> None:
    assert normalise_timestamp(written) == normalised


@pytest.mark.parametrize(
    "written",
    ["2026-11-29T09:15:00", "2026-11-29", "2026-13-01T00:00:00Z", "2026-11-29T24:00:00Z", "now"],
)
def test_placed_at_without_offset_or_invalid_is_rejected(written: str) -> None:
    assert reason(order_body(placedAt=written)) == "InvalidPayload"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"schemaVersion": 2}, "UnsupportedSchemaVersion"),
        ({"schemaVersion": 0}, "UnsupportedSchemaVersion"),
        ({"schemaVersion": "1"}, "InvalidPayload"),
        ({"schemaVersion": True}, "InvalidPayload"),
        ({"orderId": "ord 1001"}, "InvalidPayload"),
        ({"customerId": ""}, "InvalidPayload"),
        ({"customerId": "c" * 65}, "InvalidPayload"),
        ({"currency": "EURO"}, "InvalidPayload"),
        ({"lines": []}, "InvalidPayload"),
        ({"lines": [{"sku": "A", "quantity": 1, "unitPriceMinor": 1}] * 101}, "InvalidPayload"),
        ({"lines": [{"sku": "A", "quantity": 0, "unitPriceMinor": 1}]}, "InvalidPayload"),
        ({"lines": [{"sku": "A", "quantity": 10_001, "unitPriceMinor": 1}]}, "InvalidPayload"),
        ({"lines": [{"sku": "A", "quantity": 1.0, "unitPriceMinor": 1}]}, "InvalidPayload"),
        ({"lines": [{"sku": "A", "quantity": 1, "unitPriceMinor": -1}]}, "InvalidPayload"),
        (
            {"lines": [{"sku": "A", "quantity": 1, "unitPriceMinor": 1_000_000_001}]},
            "InvalidPayload",
        ),
        ({"lines": [{"sku": "", "quantity": 1, "unitPriceMinor": 1}]}, "InvalidPayload"),
    ],
)
def test_schema_violations_have_their_reason(change: dict[str, Any], expected: str) -> None:
    assert reason(order_body(**change)) == expected


def test_boundaries_are_inclusive() -> None:
    body = order_body(
        customerId="c" * 64,
        lines=[{"sku": "s" * 64, "quantity": 10_000, "unitPriceMinor": 1_000_000_000}] * 100,
    )
    assert parse(body)


def test_message_level_reasons() -> None:
    assert reason(order_body(), message_id=None) == "MissingMessageId"
    assert reason(order_body(), message_id="") == "MissingMessageId"
    assert reason(order_body(), message_id="ord-1002") == "MessageIdMismatch"
    assert reason(b"\xc3\x28") == "InvalidPayload"
    assert reason(b'{"schemaVersion": NaN}') == "InvalidPayload"
    assert reason(b"null") == "InvalidPayload"
    assert reason(b"x" * (MAX_BODY_BYTES + 1)) == "PayloadTooLarge"


def test_exactly_the_size_limit_is_still_parsed() -> None:
    body = json.dumps(order_body()).encode()
    padded = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    assert len(padded) == MAX_BODY_BYTES
    assert parse(padded) == parse(body)


def test_description_does_not_echo_the_input() -> None:
    secret = "4111111111111111-card-number"
    with pytest.raises(InvalidMessage) as caught:
        parse_order(json.dumps(order_body(currency=secret)).encode(), "ord-1001")
    assert secret not in caught.value.description


def test_every_contract_field_changes_the_fingerprint() -> None:
    base = parse(order_body())
    changes: list[dict[str, Any]] = [
        {"customerId": "cust-43"},
        {"currency": "USD"},
        {"placedAt": "2026-11-29T10:15:00.001+01:00"},
        {"lines": [{"sku": "SKU-1", "quantity": 2, "unitPriceMinor": 1250}]},
        {"lines": list(reversed(order_body()["lines"]))},
    ]
    hashes = {parse(order_body(**change)) for change in changes}
    assert base not in hashes
    assert len(hashes) == len(changes)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32), extra=st.dictionaries(st.text(min_size=1), st.integers()))
def test_key_order_whitespace_and_unknown_fields_do_not_change_the_fingerprint(
    seed: int, extra: dict[str, int]
) -> None:
    body = order_body()
    items = list(body.items()) + [(key, value) for key, value in extra.items() if key not in body]
    random.Random(seed).shuffle(items)
    shuffled = json.dumps(dict(items), indent=random.Random(seed).choice([None, 0, 2])).encode()
    assert parse(shuffled) == parse(order_body())
