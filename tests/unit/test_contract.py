"""The OrderPlaced contract: what is accepted, what is rejected with which reason, and what the
fingerprint considers equal."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from idempotent_consumer import MAX_BODY_BYTES, InvalidMessage, bound

from shared.consumer.contract import (
    CONTRACT_FIELDS,
    FINGERPRINT_ALGORITHMS,
    HASH_ALGORITHM,
    fingerprint_v1,
    normalise_timestamp,
    order_accepted_v1,
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
    assert valid.total_minor == 3499
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


@settings(max_examples=400)
@given(
    instant=st.datetimes(min_value=datetime(1, 1, 3), max_value=datetime(9999, 12, 29)),
    offset_minutes=st.integers(-(23 * 60 + 59), 23 * 60 + 59),
    fraction=st.text("0123456789", max_size=9),
    utc_as=st.sampled_from(["Z", "z", "+00:00", "-00:00", None]),
    separator=st.sampled_from("Tt"),
)
def test_placed_at_is_the_same_instant_in_utc_with_its_fraction_as_written(
    instant: datetime,
    offset_minutes: int,
    fraction: str,
    utc_as: str | None,
    separator: str,
) -> None:
    """Any instant written at any offset (or in UTC, however spelled) reads as that instant in
    UTC, to the second by ``datetime``'s own arithmetic, the fraction kept as written without
    its trailing zeros."""
    instant = instant.replace(microsecond=0)
    offset = timedelta(minutes=0 if utc_as else offset_minutes)
    local = (instant + offset).isoformat()
    if utc_as:
        suffix = utc_as
    else:
        sign, minutes = ("-", -offset_minutes) if offset_minutes < 0 else ("+", offset_minutes)
        suffix = f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    written = local[:10] + separator + local[11:] + (f".{fraction}" if fraction else "") + suffix
    digits = fraction.rstrip("0")
    assert normalise_timestamp(written) == instant.isoformat() + (f".{digits}Z" if digits else "Z")


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
@example(seed=0, extra={"orderVersion": 0})  # once found: an optional field is no unknown one
def test_key_order_whitespace_and_unknown_fields_do_not_change_the_fingerprint(
    seed: int, extra: dict[str, int]
) -> None:
    body = order_body()
    # Unknown fields only: the contract's optional orderVersion is known (and must be 1).
    known = {*body, "orderVersion"}
    items = list(body.items()) + [(key, value) for key, value in extra.items() if key not in known]
    random.Random(seed).shuffle(items)
    shuffled = json.dumps(dict(items), indent=random.Random(seed).choice([None, 0, 2])).encode()
    assert parse(shuffled) == parse(order_body())


# --- The canonical bytes of sha256/canonical-v1 must never change: stored hashes are compared
# forever. fingerprint_v1 serialises with pydantic-core; these pin it to the definition, json.dumps.


def reference_fingerprint_v1(fields: dict[str, Any]) -> str:
    """The algorithm's definition, as first written: compact, key-sorted json.dumps, UTF-8."""
    canonical = json.dumps(
        {name: fields[name] for name in CONTRACT_FIELDS},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def test_known_fingerprints_are_unchanged() -> None:
    # Computed by the json.dumps implementation before the switch to pydantic-core.
    assert parse(order_body()) == "ba6f3b2ba2691f2f815ed62ac05598a36ec29d05fbd6a2f655c8e242b65db745"
    awkward = order_body(
        customerId='c"\\\u2028\u00e9\x00\x1f\x7f\U0001f600',
        lines=[{"sku": "\u00fc\n\t", "quantity": 10_000, "unitPriceMinor": 0}],
    )
    assert parse(awkward) == "a52dc0508d0e5a6898388bed76abb4948e44eefdff3abe272c23c429b20d89af"
    assert FINGERPRINT_ALGORITHMS[HASH_ALGORITHM] is fingerprint_v1


# Every character a JSON string can carry once parsed (the parser rejects lone surrogates), with
# the awkward ones drawn often: quotes, backslashes, control characters, DEL, U+2028/U+2029, BOM,
# non-BMP characters.
AWKWARD = st.sampled_from(
    [
        '"',
        "\\",
        "/",
        "\x00",
        "\x1f",
        "\n",
        "\r",
        "\t",
        "\b",
        "\f",
        "\x7f",
        "\x80",
        "\u2028",
        "\u2029",
        "\ufeff",
        "\uffff",
        "\U0001f600",
        "\U0010ffff",
        "é",
        "e\u0301",
    ]
)
ANY_TEXT = st.lists(st.one_of(AWKWARD, st.characters(exclude_categories=["Cs"])), max_size=40).map(
    "".join
)
ANY_INT = st.one_of(
    st.integers(), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 2**63, 2**64])
)


