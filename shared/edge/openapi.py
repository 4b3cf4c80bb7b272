"""The orders API's OpenAPI 3.1 document: ``openapi.json`` beside this module, the one
description of its operations, bodies, headers, statuses, problem documents and function-key
security, served as ``GET /api/openapi.json`` (``shared.adapters.http_in.openapi_response``).

Owns reading the file. Never builds or edits the document at run time: the bytes served are the
bytes checked in, which ``tests/edge/test_openapi.py`` validates and holds to the app's routes
and the edge's answers, and ``tests/edge/test_api_properties.py`` tests the app against.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

DOCUMENT_PATH = Path(__file__).with_name("openapi.json")


@cache
def document_bytes() -> bytes:
    """The document's bytes, read once per process (the file ships with ``shared/``)."""
    return DOCUMENT_PATH.read_bytes()
