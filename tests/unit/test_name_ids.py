"""``uuid5_text`` is ``str(uuid.uuid5(namespace, name))`` (RFC 9562, section 5.5): every event
id, order id and idempotency key the app derives, which downstream teams and operators recompute
with their own UUID library, so a single differing digit is a lost duplicate check."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from idempotent_consumer import uuid5_text

from shared.relay.outbox import EVENT_ID_NAMESPACE, order_event_id


@given(namespace=st.uuids(), name=st.text())
def test_uuid5_text_is_the_standard_librarys(namespace: uuid.UUID, name: str) -> None:
    try:
        expected = str(uuid.uuid5(namespace, name))
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form: refused the same way
        try:
            uuid5_text(namespace, name)
        except UnicodeEncodeError:
            return
        raise AssertionError("a name without a UTF-8 form was accepted") from None
    assert uuid5_text(namespace, name) == expected


def test_every_variant_digit_is_reached() -> None:
    # The digest's 17th hex digit takes 16 values; each maps to one of 8, 9, a, b.
    seen = {uuid5_text(EVENT_ID_NAMESPACE, f"order-{i}")[19] for i in range(400)}
    assert seen == set("89ab")


def test_a_known_event_id_is_pinned() -> None:
    # Downstream consumers store these ids: the value of one is fixed for ever.
    assert order_event_id("order-1") == "0523ed6c-606d-544b-9b61-5bc14826e7fd"
