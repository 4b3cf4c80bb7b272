"""The ids and the fingerprint the edge stores and derives: what a retry on any instance, any
day, must compute again."""

from __future__ import annotations

import hashlib
import json
import re
import uuid

from idempotent_consumer import marker_id

from ops.sample_orders import lifecycle_message_id as ops_lifecycle_message_id
from shared.consumer.contract import lifecycle_message_id
from shared.edge.requests import (
    ORDER_ID_NAMESPACE,
    is_valid_key,
    order_id_for,
    request_fingerprint,
    request_id,
)


def test_an_order_id_is_the_uuidv5_of_client_and_key_and_fits_the_contract() -> None:
    order_id = order_id_for("client-a", "key-1")

    assert order_id == "ord-" + str(uuid.uuid5(ORDER_ID_NAMESPACE, "client-a\nkey-1"))
    assert order_id == order_id_for("client-a", "key-1")
    assert order_id != order_id_for("client-b", "key-1")
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}", order_id)
    # Pinned: the namespace is fixed for ever, or a retry would place a second order.
    assert order_id == "ord-8ecb416c-d62c-5b9c-95c8-5c7449326a5b"


def test_a_request_id_never_reads_as_another_clients_key() -> None:
    assert request_id("a:b", "c") != request_id("a", "b:c")
    assert request_id("client-a", "k/1?#%") == "request:client-a:k%2F1%3F%23%25"
    long = request_id("client-a", "k" * 255)
    assert len(long) <= 255 and long.startswith("request:client-a:sha256:")
    assert long != request_id("client-b", "k" * 255)


def test_inbox_marker_ids_are_what_they_always_were() -> None:
    assert marker_id("payment-capture", "ord-1:v2") == "inbox:payment-capture:ord-1:v2"
    assert marker_id("orders", "a/b") == "inbox:orders:a%2Fb"


def test_the_fingerprint_is_sha256_of_method_path_and_canonical_json() -> None:
    body = {"b": [1, {"y": "é", "x": 2}], "a": None}
    canonical = '["POST","/orders",{"a":null,"b":[1,{"x":2,"y":"é"}]}]'

    assert request_fingerprint("POST", "/orders", body) == (
        hashlib.sha256(canonical.encode()).hexdigest()
    )
    assert request_fingerprint("POST", "/orders", json.loads(json.dumps(body))) == (
        request_fingerprint("POST", "/orders", dict(reversed(body.items())))
    )
    assert request_fingerprint("POST", "/orders/x/amendments", body) != (
        request_fingerprint("POST", "/orders", body)
    )


def test_the_key_format_is_1_to_255_visible_ascii() -> None:
    assert is_valid_key("!") and is_valid_key("~" * 255)
    assert not any(map(is_valid_key, ["", " ", "a b", "\t", "é", "a\n", "k" * 256]))


def test_a_changes_message_id_is_the_contracts_and_ops_uses_it() -> None:
    assert lifecycle_message_id("ord-1", 2) == "ord-1:v2"
    assert ops_lifecycle_message_id is lifecycle_message_id
