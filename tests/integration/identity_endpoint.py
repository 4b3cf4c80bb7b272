"""The App Service managed identity endpoint, on 127.0.0.1 (stdlib), for the credential tests.

Flex Consumption runs on App Service, whose managed identity endpoint a process finds in
``IDENTITY_ENDPOINT`` and ``IDENTITY_HEADER``. azure-identity's ``ManagedIdentityCredential``
uses it when both are set: aio, a ``GET`` with ``api-version=2019-08-01``, ``resource`` and, for a
user-assigned identity, ``client_id``, the header ``X-IDENTITY-HEADER`` = the secret
(azure/identity/_credentials/app_service.py:19-37; the client id comes in as ``identity_config``,
aio/_credentials/managed_identity.py:47-61); sync, msal does the same
(msal/managed_identity.py:516-546). Both read ``access_token`` and ``expires_on`` from the answer
(azure/identity/_internal/managed_identity_client.py:62-83; msal/managed_identity.py:547-555).

The endpoint answers every request with a token naming the identity it was asked for
(``token-<client id or "system">``) and records the request. It checks the secret header, as
the service does; nothing else (no real identity, no expiry policy, no error answers).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

SECRET = "local-identity-header-secret"


@dataclass
class TokenRequest:
    resource: str
    client_id: str | None
    secret_ok: bool


@dataclass
class IdentityEndpoint:
    url: str
    requests: list[TokenRequest] = field(default_factory=list)

    @property
    def environment(self) -> dict[str, str]:
        """What App Service sets for the app's process."""
        return {"IDENTITY_ENDPOINT": self.url, "IDENTITY_HEADER": SECRET}


def token_for(client_id: str | None) -> str:
    return f"token-{client_id or 'system'}"


@contextmanager
def identity_endpoint() -> Iterator[IdentityEndpoint]:
    requests: list[TokenRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlparse(self.path).query)
            client_id = query.get("client_id", [None])[0]
            requests.append(
                TokenRequest(
                    resource=query.get("resource", [""])[0],
                    client_id=client_id,
                    secret_ok=self.headers.get("X-IDENTITY-HEADER") == SECRET,
                )
            )
            body = json.dumps(
                {
                    "access_token": token_for(client_id),
                    "expires_on": str(int(time.time()) + 3600),
                    "resource": query.get("resource", [""])[0],
                    "token_type": "Bearer",
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield IdentityEndpoint(f"http://127.0.0.1:{server.server_address[1]}/msi/token", requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