@settings(max_examples=500, deadline=None)
@given(text=ANY_TEXT, number=ANY_INT)
def test_canonical_serialisation_of_strings_and_ints_matches_json_dumps(
    text: str, number: int
) -> None:
    import pydantic_core

    for value in (text, number, {text: number}, [text, number]):
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert pydantic_core.to_json(value) == expected.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(ANY_TEXT, min_size=5, max_size=5),
    numbers=st.lists(ANY_INT, min_size=3, max_size=3),
    lines=st.lists(st.tuples(ANY_TEXT, ANY_INT, ANY_INT), min_size=1, max_size=5),
    odd_line=st.dictionaries(ANY_TEXT, st.one_of(ANY_TEXT, ANY_INT), max_size=4),
)
def test_fingerprint_v1_bytes_equal_the_json_dumps_definition(
    texts: list[str],
    numbers: list[int],
    lines: list[tuple[str, int, int]],
    odd_line: dict[str, Any],
) -> None:
    fields: dict[str, Any] = {
        "schemaVersion": numbers[0],
        "orderId": texts[0],
        "customerId": texts[1],
        "currency": texts[2],
        "placedAt": texts[3],
        "lines": [
            {"sku": sku, "quantity": quantity, "unitPriceMinor": price}
            for sku, quantity, price in lines
        ],
        "ignored": texts[4],
    }
    assert fingerprint_v1(fields) == reference_fingerprint_v1(fields)
    # Lines in another key order, or with other keys, are canonicalised the same way.
    fields["lines"] = [dict(reversed(list(line.items()))) for line in fields["lines"]]
    fields["lines"].append(odd_line)
    assert fingerprint_v1(fields) == reference_fingerprint_v1(fields)


@settings(max_examples=200, deadline=None)
@given(customer=st.text(min_size=1, max_size=64), sku=st.text(min_size=1, max_size=64))
def test_parsed_orders_hash_as_the_json_dumps_definition(customer: str, sku: str) -> None:
    body = order_body(customerId=customer, lines=[{"sku": sku, "quantity": 1, "unitPriceMinor": 5}])
    for ensure_ascii in (True, False):
        valid = parse_order(json.dumps(body, ensure_ascii=ensure_ascii).encode(), "ord-1001")
        assert valid.request_hash == reference_fingerprint_v1(valid.fields)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\ud83d x"])
def test_lone_surrogates_never_reach_the_fingerprint(escape: str) -> None:
    raw = json.dumps(order_body(customerId="PLACEHOLDER")).replace("PLACEHOLDER", escape)
    assert reason(raw.encode()) == "InvalidPayload"


def test_validated_fields_are_plain_dicts_in_canonical_order() -> None:
    body = dict(reversed(list(order_body(extra="x").items())))
    body["lines"] = [dict(reversed(list(line.items()))) for line in body["lines"]]
    valid = parse_order(json.dumps(body).encode(), "ord-1001")
    assert type(valid.fields) is dict
    assert tuple(valid.fields) == CONTRACT_FIELDS
    assert all(type(line) is dict for line in valid.fields["lines"])
    # Each line's keys in sorted order, the fingerprint's (OrderLine's declaration).
    assert [list(line) for line in valid.fields["lines"]] == [
        ["quantity", "sku", "unitPriceMinor"]
    ] * 2
    assert (valid.order_id, valid.total_minor) == ("ord-1001", 3499)


def test_a_line_that_is_not_an_object_names_its_position() -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_order(json.dumps(order_body(lines=[None])).encode(), "ord-1001")
    assert caught.value.description == "lines.0: Input should be a valid dictionary"


@pytest.mark.parametrize(
    "written", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01T12:00:00Z"]
)
def test_placed_at_at_the_edge_of_the_calendar_is_invalid_not_a_crash(written: str) -> None:
    # An OverflowError here would escape as "unexpected" and burn every delivery attempt.
    assert reason(order_body(placedAt=written)) == "InvalidPayload"


def test_years_before_1000_keep_four_digits() -> None:
    assert normalise_timestamp("0999-05-01T00:00:00Z") == "0999-05-01T00:00:00Z"


# --- Limits a mutant could loosen without any other test noticing (``make mutation``).

