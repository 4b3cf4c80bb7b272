"""The payment provider over HTTP (aiohttp): ``shared.payments.provider.PaymentProvider``.

Owns the provider's HTTP API as the app calls it (the stand-in, ``local.standins.
payment_provider``, serves the same and documents each rule's source); the paths and the meaning
of each refusal are the provider's profile (``shared.adapters.payment_profile``, the draft's by
default):

- ``POST /v1/captures`` and ``POST /v1/refunds``, a JSON body ``{"order_id", "reference",
  "customer_id", "amount_minor", "currency"}``, ``Authorization: Bearer <api key>`` and
  ``Idempotency-Key: "<key>"`` (an RFC 8941 String, as draft-ietf-httpapi-idempotency-key-header
  section 2.1 requires; sent on every attempt, whether the provider honours it or not: section
  2.5.1 lets a client send it "to indicate the user's intent is to only perform this action
  once"). 201 with the operation ``{"id", "operation", "status": "succeeded", ...}``; errors as
  ``application/problem+json`` (RFC 7807, as in the draft's examples; now RFC 9457);
- ``GET /v1/operations?reference=<reference>``: 200 ``{"reference", "operations": [{"id",
  "operation", "state": "processing" | "completed", "outcome", "order_id", "amount_minor",
  "currency", "detail"}]}``, oldest first; 404 when there is none.

The base URL is the provider's origin (``https://api.provider.example``), without the API
version: the profile's paths carry it.

The status table (``perform``): 201 -> SUCCEEDED; 401/403 -> ``ProviderRejectedCredentials``;
429 -> ``ProviderUnavailable`` (not committed); 5xx, a timeout or a connection lost after
sending -> ``ProviderUnavailable`` (may have committed); a connection never made ->
``ProviderUnavailable`` (not committed); another 4xx as the profile says (the draft's: 402 ->
DECLINED, 409 -> ``ProviderBusy``, 422 -> ``KeyReused``, 422 ``refund-exceeds-captured`` ->
REFUSED, 400 -> ``UnexpectedProviderAnswer``), and a 4xx it does not recognise ->
``UnrecognisedRefusal``; a 3xx, any other status, a body that does not parse or is over
``MAX_ANSWER_BYTES`` -> ``UnexpectedProviderAnswer``.

Untrusted answers steer nothing: a redirect is never followed (a capture's body and key would go
to whatever host the ``Location`` names, and that host's answer would be taken for the
provider's), and no answer is read beyond ``MAX_ANSWER_BYTES``.

Every request has one total timeout (``timeout_s``, the caller's setting; 10 s by default).
Decides nothing (what to retry or park is the consumer's); logs nothing, and no description
carries the key or the credential.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import aiohttp

from shared.adapters.payment_profile import IETF_DRAFT_PROFILE, ProviderProfile, Refusal
from shared.payments.provider import (
    KeyReused,
    Lookup,
    LookupStatus,
    PaymentRequest,
    ProviderBusy,
    ProviderRejectedCredentials,
    ProviderResult,
    ProviderUnavailable,
    ResultStatus,
    UnexpectedProviderAnswer,
    UnrecognisedRefusal,
)

__all__ = [
    "CAPTURES_PATH",
    "DEFAULT_TIMEOUT_S",
    "IDEMPOTENCY_KEY_HEADER",
    "MAX_ANSWER_BYTES",
    "OPERATIONS_PATH",
    "PROBLEM_JSON",
    "REFUNDS_PATH",
    "HttpPaymentProvider",
    "sf_string",
]

DEFAULT_TIMEOUT_S = 10.0
CAPTURES_PATH = IETF_DRAFT_PROFILE.captures_path
REFUNDS_PATH = IETF_DRAFT_PROFILE.refunds_path
OPERATIONS_PATH = IETF_DRAFT_PROFILE.operations_path
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
PROBLEM_JSON = "application/problem+json"
# The largest answer read. The API's answers are an operation (about 300 bytes), a problem
# document (a few hundred) and the lookup's list of the operations under one reference: one,
# more only when a provider that honours no key performed lost attempts again (about 250 bytes
# each, a few per delivery): 64 KiB holds over 200. A larger answer is not the API's, and a
# delivery must not hold more (16 concurrent calls, host.json maxConcurrentCalls: at most 1 MiB
# of answers in memory). The headers are bounded by aiohttp itself (at most 128 of 8190 bytes,
# ClientSession's max_headers and max_field_size defaults, aiohttp/client.py).
MAX_ANSWER_BYTES = 64 * 1024


def sf_string(value: str) -> str:
    """``value`` serialised as an RFC 8941 String (section 4.1.6): printable ASCII in double
    quotes, ``\\`` and ``"`` escaped with a backslash. Raises ValueError for anything else."""
    if any(not 0x20 <= ord(char) <= 0x7E for char in value):
        raise ValueError("an Idempotency-Key must be printable ASCII (RFC 8941 String)")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class HttpPaymentProvider:
    """The provider at ``base_url`` (its origin: the profile's paths are joined to it),
    authenticated with ``api_key`` (a Bearer token), its answers read as ``profile`` says.

    ``session``: a ``ClientSession`` the caller owns and closes; without one the adapter opens
    its own on first use and ``close`` closes it. ``timeout_s`` bounds each request whole
    (connection, sending, the provider's processing, reading the answer)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        honours_idempotency_keys: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        profile: ProviderProfile = IETF_DRAFT_PROFILE,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, not {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.honours_idempotency_keys = honours_idempotency_keys
        self.timeout_s = timeout_s
        self.profile = profile
        self._authorization = f"Bearer {api_key}"
        self._session = session
        self._owns_session = session is None

    async def perform(self, request: PaymentRequest) -> ProviderResult:
        body = {
            "order_id": request.order_id,
            "reference": request.reference,
            "customer_id": request.customer_id,
            "amount_minor": request.amount_minor,
            "currency": request.currency,
        }
        headers = {IDEMPOTENCY_KEY_HEADER: sf_string(request.idempotency_key)}
        what = f"{request.operation} {request.reference!r}"
        status, answer, retry_after_s = await self._call(
            "POST",
            self.profile.path(request.operation),
            what,
            json_body=body,
            headers=headers,
            write=True,
        )
        if status in (200, 201):
            return _succeeded(request, answer, what)
        if not 400 <= status <= 499:
            raise _unexpected(status, what, _detail(answer))
        detail = _detail(answer)
        match self.profile.refusal(status, answer):
            case Refusal.DECLINED:
                return ProviderResult(
                    ResultStatus.DECLINED, request.reference, None, request.amount_minor, detail
                )
            case Refusal.REFUSED:
                return ProviderResult(
                    ResultStatus.REFUSED, request.reference, None, request.amount_minor, detail
                )
            case Refusal.KEY_REUSED:
                raise KeyReused(f"{what}: the idempotency key came with another payload: {detail}")
            case Refusal.IN_PROGRESS:
                raise ProviderBusy(
                    f"{what}: being processed: {detail}", retry_after_s=retry_after_s
                )
            case Refusal.MALFORMED:
                raise UnexpectedProviderAnswer(
                    f"{what}: HTTP {status}, the provider refused the request as malformed (its "
                    f"Idempotency-Key header or its body): {detail}"
                )
            case None:
                # Never an outcome: recorded as one, the operation would complete with no money
                # moved and nobody told. Held and alerted until an operator has read it.
                raise UnrecognisedRefusal(
                    f"{what}: HTTP {status} is a refusal the provider's profile "
                    f"({self.profile.name}) does not name: {detail}"
                )

    async def lookup(self, reference: str) -> Lookup:
        what = f"lookup {reference!r}"
        status, answer, _ = await self._call(
            "GET",
            self.profile.operations_path,
            what,
            params={"reference": reference},
            write=False,
        )
        if status == 404:
            return Lookup(LookupStatus.NOT_FOUND)
        if status != 200:
            raise _unexpected(status, what, _detail(answer))
        try:
            operations = answer["operations"]
            if any(operation["state"] == "processing" for operation in operations):
                return Lookup(LookupStatus.IN_PROGRESS)
            results = [_operation_result(reference, operation) for operation in operations]
        except (KeyError, TypeError, ValueError) as error:
            raise UnexpectedProviderAnswer(f"{what}: unreadable answer ({error!r})") from None
        if not results:
            return Lookup(LookupStatus.NOT_FOUND)
        return Lookup(LookupStatus.FOUND, results[0], tuple(results[1:]))

    async def _call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        write: bool,
        json_body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, float | None]:
        """The status, the parsed JSON body (None when there is none) and the Retry-After of
        one request; raises what the status table says for a transport failure, a redirect,
        401/403, 429, 5xx and a body over ``MAX_ANSWER_BYTES``. ``write``: whether the request
        may move money (for ``may_have_committed``)."""
        session = self._client()
        try:
            async with session.request(
                method,
                self.base_url + path,
                json=json_body,
                params=params,
                headers={"Authorization": self._authorization, **(headers or {})},
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                # aiohttp follows 301, 302, 303, 307 and 308 by default (client.py), a 307 with
                # the body and the key, a 302 or 303 as a GET, to any host: never on a money call.
                allow_redirects=False,
            ) as response:
                status = response.status
                retry_after_s = _retry_after(response.headers.get("Retry-After"))
                raw = await _bounded_body(response)
                if raw is None:
                    response.close()  # the rest unread: the connection is dropped, not reused
        # Order matters: a connect timeout is a TimeoutError too, but nothing was sent.
        except (aiohttp.ConnectionTimeoutError, aiohttp.ClientConnectorError) as error:
            raise ProviderUnavailable(
                f"{what}: no connection to the provider ({type(error).__name__})",
                may_have_committed=False,
            ) from None
        except TimeoutError:
            raise ProviderUnavailable(
                f"{what}: no answer within {self.timeout_s:g} s; the outcome is unknown",
                may_have_committed=write,
            ) from None
        except aiohttp.ClientError as error:
            raise ProviderUnavailable(
                f"{what}: the connection failed ({type(error).__name__}); the outcome is unknown",
                may_have_committed=write,
            ) from None
        if 300 <= status <= 399:
            # RFC 9110 section 15.4: a 3xx says "further action needs to be taken by the user
            # agent in order to fulfill the request": the provider did not perform it (a 303
            # alone is "an indirect response to the original request", section 15.4.4, so it
            # may have). Systemic: the base URL is wrong or the provider moved; the pending
            # call stays, and its lookup says what the provider did.
            raise UnexpectedProviderAnswer(
                f"{what}: HTTP {status}, a redirect: not followed, a provider call goes to the "
                "configured base URL only"
            )
        answer = None if raw is None else _parse(raw)
        detail = _detail(answer) if raw is not None else "an answer too large to read"
        if status in (401, 403):
            raise ProviderRejectedCredentials(f"{what}: HTTP {status}: {detail}")
        if status == 429:
            raise ProviderUnavailable(
                f"{what}: throttled (HTTP 429): {detail}",
                may_have_committed=False,
                retry_after_s=retry_after_s,
            )
        if status >= 500:
            raise ProviderUnavailable(
                f"{what}: HTTP {status}: {detail}; the outcome is unknown",
                may_have_committed=write,
                retry_after_s=retry_after_s,
            )
        if raw is None:
            raise UnexpectedProviderAnswer(
                f"{what}: HTTP {status} with an answer over {MAX_ANSWER_BYTES} bytes, not read"
            )
        if raw and answer is None:
            raise UnexpectedProviderAnswer(f"{what}: HTTP {status} with a body that is not JSON")
        return status, answer, retry_after_s

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        """Close the session the adapter opened (never one the caller passed in)."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _succeeded(request: PaymentRequest, answer: Any, what: str) -> ProviderResult:
    try:
        provider_id = str(answer["id"])
        amount_minor = int(answer["amount_minor"])
    except (KeyError, TypeError, ValueError):
        # The money may have moved: the key's repeat or the lookup can tell, an operator must.
        raise UnexpectedProviderAnswer(f"{what}: a success without its id and amount") from None
    return ProviderResult(
        ResultStatus.SUCCEEDED,
        request.reference,
        provider_id,
        amount_minor,
        f"{request.operation} {amount_minor} {request.currency} ({provider_id})",
    )


