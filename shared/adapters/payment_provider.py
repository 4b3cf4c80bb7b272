"""The payment provider over HTTP (aiohttp): ``shared.payments.provider.PaymentProvider``.

Owns the provider's HTTP API as the app calls it (the stand-in, ``local.standins.
payment_provider``, serves the same and documents each rule's source):

- ``POST /v1/captures`` and ``POST /v1/refunds``, a JSON body ``{"order_id", "reference",
  "customer_id", "amount_minor", "currency"}``, ``Authorization: Bearer <api key>`` and
  ``Idempotency-Key: "<key>"`` (an RFC 8941 String, as draft-ietf-httpapi-idempotency-key-header
  section 2.1 requires; sent on every attempt, whether the provider honours it or not: section
  2.5.1 lets a client send it "to indicate the user's intent is to only perform this action
  once"). 201 with the operation ``{"id", "operation", "status": "succeeded", ...}``; errors as
  ``application/problem+json`` (RFC 7807, as in the draft's examples; now RFC 9457) whose
  ``type`` is one of ``Problem``;
- ``GET /v1/operations?reference=<reference>``: 200 ``{"reference", "operations": [{"id",
  "operation", "state": "processing" | "completed", "outcome", "order_id", "amount_minor",
  "currency", "detail"}]}``, oldest first; 404 when there is none.

The status table (``perform``): 201 -> SUCCEEDED; 402 -> DECLINED; 400 and 422 other than the
key rules -> REFUSED; 409 -> ``ProviderBusy``; 422 ``key-reused`` -> ``KeyReused``; 401/403 ->
``ProviderRejectedCredentials``; 429 -> ``ProviderUnavailable`` (not committed); 5xx, a timeout
or a connection lost after sending -> ``ProviderUnavailable`` (may have committed); a connection
never made -> ``ProviderUnavailable`` (not committed); anything else, a 400 for our key header
and a body that does not parse -> ``UnexpectedProviderAnswer``.

Every request has one total timeout (``timeout_s``, the caller's setting; 10 s by default).
Decides nothing (what to retry or park is the consumer's); logs nothing, and no description
carries the key or the credential.
"""

from __future__ import annotations

import json
from enum import StrEnum
from types import TracebackType
from typing import Any, Self

import aiohttp

from shared.payments.provider import (
    KeyReused,
    Lookup,
    LookupStatus,
    Operation,
    PaymentRequest,
    ProviderBusy,
    ProviderRejectedCredentials,
    ProviderResult,
    ProviderUnavailable,
    ResultStatus,
    UnexpectedProviderAnswer,
)

__all__ = [
    "CAPTURES_PATH",
    "DEFAULT_TIMEOUT_S",
    "IDEMPOTENCY_KEY_HEADER",
    "OPERATIONS_PATH",
    "PROBLEM_JSON",
    "REFUNDS_PATH",
    "HttpPaymentProvider",
    "Problem",
    "sf_string",
]

DEFAULT_TIMEOUT_S = 10.0
CAPTURES_PATH = "/v1/captures"
REFUNDS_PATH = "/v1/refunds"
OPERATIONS_PATH = "/v1/operations"
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
PROBLEM_JSON = "application/problem+json"
_PATHS = {Operation.CAPTURE: CAPTURES_PATH, Operation.REFUND: REFUNDS_PATH}
_PROBLEMS = "https://payments.example/problems/"


class Problem(StrEnum):
    """The ``type`` of each problem document the provider answers with."""

    KEY_MISSING = _PROBLEMS + "idempotency-key-missing"  # 400
    KEY_INVALID = _PROBLEMS + "idempotency-key-invalid"  # 400: not an RFC 8941 String
    KEY_REUSED = _PROBLEMS + "idempotency-key-reused"  # 422: the same key, another payload
    KEY_OUTSTANDING = _PROBLEMS + "idempotency-key-outstanding"  # 409: still being processed
    INVALID_REQUEST = _PROBLEMS + "invalid-request"  # 400: the body is wrong
    CARD_DECLINED = _PROBLEMS + "card-declined"  # 402
    REFUND_EXCEEDS_CAPTURED = _PROBLEMS + "refund-exceeds-captured"  # 422
    UNAUTHORIZED = _PROBLEMS + "unauthorized"  # 401
    NOT_FOUND = _PROBLEMS + "not-found"  # 404 (lookup)
    UNAVAILABLE = _PROBLEMS + "unavailable"  # 5xx


_KEY_HEADER_PROBLEMS = {Problem.KEY_MISSING.value, Problem.KEY_INVALID.value}


def sf_string(value: str) -> str:
    """``value`` serialised as an RFC 8941 String (section 4.1.6): printable ASCII in double
    quotes, ``\\`` and ``"`` escaped with a backslash. Raises ValueError for anything else."""
    if any(not 0x20 <= ord(char) <= 0x7E for char in value):
        raise ValueError("an Idempotency-Key must be printable ASCII (RFC 8941 String)")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class HttpPaymentProvider:
    """The provider at ``base_url``, authenticated with ``api_key`` (a Bearer token).

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
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, not {timeout_s}")
        self.base_url = base_url.rstrip("/")
        self.honours_idempotency_keys = honours_idempotency_keys
        self.timeout_s = timeout_s
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
            "POST", _PATHS[request.operation], what, json_body=body, headers=headers, write=True
        )
        problem = answer.get("type") if isinstance(answer, dict) else None
        detail = _detail(answer)
        if status in (200, 201):
            return _succeeded(request, answer, what)
        if status == 402:
            return ProviderResult(
                ResultStatus.DECLINED, request.reference, None, request.amount_minor, detail
            )
        if status == 400 and problem in _KEY_HEADER_PROBLEMS:
            raise UnexpectedProviderAnswer(f"{what}: the provider refused our key header: {detail}")
        if status == 422 and problem == Problem.KEY_REUSED:
            raise KeyReused(f"{what}: the idempotency key came with another payload: {detail}")
        if status in (400, 422):
            return ProviderResult(
                ResultStatus.REFUSED, request.reference, None, request.amount_minor, detail
            )
        if status == 409:
            raise ProviderBusy(f"{what}: being processed: {detail}", retry_after_s=retry_after_s)
        raise _unexpected(status, what, detail)

    async def lookup(self, reference: str) -> Lookup:
        what = f"lookup {reference!r}"
        status, answer, _ = await self._call(
            "GET", OPERATIONS_PATH, what, params={"reference": reference}, write=False
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
        one request; raises what the status table says for a transport failure, 401/403, 429
        and 5xx. ``write``: whether the request may move money (for ``may_have_committed``)."""
        session = self._client()
        try:
            async with session.request(
                method,
                self.base_url + path,
                json=json_body,
                params=params,
                headers={"Authorization": self._authorization, **(headers or {})},
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            ) as response:
                raw = await response.read()
                status = response.status
                retry_after_s = _retry_after(response.headers.get("Retry-After"))
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
        answer = _parse(raw)
        if status in (401, 403):
            raise ProviderRejectedCredentials(f"{what}: HTTP {status}: {_detail(answer)}")
        if status == 429:
            raise ProviderUnavailable(
                f"{what}: throttled (HTTP 429): {_detail(answer)}",
                may_have_committed=False,
                retry_after_s=retry_after_s,
            )
        if status >= 500:
            raise ProviderUnavailable(
                f"{what}: HTTP {status}: {_detail(answer)}; the outcome is unknown",
                may_have_committed=write,
                retry_after_s=retry_after_s,
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
