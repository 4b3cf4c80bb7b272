"""The payment provider port: what the payment consumer asks of a provider, and what comes back.

A request moves money (a capture from the customer's payment method, a refund of what was
captured) under two names the merchant chooses: ``reference``, the operation's own name, by
which ``lookup`` finds it again; and ``idempotency_key``, sent with every attempt so that a
provider which honours keys performs the operation once however often it is asked.

What comes back is either a ``ProviderResult`` (the provider decided: the money moved, the card
was declined, or the request itself is wrong) or an error, classified by what a retry can fix:

- the moment: ``ProviderUnavailable`` (timeout, connection trouble, 5xx, 429: the outcome is
  unknown when ``may_have_committed``), ``ProviderBusy`` (409: the same key is being processed
  now); retry with the same key, or look the operation up;
- the system: ``SystemicProviderError`` and its kinds, ``KeyReused`` (the same key with another
  payload: a bug of ours), ``ProviderRejectedCredentials`` (401/403: configuration) and
  ``UnexpectedProviderAnswer`` (an answer outside the provider's documented API: a redirect, a
  malformed request refused, an unreadable or oversized body) with ``UnrecognisedRefusal`` (a
  refusal the provider's documentation, as the adapter knows it, does not name); an operator
  must act, no redelivery fixes it.

A declined card and a refusal the provider documents as a business rule (a refund above what was
captured) are outcomes, not errors: recorded, never retried. Only those: a refusal of a capture
or refund the adapter does not recognise is **never** an outcome (a completion with no money
moved, silently); it is ``UnrecognisedRefusal``, so the consumer holds the message, logs it as
systemic and the systemic alert fires, until an operator has read the provider's answer.

Pure: imports ``shared.kit.errors`` only; never aiohttp, Azure, an adapter or telemetry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from idempotent_consumer import bound

__all__ = [
    "KeyReused",
    "Lookup",
    "LookupStatus",
    "Operation",
    "PaymentProvider",
    "PaymentRequest",
    "ProviderBusy",
    "ProviderError",
    "ProviderRejectedCredentials",
    "ProviderResult",
    "ProviderUnavailable",
    "ResultStatus",
    "SystemicProviderError",
    "UnexpectedProviderAnswer",
    "UnrecognisedRefusal",
]


class Operation(StrEnum):
    CAPTURE = "capture"  # charge the customer's payment method
    REFUND = "refund"  # give back (part of) what was captured for the order


@dataclass(frozen=True, slots=True)
class PaymentRequest:
    operation: Operation
    order_id: str  # the merchant's order
    reference: str  # the merchant's unique reference of this operation (the lookup key)
    idempotency_key: str  # sent as the Idempotency-Key header, the same on every attempt
    customer_id: str  # whose payment method (captures)
    amount_minor: int  # in the currency's minor unit, > 0
    currency: str  # ISO 4217, e.g. "EUR"

    def __post_init__(self) -> None:
        # A request that cannot be right never leaves: these are bugs of the caller's.
        if self.amount_minor <= 0:
            raise ValueError(f"amount_minor must be > 0, not {self.amount_minor}")
        for name in ("order_id", "reference", "idempotency_key", "currency"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")


class ResultStatus(StrEnum):
    SUCCEEDED = "succeeded"  # the money moved
    DECLINED = "declined"  # the card (402): a business outcome
    REFUSED = "refused"  # a business rule the provider documents (a refund above the captured)


@dataclass(frozen=True, slots=True)
class ProviderResult:
    status: ResultStatus
    reference: str
    provider_id: str | None  # the provider's operation id when it moved money, else None
    amount_minor: int
    detail: str  # bounded, for records and dead-letter descriptions

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", bound(self.detail))


class LookupStatus(StrEnum):
    FOUND = "found"  # the provider completed an operation under the reference: ``result``
    NOT_FOUND = "not_found"  # it has none: it never started one, or dropped it before commit
    IN_PROGRESS = "in_progress"  # it is processing one now: ask again later


@dataclass(frozen=True, slots=True)
class Lookup:
    status: LookupStatus
    result: ProviderResult | None = None  # FOUND: the first operation under the reference
    # FOUND: the later operations under the same reference, oldest first. Only a provider that
    # honours no key (or a caller that changed the key) performs one operation twice: this is
    # how the caller sees it did, to put it right.
    repeats: tuple[ProviderResult, ...] = ()


class ProviderError(Exception):
    """Base of the provider's errors; ``description`` is bounded and never carries a key or a
    credential."""

    def __init__(self, description: str) -> None:
        self.description = bound(description)
        super().__init__(self.description)

    @property
    def performed_nothing(self) -> bool:
        """Whether this attempt provably took no effect at the provider (it never reached its
        processing, or the provider refused it before processing: a 4xx): its caller may
        withdraw the attempt and make it afresh. False whenever the outcome is unknown."""
        return False


class ProviderUnavailable(ProviderError):
    """Timeout, connection error, 5xx or 429: a retry with the same key can fix it.

    ``may_have_committed``: False only when the request provably did not reach the provider's
    processing (the connection was never made, a 429); after a timeout or a 5xx the provider may
    have moved the money, and the caller never assumes it did not. ``retry_after_s``: the
    provider's Retry-After, when it sent one."""

    def __init__(
        self, description: str, *, may_have_committed: bool, retry_after_s: float | None = None
    ) -> None:
        super().__init__(description)
        self.may_have_committed = may_have_committed
        self.retry_after_s = retry_after_s

    @property
    def performed_nothing(self) -> bool:
        return not self.may_have_committed