def _operation_result(reference: str, operation: dict[str, Any]) -> ProviderResult:
    status = ResultStatus(operation["outcome"])
    provider_id = operation.get("id") if status is ResultStatus.SUCCEEDED else None
    return ProviderResult(
        status,
        reference,
        None if provider_id is None else str(provider_id),
        int(operation["amount_minor"]),
        str(operation.get("detail") or status),
    )


async def _bounded_body(response: aiohttp.ClientResponse) -> bytes | None:
    """The answer's body, or None when it is over ``MAX_ANSWER_BYTES``: refused from its
    Content-Length before any of it is read, else as soon as what was read passes the bound
    (a chunked or compressed body declares no decoded length; aiohttp decompresses it chunk by
    chunk, each at most its read buffer)."""
    if response.content_length is not None and response.content_length > MAX_ANSWER_BYTES:
        return None
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            return None
    return bytes(body)


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None


def _detail(answer: Any) -> str:
    """A problem document's title and detail (RFC 9457), or what there is."""
    if isinstance(answer, dict):
        parts = [str(answer[name]) for name in ("title", "detail") if answer.get(name)]
        if parts:
            return ": ".join(parts)
    return "no problem details"


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (RFC 9110 section 10.2.3); an HTTP-date is not read."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _unexpected(status: int, what: str, detail: str) -> UnexpectedProviderAnswer:
    return UnexpectedProviderAnswer(f"{what}: HTTP {status} is not in the provider's API: {detail}")
