"""How one payment provider words its answers: ``ProviderProfile``, the paths of its API and
which of its refusals (4xx) mean what to the port (``shared.payments.provider``).

The draft "The Idempotency-Key HTTP Header Field" (draft-ietf-httpapi-idempotency-key-header-06,
section 2.7, the revision ``local.standins.payment_provider`` follows) fixes the statuses of the
key's errors but not their wording: its examples give all three the same problem ``type`` (a
link to the resource's documentation), or no body at all and a ``Link`` header instead. So the
default profile, ``IETF_DRAFT_PROFILE``, tells them apart by the status alone: 400 a missing
key, 409 a request still being processed under the key ("Concurrent Request", section 2.6), 422
the key reused with another payload. Everything else a provider refuses is "the resource's
documentation" (section 2.7: "For other 4xx/5xx errors ... the client SHOULD act appropriately
by following the resource's documentation"): its declines and its business refusals. A
provider that words its errors differently (another status, an error code in its own field)
gets a profile of its own, selected where the adapter is built (``shared.bootstrap``).

A refusal the profile does not recognise is not a business outcome: the adapter raises
``UnrecognisedRefusal`` (systemic), never a result with no money moved.

Owns the mapping only: pure, no I/O, no aiohttp; never decides what to retry (the port's error
classes do) and never reads anything but the status and the one code its pointer names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.payments.provider import Operation

__all__ = [
    "IETF_DRAFT_PROFILE",
    "REFUND_EXCEEDS_CAPTURED",
    "ProviderProfile",
    "Refusal",
    "RefusalRule",
    "code_at",
]


class Refusal(StrEnum):
    """What a refusal of a capture or refund means, as the port sees it."""

    DECLINED = "declined"  # the payment method was declined: ResultStatus.DECLINED
    REFUSED = "refused"  # a business refusal the merchant must see: ResultStatus.REFUSED
    KEY_REUSED = "key_reused"  # the key came with another payload: KeyReused
    IN_PROGRESS = "in_progress"  # a request under the key is being processed: ProviderBusy
    # The request is malformed (a missing key, a key not in the published format, a body the
    # provider cannot read): a bug of ours, UnexpectedProviderAnswer.
    MALFORMED = "malformed"


# Answered before any profile is asked, by their HTTP meaning (RFC 9110 sections 15.5.2 and
# 15.5.4, RFC 6585 section 4): a profile cannot redefine them.
_FIXED_STATUSES = frozenset({401, 403, 429})


@dataclass(frozen=True, slots=True)
class RefusalRule:
    """``status`` means ``refusal``; with ``code``, only when the body's code (the value at the
    profile's ``code_pointer``) is exactly ``code``. A rule with a code wins over one without."""

    status: int
    refusal: Refusal
    code: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderProfile:
    """One provider's API as the adapter calls it: the paths (joined to the base URL, which is
    the provider's origin and holds no API version: the version is the profile's), where a
    refusal's body names its kind (an RFC 6901 JSON Pointer, ``/type`` for an RFC 9457 problem
    document) and the refusals it documents."""

    name: str
    captures_path: str
    refunds_path: str
    operations_path: str
    rules: tuple[RefusalRule, ...]
    code_pointer: str = "/type"

    def __post_init__(self) -> None:
        for path in (self.captures_path, self.refunds_path, self.operations_path):
            if not path.startswith("/"):
                raise ValueError(f"{self.name}: a path starts with '/', not {path!r}")
        if self.code_pointer and not self.code_pointer.startswith("/"):
            raise ValueError(f"{self.name}: {self.code_pointer!r} is not a JSON Pointer")
        seen: set[tuple[int, str | None]] = set()
        for rule in self.rules:
            # A rule that can never fire (a status answered before the profile, or one that is
            # not a refusal) or that contradicts another would be a mapping nobody applies.
            if not 400 <= rule.status <= 499 or rule.status in _FIXED_STATUSES:
                raise ValueError(f"{self.name}: HTTP {rule.status} is not a profile's to map")
            if (rule.status, rule.code) in seen:
                raise ValueError(f"{self.name}: HTTP {rule.status} {rule.code!r} is mapped twice")
            seen.add((rule.status, rule.code))

    def path(self, operation: Operation) -> str:
        return self.captures_path if operation is Operation.CAPTURE else self.refunds_path

    def refusal(self, status: int, body: Any) -> Refusal | None:
        """What the refusal ``status`` with the parsed JSON ``body`` (None when there is none)
        means, or None when this profile does not recognise it."""
        code = code_at(body, self.code_pointer)
        by_status = None
        for rule in self.rules:
            if rule.status != status:
                continue
            if rule.code is None:
                by_status = rule.refusal
            elif rule.code == code:
                return rule.refusal
        return by_status


def code_at(document: Any, pointer: str) -> str | None:
    """The string at the RFC 6901 JSON Pointer ``pointer`` in ``document``, or None when there
    is none (or it is not a string)."""
    value = document
    if pointer:
        for token in pointer[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")  # RFC 6901 section 4
            if isinstance(value, dict):
                value = value.get(token)
            elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
                value = value[int(token)]
            else:
                return None
    return value if isinstance(value, str) else None


# The stand-in's documented business refusal (``local.standins.payment_provider``): a refund
# above what the order still has captured. The draft has no word for it (section 2.7 leaves
# "other 4xx" to the resource's documentation); it shares 422 with the draft's key reuse, as
# payment APIs commonly answer business rules with 422, so only this exact code makes it one.
REFUND_EXCEEDS_CAPTURED = "https://payments.example/problems/refund-exceeds-captured"

IETF_DRAFT_PROFILE = ProviderProfile(
    name="ietf-draft",
    captures_path="/v1/captures",
    refunds_path="/v1/refunds",
    operations_path="/v1/operations",
    rules=(
        # draft-06 section 2.7: "the resource SHOULD reply with an HTTP 400 status code" for a
        # missing key; a key not in the published format (sections 2.5.2, 5) and a body the
        # provider cannot read are 400s too. Whatever it names, our request was wrong.
        RefusalRule(400, Refusal.MALFORMED),
        # Section 2.7 "If the request is retried, while the original request is still being
        # processed, the resource SHOULD reply with an HTTP 409 status code"; no correction is
        # required before the retry.
        RefusalRule(409, Refusal.IN_PROGRESS),
        # Section 2.7 "If there is an attempt to reuse an idempotency key with a different
        # request payload, the resource SHOULD reply with a HTTP 422 status code".
        RefusalRule(422, Refusal.KEY_REUSED),
        # The resource's documentation: 402 a declined payment method (RFC 9110 section 15.5.3
        # reserves 402; payment APIs answer a decline with it), and the refund rule above.
        RefusalRule(402, Refusal.DECLINED),
        RefusalRule(422, Refusal.REFUSED, REFUND_EXCEEDS_CAPTURED),
    ),
)
