"""Application Insights' ingestion endpoint, on 127.0.0.1 (stdlib): what the real Azure Monitor
exporter posts, kept for tests (``tests/telemetry``) and the ingestion bench (``bench.ingestion``).

A connection string whose ``IngestionEndpoint`` is this server's URL sends the exporter's
envelopes here: ``POST /v2.1/track`` with a JSON array (or newline-delimited JSON), possibly
gzip-compressed, answered with ``{"itemsReceived", "itemsAccepted", "errors"}`` (the Breeze
response the exporter reads: azure/monitor/opentelemetry/exporter/_generated/exporter/models/
_models.py, ``TrackResponse``). Each envelope is kept with its size in bytes as compact JSON,
the closest figure to what a workspace ingests that can be measured here (Log Analytics bills the
stored record, its ``_BilledSize``, which is not the envelope's JSON: an approximation, named as
such where used).

Not reproduced: authentication (no token is checked), throttling (never 429 or 439), partial
acceptance, live metrics (its ``LiveEndpoint`` is not served).
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INSTRUMENTATION_KEY = "00000000-0000-0000-0000-000000000000"


@dataclass
class Ingestion:
    url: str
    envelopes: list[dict[str, Any]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # bytes of each envelope's JSON, aligned

    @property
    def connection_string(self) -> str:
        return (
            f"InstrumentationKey={INSTRUMENTATION_KEY};"
            f"IngestionEndpoint={self.url};LiveEndpoint={self.url}"
        )


@contextmanager
def ingestion_endpoint() -> Iterator[Ingestion]:
    """The endpoint for the duration; what it received stays readable afterwards."""
    received = Ingestion("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if raw[:2] == b"\x1f\x8b":
                raw = gzip.decompress(raw)
            items: list[dict[str, Any]] = []
            if self.path.rstrip("/").endswith("/v2.1/track"):
                text = raw.decode("utf-8").strip()
                try:
                    parsed = json.loads(text)
                    items = parsed if isinstance(parsed, list) else [parsed]
                except json.JSONDecodeError:
                    items = [json.loads(line) for line in text.splitlines() if line.strip()]
                with lock:
                    received.envelopes.extend(items)
                    received.sizes.extend(
                        len(json.dumps(item, separators=(",", ":")).encode()) for item in items
                    )
            answer = json.dumps(
                {"itemsReceived": len(items), "itemsAccepted": len(items), "errors": []}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
