"""Time, for everything that waits or stamps, and the one way a time is stored in a document.

Owns ``Clock`` (injected at the composition root, so tests and stand-ins run lock expiry, backoff
and ages on one manual time line) and ``document_timestamp`` (every time the kit stores: a
call's ``startedAt``, ``overBy`` and ``completedAt``; an app may stamp its own with it). Imports
nothing else of the kit and no Azure library.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Time for everything that waits or stamps: the consumer's backoff, lock deadlines, the
    configuration-error hold and ``acceptedAt``. One object, injected at the composition root,
    so that tests and stand-ins run lock expiry and backoff on one manual time line."""

    def now(self) -> datetime:
        """Aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()


def document_timestamp(moment: datetime) -> str:
    """A time as the documents store it (``acceptedAt``, the outbox event's ``createdAt``, the
    relay's ``dispatchedAt`` and ``parkedAt``): UTC, microseconds, ``Z``. Fixed width, so its
    string order is its time order (the watchdog's query compares ``createdAt`` as a string)."""
    # isoformat, not strftime: a third of the CPU, and a four-digit year before 1000 too.
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return f"{utc.isoformat(timespec='microseconds')}Z"
