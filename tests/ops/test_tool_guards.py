"""The operator tool's own guards against what it is handed: a TLS check turned off only for an
emulator on this machine, and an event body nested past the JSON parser's depth read as
unreadable, never a crash of the whole audit."""

from __future__ import annotations

import io
import json

from ops.audit import SeenEvent
from ops.cli import main


def test_no_verify_tls_is_refused_for_an_account_endpoint() -> None:
    out = io.StringIO()

    code = main(
        [
            "--cosmos-endpoint",
            "https://orders-account.documents.azure.com:443/",
            "--cosmos-key",
            "a2V5",
            "--no-verify-tls",
            "history",
            "ord-1",
        ],
        out=out,
    )

    assert code == 2
    assert "--no-verify-tls is for an emulator on a loopback endpoint only" in out.getvalue()


def test_an_event_nested_past_the_parsers_depth_is_read_as_unreadable() -> None:
    depth = 100_000  # 200 KB, under the 256 KB message limit
    body = ("[" * depth + "]" * depth).encode()

    seen = SeenEvent.from_body("evt-1", body)

    assert (seen.order_id, seen.event_type) == (None, None)
    assert SeenEvent.from_body("evt-2", json.dumps({"payload": {"orderId": "o-1"}}).encode())