class ProviderBusy(ProviderError):
    """409: a request with the same key is being processed now (the draft's concurrent
    request); a retry with the same key after a short wait gets its result."""

    def __init__(self, description: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(description)
        self.retry_after_s = retry_after_s


class SystemicProviderError(ProviderError):
    """No retry or redelivery fixes it: an operator must act (hold, alert, never dead-letter)."""


class KeyReused(SystemicProviderError):
    """422 for the key: the same key came with another payload. Keys are derived from the
    message and the operation, so this is a bug of ours, and it would refuse every attempt.
    This attempt performed nothing, but the provider holds *something* under the key: the
    in-progress record stays for an operator (``performed_nothing`` is False)."""


class ProviderRejectedCredentials(SystemicProviderError):
    """401/403: the credential is missing, wrong or not allowed (configuration)."""

    @property
    def performed_nothing(self) -> bool:
        return True  # a 4xx: refused before processing (RFC 9110 section 15.5)


class UnexpectedProviderAnswer(SystemicProviderError):
    """An answer outside the provider's documented API (a status it does not document, a body
    that does not parse or is larger than any answer of its API, a refusal of our request as
    malformed, a redirect): the base URL, the API version or the adapter is wrong. After a 2xx
    that does not parse the money may have moved; after a redirect it did not where the
    redirect pointed (it is never followed), and at the provider only a 303 says it may have
    (RFC 9110 section 15.4.4: "an indirect response to the original request"). Either way the
    operation stays unresolved, its in-progress record kept, until an operator looks: the
    provider's lookup says what it did."""


class UnrecognisedRefusal(UnexpectedProviderAnswer):
    """A refusal (4xx) of a capture or refund that the provider's documentation, as the adapter
    knows it, does not name: neither a decline, nor a business refusal, nor a key rule. Not an
    outcome: nothing is recorded as the operation's result, and nothing moved that the adapter
    knows of; an operator reads the provider's answer (in the description) and fixes the
    adapter's mapping or the request."""

    @property
    def performed_nothing(self) -> bool:
        return True  # a 4xx: refused before processing (RFC 9110 section 15.5)


class PaymentProvider(Protocol):
    """A payment provider. ``honours_idempotency_keys``: whether a repeat with the same key is
    known to move no money again; when False, only ``lookup`` can tell what a lost attempt did."""

    honours_idempotency_keys: bool

    async def perform(self, request: PaymentRequest) -> ProviderResult:
        """Perform the request; raises a ``ProviderError`` when the provider did not decide."""
        ...

    async def lookup(self, reference: str) -> Lookup:
        """What the provider knows of the operation(s) under ``reference``; raises
        ``ProviderUnavailable`` or a ``SystemicProviderError`` when it cannot say."""
        ...
