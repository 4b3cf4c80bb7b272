"""How one delivery rides out a failure before it gives up: the retry policy every consumer of
the kit shares, and which outcomes it retries or holds. Pure: no I/O, no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from idempotent_consumer._decision import Outcome

# Outcomes worth retrying within the same delivery: the moment or the system is wrong, and
# waiting (while holding the lock) is cheaper than burning a delivery attempt.
RETRIED_IN_DELIVERY = frozenset({Outcome.TRANSIENT, Outcome.SYSTEMIC})
# Not retried, but held before abandoning: nothing says time cures an unknown error, yet
# abandoning at once would burn maxDeliveryCount deliveries in seconds (see RetryPolicy).
HELD_BEFORE_ABANDON = frozenset({Outcome.UNEXPECTED})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How one delivery rides out a transient (or systemic) failure before abandoning.

    Abandoning at once would redeliver at once: a one-minute Cosmos DB outage would burn
    ``maxDeliveryCount`` deliveries in seconds and dead-letter healthy orders. Instead the
    delivery retries with capped exponential backoff (full jitter) while its lock lasts, and
    abandons ``lock_margin_s`` before the lock expires. Each delivery thus spans about one
    ``lockDuration``, and an outage shorter than about ``maxDeliveryCount x (lockDuration -
    lock_margin_s)`` dead-letters nothing. The host renews the lock while the function runs, so
    an attempt that overruns the margin is still covered; if not, the settlement fails and the
    redelivery resolves it.

    An unexpected error (an exception no adapter could classify: a bug, or a failure mode not
    yet known) is not retried, since nothing says waiting cures it; but it is not abandoned at
    once either: the delivery holds its lock for ``unexpected_hold_s`` (at most until the lock
    margin) first. Ten deliveries then take minutes, not milliseconds: the error-level log with
    its stack trace reaches an operator before Service Bus dead-letters a possibly healthy order
    as ``MaxDeliveryCountExceeded``, and a poison-by-bug message occupies one concurrency slot
    for half a minute per delivery, not a whole lock duration.
    """

    first_delay_s: float = 1.0
    max_delay_s: float = 8.0
    lock_margin_s: float = 5.0
    budget_without_lock_s: float = 50.0  # when the message does not carry its lock expiry
    unexpected_hold_s: float = 30.0

    def next_delay(
        self,
        attempt: int,
        remaining_s: float,
        jitter: float,
        retry_after_s: float | None = None,
    ) -> float | None:
        """Delay before retry ``attempt`` (1-based), or None to abandon now.

        ``remaining_s`` is the time left until the lock expires; ``jitter`` is in [0, 1];
        ``retry_after_s`` the wait the service asked for, if any (Cosmos DB's retry-after of a
        throttled operation): the delay is never shorter, since retrying earlier is throttled
        again, and never runs past the lock margin."""
        available = remaining_s - self.lock_margin_s
        if available <= 0:
            return None
        # The exponent is capped: 2.0 ** 1100 overflows, and the cap is reached by then anyway.
        exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
        ceiling = min(self.max_delay_s, self.first_delay_s * 2.0**exponent)
        delay = max(0.05, ceiling * jitter, retry_after_s or 0.0)
        return min(available, delay)

    def hold_before_abandon(self, remaining_s: float) -> float:
        """How long an unexpected error holds the lock before abandoning (0: abandon now)."""
        return max(0.0, min(self.unexpected_hold_s, remaining_s - self.lock_margin_s))


# 2 ** 64 s is far beyond any max_delay_s; keeps ``2.0 ** exponent`` finite for any attempt.
_MAX_EXPONENT = 64