# Cosmos DB refuses these in an ``id`` ("The following characters are restricted and cannot be
# used in the Id property: '/', '\\', '?', '#'", Learn: Microsoft.Azure.Cosmos
# DatabaseProperties.Id, https://learn.microsoft.com/dotnet/api/microsoft.azure.cosmos.
# databaseproperties.id). The orderId is the document id: admitted, such an order would meet a
# 400 on every delivery (unexpected: held, abandoned, ten deliveries) instead of being
# dead-lettered at once.
COSMOS_REFUSED_ID_CHARACTERS = ["/", "\\", "?", "#"]


@pytest.mark.parametrize("character", COSMOS_REFUSED_ID_CHARACTERS)
@pytest.mark.parametrize("where", ["inside", "at the end"])
def test_an_order_id_with_a_character_cosmos_db_refuses_is_invalid_payload(
    character: str, where: str
) -> None:
    order_id = f"ord{character}1001" if where == "inside" else f"ord-1001{character}"

    assert reason(order_body(order_id), message_id=order_id) == "InvalidPayload"


def test_an_order_id_is_at_most_64_characters() -> None:
    longest = "o" * 64
    assert parse(order_body(longest), message_id=longest)
    assert reason(order_body(longest + "o"), message_id=longest + "o") == "InvalidPayload"


def test_a_sku_is_at_most_64_characters() -> None:
    line = {"sku": "s" * 65, "quantity": 1, "unitPriceMinor": 1}
    assert reason(order_body(lines=[line])) == "InvalidPayload"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_or_infinity_anywhere_in_the_body_is_not_json(constant: str) -> None:
    # Not JSON (RFC 8259 has no NaN): refused at the parse, even in a field the contract
    # ignores, so a body no other JSON reader would accept is never recorded as an order.
    raw = json.dumps(order_body()).encode()[:-1] + f', "note": {constant}}}'.encode()
    with pytest.raises(InvalidMessage) as caught:
        parse_order(raw, "ord-1001")
    assert caught.value.reason == "InvalidPayload"
    assert caught.value.description.startswith("the body is not JSON")


# The OrderAccepted v1 event the relay publishes (docs/events.md): validated strictly, so that
# an outbox document that does not make a valid event is parked, never published half-formed.
def accepted_event(**payload_changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "orderId": "ord-1001",
        "customerId": "cust-42",
        "currency": "EUR",
        "totalMinor": 3499,
        "placedAt": "2026-11-29T09:15:00Z",
        "lineCount": 2,
    }
    payload.update(payload_changes)
    return {
        "schemaVersion": 1,
        "eventId": "5b0f1e0e-8f3a-5d7c-9a51-0123456789ab",
        "eventType": "OrderAccepted",
        "occurredAt": "2026-11-29T09:15:01.5Z",
        "payload": payload,
    }


def event_reason(candidate: dict[str, Any]) -> str:
    with pytest.raises(InvalidMessage) as caught:
        order_accepted_v1(candidate)
    assert len(caught.value.description) <= 1024
    return caught.value.reason


@pytest.mark.parametrize(
    "payload", [{"totalMinor": 0}, {"lineCount": 1}, {"lineCount": 100}], ids=str
)
def test_an_order_accepted_event_at_its_limits_is_valid(payload: dict[str, Any]) -> None:
    event = accepted_event(**payload)
    assert order_accepted_v1(event) == event


@pytest.mark.parametrize(
    "payload",
    [
        {"totalMinor": -1},
        {"totalMinor": 1.5},
        {"totalMinor": "3499"},
        {"lineCount": 0},
        {"lineCount": 101},
        {"orderId": "ord/1001"},
        {"currency": "eur"},
        {"unexpected": "a field downstream consumers were never told about"},
    ],
    ids=str,
)
def test_an_order_accepted_event_beyond_its_limits_is_invalid(payload: dict[str, Any]) -> None:
    assert event_reason(accepted_event(**payload)) == "InvalidPayload"


@pytest.mark.parametrize(
    "change",
    [
        {"schemaVersion": 2},
        {"eventId": "5B0F1E0E-8F3A-5D7C-9A51-0123456789AB"},
        {"eventType": "OrderPlaced"},
        {"traceparent": "an envelope field that belongs in the message's properties"},
    ],
    ids=str,
)
def test_an_order_accepted_event_with_a_foreign_envelope_is_invalid(change: dict[str, Any]) -> None:
    assert event_reason({**accepted_event(), **change}) == "InvalidPayload"


