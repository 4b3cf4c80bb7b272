"""What the kit's public refusal vocabulary tells the code that catches or returns it.

- ``refused``: a consumer's contract rejected a message; the decision carries the message type
  its caller names (the ``message_type`` the telemetry exports), which may differ from the
  Subject (a user's contract may read the type from the body).
- ``DocumentExists``, ``DocumentMissing``, ``ConditionFailed``: a store refused one write of a
  commit; the error says which write and why, as an effect that logs a refusal it cannot
  resolve shows it.

Checked to fail: the first test on ``refused`` passing ``None`` (or nothing) as the message
type (mutants ``x_refused__mutmut_5``, ``_10``); the second on ``DocumentMissing``'s reason
replaced by ``None``, ``"XXno such documentXX"`` or upper-cased (``_3``, ``_7``, ``_8``).
"""

from __future__ import annotations

import pytest
from idempotent_consumer import (
    ConditionFailed,
    DocumentExists,
    DocumentMissing,
    IncomingMessage,
    InvalidMessage,
    Outcome,
    Settlement,
    WriteRefused,
    refused,
)


def test_a_refused_message_is_dead_lettered_under_the_type_its_contract_names() -> None:
    message = IncomingMessage(message_id="m-1", body=b"{}", subject="ReturnEvent")

    decision = refused(message, InvalidMessage("MissingSku", "no sku"), "ItemReturned")

    assert (decision.outcome, decision.settlement) == (Outcome.INVALID, Settlement.DEADLETTER)
    assert (decision.deadletter_reason, decision.description) == ("MissingSku", "no sku")
    assert decision.message_type == "ItemReturned"


@pytest.mark.parametrize(
    ("kind", "index", "document_id", "text"),
    [
        (DocumentExists, 0, "inbox-1", "write 0 ('inbox-1') refused: the document exists"),
        (DocumentMissing, 1, "sku-9", "write 1 ('sku-9') refused: no such document"),
        (
            ConditionFailed,
            2,
            "order-3",
            "write 2 ('order-3') refused: its condition does not hold",
        ),
    ],
    ids=["exists", "missing", "condition"],
)
def test_a_refused_write_says_which_write_and_why(
    kind: type[DocumentExists | DocumentMissing | ConditionFailed],
    index: int,
    document_id: str,
    text: str,
) -> None:
    # Raised inside the test, as a store raises it: built at collection, the error would be
    # made before any mutant (or coverage) is active.
    refusal: WriteRefused = kind(index, document_id)

    assert str(refusal) == text
