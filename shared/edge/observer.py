"""What the orders API reports of each answered request: its ``Route``, its ``RequestOutcome``
(a vocabulary bounded here), its status and, for a replay, the age of the key's record; the
``EdgeObserver`` port it reports to.

Every request is reported once, whatever answered it: the core (``shared.edge.core``), the
GET view (``shared.edge.view``), a refusal of the HTTP layer before either runs (403, 413, 415,
400: ``shared.adapters.http_in``), an edge that cannot be built (503), or an exception that
escaped (500, answered by the Functions host). ``shared.adapters.http_in.answered`` is the one
place that reports; each ``EdgeResponse`` carries its outcome, set where it is made
(``shared.edge.responses``), so no status is classified twice.

The outcomes, and why each is its own (docs/telemetry.md, "The orders API"):

- ``created``: a new intent recorded and its message sent (201 for a place, 200 for a change:
  the change's version created);
- ``replayed``: the stored answer of an earlier request with the same key and payload (draft-
  ietf-httpapi-idempotency-key-header-06, section 2.6); its message sent once more first when
  the first handling stopped before marking it sent. Its record's age is reported with it;
- ``found``: a GET answered with the order (200);
- ``in_progress``: 409, the same key's first request is still being handled (section 2.6);
- ``key_reused``: 422, the key was used with another payload (section 2.7);
- ``order_exists``: 409, the key's record expired and its order exists;
- ``version_mismatch``: 412, If-Match does not name the order's version;
- ``not_found``: 404, no such order of this client;
- ``cancelled``: 409, a change of a cancelled order, refused;
- ``invalid``: 400, 413, 415, the request itself is wrong (body, key, If-Match, media type);
- ``forbidden``: 403, a principal id no authentication provider gives;
- ``contention``: 503, concurrent changes of one order won every commit attempt;
- ``not_sent``: 503, recorded, but the queue did not take the message (a retry sends it);
- ``unavailable``: 503, the store failed, or the app's settings are wrong;
- ``failed``: 500, an exception escaped (a bug).

Pure: no Azure, no telemetry; the implementation is ``shared.telemetry.edge.EdgeTelemetry``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from enum import StrEnum
from typing import Protocol


class Route(StrEnum):
    """The orders API's operations (``function_app.py``'s HTTP functions)."""

    PLACE = "place"
    AMEND = "amend"
    CANCEL = "cancel"
    GET = "get"


class RequestOutcome(StrEnum):
    """How a request was answered (module docstring: each one, its status and why)."""

    CREATED = "created"
    REPLAYED = "replayed"
    FOUND = "found"
    IN_PROGRESS = "in_progress"
    KEY_REUSED = "key_reused"
    ORDER_EXISTS = "order_exists"
    VERSION_MISMATCH = "version_mismatch"
    NOT_FOUND = "not_found"
    CANCELLED = "cancelled"
    INVALID = "invalid"
    FORBIDDEN = "forbidden"
    CONTENTION = "contention"
    NOT_SENT = "not_sent"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"


class RequestObservation(Protocol):
    def answered(
        self,
        outcome: RequestOutcome,
        status: int,
        *,
        order_id: str | None = None,
        record_age_s: float | None = None,
        error: BaseException | None = None,
    ) -> None:
        """The request's answer, once. ``order_id``: the order it names (a path's is the
        client's text, unchecked); ``record_age_s``: a replay's record age (now - the record's
        ``startedAt``); ``error``: what escaped (``failed``)."""
        ...


class EdgeObserver(Protocol):
    def handling(self, route: Route) -> AbstractContextManager[RequestObservation]:
        """One request, from its arrival to its answer: the store's and the sender's calls
        made inside belong to it."""
        ...