def test_a_description_lists_five_problems_and_counts_the_rest() -> None:
    # Six violations: the first five by field path, then how many more (bounded, no input).
    body = order_body(
        schemaVersion="1",
        customerId="",
        currency="euro",
        placedAt="yesterday",
        lines=[],
        orderId="ord 1001",
    )
    with pytest.raises(InvalidMessage) as caught:
        parse_order(json.dumps(body).encode(), "ord 1001")

    problems = caught.value.description.split("; ")
    assert [problem.split(":")[0] for problem in problems[:5]] == [
        "schemaVersion",
        "orderId",
        "customerId",
        "currency",
        "placedAt",
    ]
    assert problems[5] == "and 1 more"


def test_a_body_that_is_not_utf8_is_described_as_such() -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_order(b'{"customerId": "\xff"}', "ord-1001")
    assert caught.value.description == "the body is not UTF-8"
    assert str(caught.value) == "InvalidPayload: the body is not UTF-8"  # as a log shows it


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        (
            "2026-11-29T09:15:00",
            "must be an RFC 3339 date-time with an offset, e.g. 2026-01-31T12:00:00Z",
        ),
        ("2026-13-01T00:00:00Z", "is not a valid date-time: month must be in 1..12"),
        ("2026-11-29T09:15:00+24:00", "has an out-of-range offset"),
        ("2026-11-29T09:15:00+01:60", "has an out-of-range offset"),
        ("0001-01-01T00:00:00+01:00", "is out of range"),
        ("0001-01-01T12:00:00Z", "is out of range"),
    ],
)
def test_a_placed_at_problem_is_described_for_the_sender(written: str, problem: str) -> None:
    # What the dead-letter description tells whoever fixes the sender.
    with pytest.raises(InvalidMessage) as caught:
        parse_order(json.dumps(order_body(placedAt=written)).encode(), "ord-1001")
    assert caught.value.description == f"placedAt: Value error, {problem}"


@pytest.mark.parametrize(
    ("written", "normalised"),
    [
        ("2026-11-29T15:15:00+05:30", "2026-11-29T09:45:00Z"),
        ("2026-11-29T00:00:00-09:45", "2026-11-29T09:45:00Z"),
        ("2026-11-29T23:59:00+23:59", "2026-11-29T00:00:00Z"),
        ("2026-11-29T10:00:00+15:07", "2026-11-28T18:53:00Z"),
        ("2026-11-29T10:00:00+01:59", "2026-11-29T08:01:00Z"),
    ],
)
def test_every_offset_hour_and_minute_counts(written: str, normalised: str) -> None:
    assert normalise_timestamp(written) == normalised


def test_the_first_representable_day_is_the_edge_of_the_calendar() -> None:
    assert reason(order_body(placedAt="0001-01-02T00:00:00Z")) == "InvalidPayload"
    assert normalise_timestamp("0001-01-02T00:00:01Z") == "0001-01-02T00:00:01Z"


@pytest.mark.parametrize(
    ("body", "message_id", "description"),
    [
        (order_body(), None, "the message has no MessageId"),
        (b"[1, 2]", "ord-1001", "the body must be a JSON object, not list"),
        (
            order_body(schemaVersion=10**60),
            "ord-1001",
            f"schemaVersion {str(10**60)[:39]}… is not supported; this consumer reads 1",
        ),
        (
            order_body(),
            "m" * 200,
            f"MessageId {'m' * 79 + '…'!r} differs from orderId 'ord-1001'",
        ),
    ],
    ids=["no message id", "not an object", "huge schema version", "long message id"],
)
def test_message_level_descriptions_are_bounded_and_exact(
    body: dict[str, Any] | bytes, message_id: str | None, description: str
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(InvalidMessage) as caught:
        parse_order(raw, message_id)
    assert caught.value.description == description


def test_a_text_of_exactly_the_limit_is_kept_whole() -> None:
    assert bound("x" * 1024) == "x" * 1024
    assert bound("x" * 1025) == "x" * 1023 + "…"


def test_a_body_of_exactly_256_kib_is_an_order() -> None:
    # docs/orders.md, "The contract": "A UTF-8 JSON object of at most 256 KiB"; one byte more is
    # PayloadTooLarge (test_message_level_reasons).
    body = json.dumps(order_body()).encode()
    padded = body[:-1] + b" " * (256 * 1024 - len(body)) + b"}"
    assert parse(padded) == parse(body)
    assert reason(padded[:-1] + b" }") == "PayloadTooLarge"
