"""The Functions host's HTTP trigger in front of Microsoft's worker
(``local.standins.worker.FunctionsWorker`` over ``azure_functions_runtime``): an aiohttp server on
127.0.0.1 and a free port that serves the app's HTTP-triggered functions, one invocation request
per HTTP request, as ``local.standins.host`` serves the Service Bus triggers.

It keeps only the host's side, each step from the host's source (Azure/azure-functions-host src/,
read at commit 89dc438d, and the HTTP extension, Azure/azure-webjobs-sdk-extensions
src/WebJobs.Extensions.Http/):
- routes: each ``httpTrigger`` binding the worker reported (``route``, ``methods``, ``authLevel``)
  under the route prefix, ``api`` unless host.json's ``extensions.http.routePrefix`` says otherwise
  ("" for none) (WebScriptHostHttpRoutesManager.cs ``InitializeHttpFunctionRoutes``, an empty route
  being the function's name; HttpOptions.cs ``RoutePrefix``; Learn, "Azure Functions HTTP triggers
  and bindings", host.json settings). Routes are tried in the extension's order of specificity
  (Routing/WebJobsRouteBuilder.cs ``RouteComparison``: a literal segment before a parameter, more
  inline constraints first, literals in ordinal order ignoring case, the longer template first).
  A template is ASP.NET Core's: literal segments (matched ignoring case), ``{name}``, ``{name?}``
  (last), ``{*name}`` (last), and the inline constraints ``alpha``, ``int``, ``long``, ``bool``,
  ``guid``, ``min(n)``, ``max(n)``, ``length(n)``, ``minlength(n)``, ``maxlength(n)``; one trailing
  slash is ignored. ``methods`` is a route constraint (``HttpMethodRouteConstraint``): a request
  with another method matches no route, and like a path nothing matches it is answered 404, never
  405; no ``methods`` is every method.
- the path routed: ``HttpRequest.Path`` as Kestrel makes it of the request target (aiohttp's own
  router takes every path, a decoded newline included, and never answers for one). Kestrel
  percent-decodes the path but ``%2F``; a sequence that is not UTF-8 (an overlong form, a
  surrogate, a bad continuation octet) is kept as sent, and an encoded NUL rejects the request
  target (dotnet/aspnetcore src/Shared/UrlDecoder/UrlDecoder.cs ``DecodeInPlace``, ``DecodeCore``:
  "The path contains null characters.", ``SkipUnescape``); then it removes dot segments
  (src/Servers/Kestrel/Core/src/Internal/Http/PathDecoder.cs ``DecodePath``, PathNormalizer.cs
  ``RemoveDotSegments``; RFC 3986, 5.2.4). A rejected target is answered 400 and the connection
  closed, before any routing (Http1Connection.cs ``ParseTarget``: ``ThrowRequestTargetRejected``,
  a ``BadHttpRequestException``). The host routes with ASP.NET Core's ``Route``
  (WebJobs.Extensions.Http Routing/WebJobsRouteBuilder.cs ``MapFunctionRoute``), whose template
  matcher splits that path at "/" and takes a segment as the route value, decoding nothing more
  ("Routing doesn't do any decoding": aspnet/Mvc#6388). So a segment holding a newline or a
  backslash is a route value like any other, handed to the function, and ``%2F`` stays ``%2F``.
- keys: a function of ``authLevel`` function or admin takes its key from the ``x-functions-key``
  header, else from the ``code`` query parameter, named in any case (the header wins even when
  empty: it is then no key); the master key grants admin, a host key or one of this function's
  keys grants function, anything else nothing, and a request short of the level is answered 401
  with no body and no invocation (WebHost/Security/Authentication/Keys/
  AuthenticationLevelHandler.cs ``GetAuthorizationKeyInfoAsync``; WebHost/Security/KeyManagement/
  SecretManager.cs ``GetAuthorizationLevelAsync``; WebHost/Security/Authorization/AuthUtility.cs
  ``PrincipalHasAuthLevelClaim``; WebHost/Middleware/FunctionInvocationMiddleware.cs
  ``GetResultAsync``: route, then authorization, then the invocation). Anonymous passes. The keys
  are this host's own (``HostKeys``), given to it as the real host reads its own secrets.
- the request, as ``RpcHttp`` typed data for the trigger binding, shaped by what the worker declared
  at init (Grpc/MessageExtensions/GrpcMessageConversionExtensions.cs ``ToRpcHttp``): the runtime
  declares ``RpcHttpBodyOnly`` and ``RawHttpBodyBytes``, so ``body`` is the request's bytes and no
  ``rawBody`` is sent (``PopulateBody``), and only when ``Content-Length`` is above zero: a chunked
  body without one reaches the function as ``b""``, as the host's code reads (whether Azure's front
  ends add a ``Content-Length`` before the host is not known here); ``url`` is scheme, host, path
  and query string; ``headers`` by lower-cased name, a repeated header's values joined with ",";
  ``query`` by name ignoring case (ASP.NET Core's ``QueryCollection``, the first spelling kept),
  values joined the same way, a parameter with an empty value left out; ``params`` the route values
  (an optional one that is absent left out). No trigger metadata: the runtime declares
  ``RpcHttpTriggerMetadataRemoved`` (Grpc/Extensions/ScriptInvocationContextExtensions.cs
  ``ShouldSkipBindingData``) and its ``HttpRequestConverter`` reads none (azure/functions/http.py).
  The invocation continues the caller's W3C ``traceparent`` (a new span of its trace) or starts a
  trace.
- the answer: the HTTP output binding's value (``$return``: ``InvocationResponse.return_value``, or
  a named one in ``output_data``) as the host's ``RawScriptResult`` writes it
  (Script/Binding/Http/HttpBinding.cs ``CreateResult``/``ParseResponseObject``,
  Script/Binding/Http/RawScriptResult.cs, Grpc/MessageExtensions/GrpcMessageExtensionUtilities.cs
  ``ConvertFromHttpMessageToExpando``): the status code (200 unless it parses as an integer), the
  ``content-type`` header as the content type and every other header as given, each cookie as a
  ``Set-Cookie``, and the body's bytes (``application/octet-stream`` when no content type was
  given); a ``str`` as ``text/plain; charset=utf-8``; no value 200 with no body
  (``OkResult``). A failed invocation is answered 500 with no body
  (WebHost/Middleware/ExceptionMiddleware.cs) and logged with the worker's error, quoted.
- the request size: 100 MB (104,857,600 bytes), Learn's limit ("Azure Functions HTTP trigger",
  Limits); past it aiohttp answers 413 (the status the host answers there is not checked).
- a header Kestrel cannot decode: Kestrel reads a request header value as ASCII, else as UTF-8
  with ``throwOnInvalidBytes: true`` (the default ``RequestHeaderEncodingSelector``, "null to use
  the default UTF8Encoding": KestrelServerOptions.cs; Internal/Infrastructure/HttpUtilities.cs
  ``GetRequestHeaderString`` and UTF8EncodingSealed.cs; src/Shared/ServerInfrastructure/
  StringUtilities.cs ``GetAsciiOrUTF8String``, which turns the decoder's error into an
  ``InvalidOperationException``), and a header name as ASCII only (``GetHeaderName``:
  ``InvalidCharactersInHeaderName``); Http1Connection.cs answers either while parsing headers as
  400 "Malformed request: invalid headers" with no body and closes the connection, before any
  routing or invocation. So a value in UTF-8 reaches the function decoded ("café"), and one
  whose bytes are not UTF-8 (a Latin-1 "caf\xe9") is 400 here too, the connection closed
  (aiohttp decodes both with ``surrogateescape``, which the worker's protobuf cannot encode:
  it used to be a 500).

Answers lost on the way back (``AnswerFault``, the tests' and the demo's, off unless added): the
function ran to its end (whatever it committed stays committed) and its client never reads its
answer, as happens between a client and Azure: the connection reset after the invocation
(``LostAnswer.DISCONNECT``: the client reads no response, aiohttp's
``ServerDisconnectedError``); the answer held past the client's own timeout
(``LostAnswer.HOLD``: aiohttp's ``ClientTimeout``), then written to a connection nobody reads;
a front door's 504 in its place (``LostAnswer.GATEWAY_TIMEOUT``): Azure Front Door answers
504 "OriginTimeout" when the origin is slower than its origin response timeout, 30 s by
default, while the origin goes on (learn.microsoft.com/azure/frontdoor/troubleshoot-issues,
"504 response from Azure Front Door"), and "230 seconds is the maximum amount of time that an
HTTP triggered function can take to respond to a request ... because of the default idle
timeout of Azure Load Balancer" while the function's own timeout is 30 minutes on Flex
Consumption (Learn's "Function app timeout duration": MicrosoftDocs/azure-docs
includes/functions-timeout-duration.md). The host records what it would have answered
(``LocalHttpHost.lost``), so a test can hold a retry's answer to it. A client never retries a
POST on its own (aiohttp retries a reset connection for ``IDEMPOTENT_METHODS`` only,
aiohttp/client.py; RFC 9110, section 9.2.2): retrying one is the client's choice, which the
Idempotency-Key makes safe.

Not reproduced: HTTP streaming (the runtime's ``HttpUri`` capability, with the FastAPI extension:
refused at start), proxies, CORS, host.json's ``customHeaders``, ``hsts``, ``maxConcurrentRequests``
and ``maxOutstandingRequests`` (the throttle's 429), the 230 s response timeout and the host's
function timeout, Easy Auth (no ``x-ms-client-principal*`` header is read, no identity sent), the
admin and system keys' own routes (``/admin/...``, ``/runtime/webhooks/...``) and system keys, a
disabled function, the URL length limit, the host's own response headers (``Server: Kestrel``,
``Request-Context``), content negotiation (the runtime never asks for it), a ``str`` return that
parses as JSON (the host would re-serialise it, and read it as a response object when it has a
``body``), a request target with a raw byte that is not ASCII or is a control byte (aiohttp's
parser answers it 400 itself, with a text body, before this host sees the request; Kestrel
rejects a target that is not ASCII as 400 with no body, ``GetAsciiStringNonNullCharacters``; its
answer to a raw control byte is not checked here), and route templates beyond those listed
(defaults ``{name=value}``, ``regex``, several parameters in one segment: refused at start). A
response the Python worker cannot build (an ``RpcHttp`` without a body, a ``json`` body) is
answered 500 and logged as not modelled.

It must never do the worker's part: no decoding into ``func.HttpRequest``, no calling of the
function; and never let the request steer anything but the one invocation it asks for: its values
are data handed to the worker, quoted in logs.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import hmac
import json
import logging
import re
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from local.standins.worker import (
    FunctionsWorker,
    HttpRequestData,
    HttpResponseData,
    IndexedFunction,
    InvocationResult,
    TypedOutput,
    new_trace_parent,
)

HTTP_TRIGGER = "httpTrigger"
DEFAULT_ROUTE_PREFIX = "api"  # WebJobs.Extensions.Http HttpExtensionConstants.DefaultRoutePrefix
FUNCTIONS_KEY_HEADER = "x-functions-key"  # AuthenticationLevelHandler.FunctionsKeyHeaderName
FUNCTIONS_KEY_QUERY = "code"  # AuthenticationLevelHandler.FunctionsKeyQueryParamName
MAX_REQUEST_BYTES = 104_857_600  # Learn, "Azure Functions HTTP trigger", Limits
RETURN = "$return"
# The capabilities whose request shape this host builds (GrpcMessageConversionExtensions.cs
# ``IsBodyOnlySupported``, ``IsRawBodyBytesRequested``), and the one it does not model.
_BODY_ONLY = "RpcHttpBodyOnly"
_RAW_BODY_BYTES = "RawHttpBodyBytes"
_HTTP_URI = "HttpUri"
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
logger = logging.getLogger("local.standins.http_host")


class AuthLevel(enum.Enum):
    """A function's ``authLevel``, and what a key grants (the master key admin, which passes
    every level; a host or function key function; anything else nothing)."""

    ANONYMOUS = "anonymous"
    FUNCTION = "function"
    ADMIN = "admin"

    @classmethod
    def of_binding(cls, value: object) -> AuthLevel:
        """The raw binding's ``authLevel`` ("FUNCTION", "anonymous" ...); absent, function
        (``FunctionApp``'s ``http_auth_level`` default, azure/functions/decorators/
        function_app.py). A level this host does not model (system) is refused."""
        if value is None:
            return cls.FUNCTION
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"authLevel {value!r} is not reproduced") from None


@dataclass(frozen=True)
class HostKeys:
    """The host's secrets: the master key (admin), the host keys (function level for every
    function), and each function's own keys, by name."""

    master: str
    host: Mapping[str, str] = field(default_factory=dict)
    functions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def generate(cls) -> HostKeys:
        """New random keys: a master key and one host key, ``default``."""
        return cls(master=secrets.token_urlsafe(32), host={"default": secrets.token_urlsafe(32)})

    @property
    def default(self) -> str:
        """The host key ``default``: the one a caller of any function-level function uses."""
        return self.host["default"]

    def level(self, key: str, function: str) -> AuthLevel:
        """What ``key`` grants on ``function`` (SecretManager.cs ``GetAuthorizationLevelAsync``:
        the master key, then the host keys, then the function's own; compared in constant
        time)."""
        if _same(key, self.master):
            return AuthLevel.ADMIN
        own = self.functions.get(function, {})
        if any(_same(key, value) for value in (*self.host.values(), *own.values())):
            return AuthLevel.FUNCTION
        return AuthLevel.ANONYMOUS


def _same(presented: str, secret: str) -> bool:
    return bool(secret) and hmac.compare_digest(presented.encode(), secret.encode())


def _is_int(value: str, bits: int) -> bool:
    """``int``/``long``: .NET's ``TryParse`` with ``NumberStyles.Integer`` and the invariant
    culture (ASCII digits, a sign, white space around), in range."""
    if re.fullmatch(r"\s*[+-]?[0-9]+\s*", value) is None:
        return False
    limit: int = 2 ** (bits - 1)
    return -limit <= int(value) < limit


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@functools.cache
def _constraint(text: str) -> Callable[[str], bool]:
    """The test of one inline constraint (ASP.NET Core routing's names); ValueError for one this
    host does not reproduce."""
    match = re.fullmatch(r"(\w+)(?:\((.*)\))?", text)
    if match is None:
        raise ValueError(f"route constraint {text!r} is not reproduced")
    name, argument = match.group(1).lower(), match.group(2)
    simple: dict[str, Callable[[str], bool]] = {
        "alpha": lambda v: re.fullmatch(r"[A-Za-z]+", v) is not None,
        "int": lambda v: _is_int(v, 32),
        "long": lambda v: _is_int(v, 64),
        "bool": lambda v: v.lower() in {"true", "false"},
        "guid": _is_guid,
    }
    if name in simple and argument is None:
        return simple[name]
    if argument is not None and re.fullmatch(r"-?\d+", argument):
        n = int(argument)
        bounded: dict[str, Callable[[str], bool]] = {
            "min": lambda v: _is_int(v, 64) and int(v) >= n,
            "max": lambda v: _is_int(v, 64) and int(v) <= n,
            "length": lambda v: len(v) == n,
            "minlength": lambda v: len(v) >= n,
            "maxlength": lambda v: len(v) <= n,
        }
        if name in bounded:
            return bounded[name]
    raise ValueError(f"route constraint {text!r} is not reproduced")


@dataclass(frozen=True)
class _Segment:
    literal: str | None  # a literal segment; None for a parameter
    name: str = ""
    optional: bool = False
    catch_all: bool = False
    constraints: tuple[str, ...] = ()

    def accepts(self, value: str) -> bool:
        return all(_constraint(c)(value) for c in self.constraints)


_PARAMETER = re.compile(r"^\{(\*{1,2})?([A-Za-z_][\w.-]*)((?::[^:{}?]+)*)(\?)?\}$")


def parse_template(template: str) -> tuple[_Segment, ...]:
    """An ASP.NET Core route template's segments; ValueError for what is not reproduced."""
    segments: list[_Segment] = []
    parts = template.strip("/").split("/") if template.strip("/") else []
    for index, part in enumerate(parts):
        if "{" not in part and "}" not in part:
            if not part:
                raise ValueError(f"route {template!r} has an empty segment")
            segments.append(_Segment(literal=part))
            continue
        match = _PARAMETER.match(part)
        if match is None:
            raise ValueError(f"route segment {part!r} of {template!r} is not reproduced")
        catch_all, name, constraints, optional = match.groups()
        last = index == len(parts) - 1
        if (catch_all or optional) and not last:
            raise ValueError(f"route {template!r}: {part!r} must be the last segment")
        names = tuple(c for c in constraints.split(":") if c)
        for constraint in names:
            _constraint(constraint)  # refuse at start what would not be checked
        segments.append(
            _Segment(
                literal=None,
                name=name,
                optional=bool(optional),
                catch_all=bool(catch_all),
                constraints=names,
            )
        )
    return tuple(segments)


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP-triggered function as the host maps it."""

    function: IndexedFunction
    template: str  # with the route prefix
    segments: tuple[_Segment, ...]
    methods: frozenset[str] | None  # None: every method
    auth_level: AuthLevel
    trigger_name: str
    output_name: str | None  # the ``http`` output binding (``$return`` by default)

    @classmethod
    def of(cls, function: IndexedFunction, route_prefix: str) -> HttpRoute:
        trigger = function.trigger
        route = str(trigger.get("route") or function.name)
        template = f"{route_prefix}/{route}" if route_prefix else route
        methods = trigger.get("methods")
        outputs = [
            b
            for b in function.bindings
            if b.get("type") == "http" and str(b.get("direction", "")).upper() == "OUT"
        ]
        return cls(
            function=function,
            template=template,
            segments=parse_template(template),
            methods=frozenset(str(m).upper() for m in methods) if methods else None,
            auth_level=AuthLevel.of_binding(trigger.get("authLevel")),
            trigger_name=str(trigger["name"]),
            output_name=str(outputs[0]["name"]) if outputs else None,
        )

    def match(self, parts: list[str], method: str) -> dict[str, str] | None:
        """The route values when ``parts`` (the segments of the path as Kestrel decoded it) and
        ``method`` match."""
        if self.methods is not None and method.upper() not in self.methods:
            return None
        values: dict[str, str] = {}
        for index, segment in enumerate(self.segments):
            if segment.catch_all:
                rest = "/".join(parts[index:])
                if rest:
                    if not segment.accepts(rest):
                        return None
                    values[segment.name] = rest
                return values
            if index >= len(parts):
                return values if segment.optional else None
            value = parts[index]
            if segment.literal is not None:
                if value.casefold() != segment.literal.casefold():
                    return None
                continue
            if not value or not segment.accepts(value):
                return None
            values[segment.name] = value
        return values if len(parts) == len(self.segments) else None


def _route_order(x: HttpRoute, y: HttpRoute) -> int:
    """WebJobsRouteBuilder.cs ``RouteComparison``, segment by segment."""
    for index, xs in enumerate(x.segments):
        if len(y.segments) <= index:
            return -1
        ys = y.segments[index]
        if xs.literal is not None and ys.literal is None:
            return -1
        if xs.literal is None and ys.literal is not None:
            return 1
        if xs.literal is None:
            if len(xs.constraints) != len(ys.constraints):
                return -1 if len(xs.constraints) > len(ys.constraints) else 1
        else:
            assert ys.literal is not None
            a, b = xs.literal.upper(), ys.literal.upper()
            if a != b:
                return -1 if a < b else 1
    return 1 if len(y.segments) > len(x.segments) else 0


def route_prefix_of(host_json: Path) -> str:
    """host.json's ``extensions.http.routePrefix``, else ``api`` (also without a host.json)."""
    if not host_json.exists():
        return DEFAULT_ROUTE_PREFIX
    settings = json.loads(host_json.read_text())
    prefix = settings.get("extensions", {}).get("http", {}).get("routePrefix")
    return DEFAULT_ROUTE_PREFIX if prefix is None else str(prefix).strip("/")


@dataclass
class HttpHostStats:
    requests: int = 0
    in_flight: int = 0  # requests whose answer is not yet written (a held one included)
    malformed: int = 0  # 400: a header or a path Kestrel rejects (the module docstring)
    not_found: int = 0
    unauthorized: int = 0
    invocations: int = 0
    failed_invocations: int = 0
    errors: list[str] = field(default_factory=list)  # the worker's messages of failed ones
    last: InvocationResult | None = None


class LostAnswer(enum.Enum):
    """How an answer is lost after the invocation (the module docstring)."""

    DISCONNECT = "disconnect"
    HOLD = "hold"
    GATEWAY_TIMEOUT = "gateway timeout"


@dataclass
class AnswerFault:
    """Lose the answer of the next ``times`` requests that ``matches`` (None: every one), after
    their invocation succeeded; ``hold_s``: how long a ``HOLD`` keeps it."""

    kind: LostAnswer
    matches: Callable[[web.Request], bool] = lambda _request: True
    times: int | None = 1
    hold_s: float = 0.0
    fired: int = 0

    def takes(self, request: web.Request) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if not self.matches(request):
            return False
        self.fired += 1
        return True


@dataclass(frozen=True)
class LostResponse:
    """An answer the client never read: what the host would have written."""

    kind: LostAnswer
    function: str
    request_headers: Mapping[str, str]
    status: int
    headers: Mapping[str, str]
    body: bytes


class NotModelled(Exception):
    """An answer of the worker this host does not know how to write (see the docstring)."""


class LocalHttpHost:
    """The host's HTTP trigger for every HTTP-triggered function of a started worker:
    ``async with LocalHttpHost(worker, keys=...) as http: ... http.url``."""

    def __init__(
        self,
        worker: FunctionsWorker,
        *,
        keys: HostKeys | None = None,
        route_prefix: str | None = None,
        host_json: Path | None = None,
    ) -> None:
        if worker.capabilities.get(_HTTP_URI):
            raise NotImplementedError("the worker streams HTTP (HttpUri): not reproduced here")
        missing = [c for c in (_BODY_ONLY, _RAW_BODY_BYTES) if not worker.capabilities.get(c)]
        if missing:
            raise NotImplementedError(
                f"the worker does not declare {missing}: the request shape the host then sends "
                "(body and rawBody by content type) is not reproduced here"
            )
        self.worker = worker
        self.keys = keys or HostKeys.generate()
        self.route_prefix = (
            route_prefix.strip("/")
            if route_prefix is not None
            else route_prefix_of(host_json or worker.app_directory / "host.json")
        )
        routes = [
            HttpRoute.of(function, self.route_prefix)
            for function in worker.functions.values()
            if function.trigger["type"] == HTTP_TRIGGER
        ]
        self.routes = sorted(routes, key=functools.cmp_to_key(_route_order))
        self.stats = HttpHostStats()
        self.answer_faults: list[AnswerFault] = []
        self.lost: list[LostResponse] = []  # what ``answer_faults`` kept from their clients
        self._idle = asyncio.Event()
        self._idle.set()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """The host's origin, ``http://127.0.0.1:<port>`` (routes are under the prefix)."""
        if self._port is None:
            raise RuntimeError("the HTTP host is not started")
        return f"http://127.0.0.1:{self._port}"

    def function_url(self, path: str) -> str:
        """``path`` (a route, e.g. ``orders/ord-1``) under the host's route prefix."""
        prefix = f"/{self.route_prefix}" if self.route_prefix else ""
        return f"{self.url}{prefix}/{path.lstrip('/')}"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        # Every path, a decoded newline included (".*" stops at one, and aiohttp answered its own
        # 404): what Kestrel routes or refuses is this host's to say.
        app.router.add_route("*", r"/{path:[\s\S]*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            self._port = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _route(self, path: str, request: web.Request) -> tuple[HttpRoute, dict[str, str]] | None:
        path = path.strip("/")
        parts = path.split("/") if path else []
        for route in self.routes:
            values = route.match(parts, request.method)
            if values is not None:
                return route, values
        return None

    def _authorized(self, request: web.Request, route: HttpRoute) -> bool:
        if route.auth_level is AuthLevel.ANONYMOUS:
            return True
        # The header wins when present, even empty (AuthenticationLevelHandler.cs).
        if FUNCTIONS_KEY_HEADER in request.headers:
            key = request.headers.getall(FUNCTIONS_KEY_HEADER)[0]
        else:
            query = _query(request)
            key = next((v[0] for n, v in query.items() if n.casefold() == FUNCTIONS_KEY_QUERY), "")
        granted = self.keys.level(key, route.function.name) if key else AuthLevel.ANONYMOUS
        return granted is AuthLevel.ADMIN or granted is route.auth_level

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        self.stats.in_flight += 1
        self._idle.clear()
        try:
            return await self._answer(request)
        finally:
            self.stats.in_flight -= 1
            if not self.stats.in_flight:
                self._idle.set()

    async def until_idle(self) -> None:
        """Until every request taken has its answer written (or lost): a held answer, a slow
        invocation its client gave up on."""
        await self._idle.wait()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        path = kestrel_path(request.rel_url.raw_path)
        if path is None or not _kestrel_decodes(request.raw_headers):
            self.stats.malformed += 1
            refused = web.Response(status=400)
            refused.force_close()  # Kestrel ends the connection after a bad request
            return refused
        found = self._route(path, request)
        if found is None:
            self.stats.not_found += 1
            return web.Response(status=404)
        route, values = found
        if not self._authorized(request, route):
            self.stats.unauthorized += 1
            return web.Response(status=401)
        trigger = await _request_data(request, values)
        trace_parent, trace_state = _trace_context(request)
        name = route.function.name
        self.stats.invocations += 1
        result = await self.worker.invoke(
            name, {route.trigger_name: trigger}, trace_parent=trace_parent, trace_state=trace_state
        )
        self.stats.last = result
        if not result.succeeded:
            self.stats.failed_invocations += 1
            self.stats.errors.append(str(result.error))
            logger.error(
                "Executed 'Functions.%s' (Failed, Id=%s): %r",
                name,
                result.invocation_id,
                result.error,
            )
            return web.Response(status=500)
        answer = _output(result, route.output_name)
        try:
            response = _response(answer)
        except NotModelled as error:
            logger.error("Functions.%s answered what is not modelled: %s", name, error)
            return web.Response(status=500)
        fault = next((f for f in self.answer_faults if f.takes(request)), None)
        return response if fault is None else await self._lose(fault, request, name, response)

    async def _lose(
        self, fault: AnswerFault, request: web.Request, function: str, response: web.Response
    ) -> web.StreamResponse:
        """The answer, lost as ``fault`` says (the module docstring); recorded in ``lost``."""
        body = response.body if isinstance(response.body, bytes) else b""
        self.lost.append(
            LostResponse(
                fault.kind,
                function,
                dict(request.headers),
                response.status,
                dict(response.headers),
                body,
            )
        )
        if fault.kind is LostAnswer.DISCONNECT:
            if request.transport is not None:
                request.transport.abort()
        elif fault.kind is LostAnswer.HOLD:
            await asyncio.sleep(fault.hold_s)
        else:
            gateway = web.Response(status=504)  # the front door's own answer, no body here
            gateway.force_close()
            return gateway
        return response


def kestrel_path(raw_path: str) -> str | None:
    """``HttpRequest.Path`` as Kestrel makes it of a request target's raw path, None where it
    rejects the target (the module docstring; its sources there)."""
    if not raw_path.isascii() or "\x00" in raw_path:
        return None  # Http1Connection.cs reads the target with GetAsciiStringNonNullCharacters
    raw = raw_path.encode("ascii")
    decoded = bytearray()
    index = 0
    while index < len(raw):
        if raw[index] != 0x25:  # "%"
            decoded.append(raw[index])
            index += 1
            continue
        octets, end = _utf8_escape(raw, index)
        if octets == b"\x00":
            return None
        decoded += octets if octets is not None else raw[index:end]
        index = end
    return _without_dot_segments(decoded.decode())  # only whole UTF-8 characters were decoded


def _escaped_octet(raw: bytes, index: int) -> int | None:
    """The octet ``%XX`` at ``index`` escapes; None when it is no escape or is ``%2F``."""
    digits = raw[index + 1 : index + 3]
    if raw[index : index + 1] != b"%" or re.fullmatch(rb"[0-9A-Fa-f]{2}", digits) is None:
        return None
    octet = int(digits, 16)
    return None if octet == 0x2F else octet


# UTF-8 lead octets as UrlDecoder.cs ``DecodeCore`` reads them: (mask, lead, octets, the
# lead's own bits, the smallest code point the form may hold).
_UTF8_LEADS = (
    (0xE0, 0xC0, 2, 0x1F, 0x80),
    (0xF0, 0xE0, 3, 0x0F, 0x800),
    (0xF8, 0xF0, 4, 0x07, 0x10000),
)


def _utf8_escape(raw: bytes, index: int) -> tuple[bytes | None, int]:
    """UrlDecoder.cs ``DecodeCore`` at the "%" at ``index``: the octets of the one UTF-8
    character escaped there and the index after them; else None and the index after what it
    read, which is kept as sent."""
    first = _escaped_octet(raw, index)
    if first is None:
        return None, index + 1
    if first < 0x80:
        return bytes([first]), index + 3
    lead = next((form for form in _UTF8_LEADS if first & form[0] == form[1]), None)
    if lead is None:
        return None, index + 3  # not a lead octet
    _, _, count, bits, smallest = lead
    code = first & bits
    octets = [first]
    end = index + 3
    for left in range(count - 2, -1, -1):  # continuation octets still to read after this one
        following = _escaped_octet(raw, end)
        if following is None or following & 0xC0 != 0x80:
            return None, end
        code = code << 6 | following & 0x3F
        if (left == 1 and 0x360 <= code <= 0x37F) or (left == 2 and code >= 0x110):
            return None, end  # a surrogate, or past U+10FFFF
        octets.append(following)
        end += 3
    return (bytes(octets) if code >= smallest else None), end  # an overlong form is kept


def _without_dot_segments(path: str) -> str:
    """RFC 3986, 5.2.4, as Kestrel's PathNormalizer.cs ``RemoveDotSegments``, for a path that
    starts with "/"."""
    kept: list[str] = []
    segments = path.split("/")[1:]
    for position, segment in enumerate(segments, start=1):
        last = position == len(segments)
        if segment in {".", ".."}:
            if segment == ".." and kept:
                kept.pop()
            if last:
                kept.append("")
            continue
        kept.append(segment)
    return "/" + "/".join(kept)


def _kestrel_decodes(raw_headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether Kestrel reads every header: its name ASCII, its value ASCII or UTF-8 (the module
    docstring; its sources there)."""
    for name, value in raw_headers:
        if not name.isascii():
            return False
        try:
            value.decode("utf-8")  # strict, as UTF8EncodingSealed's throwOnInvalidBytes
        except UnicodeDecodeError:
            return False
    return True


async def _request_data(request: web.Request, route_values: Mapping[str, str]) -> HttpRequestData:
    """GrpcMessageConversionExtensions.cs ``ToRpcHttp`` for a worker that declares
    ``RpcHttpBodyOnly`` and ``RawHttpBodyBytes``."""
    headers = {name.lower(): ",".join(request.headers.getall(name)) for name in request.headers}
    query = {}
    for name, values in _query(request).items():
        if value := ",".join(values):
            query[name] = value
    length = request.content_length
    body = await request.read() if length is not None and length > 0 else None
    return HttpRequestData(
        method=request.method,
        url=f"{request.scheme}://{request.host}{request.rel_url.raw_path_qs}",
        headers=headers,
        query=query,
        params=dict(route_values),
        body=body,
    )


def _query(request: web.Request) -> dict[str, list[str]]:
    """The query string as ASP.NET Core's ``QueryCollection`` holds it: names compared ignoring
    case (the first spelling kept), a repeated name's values in order."""
    merged: dict[str, list[str]] = {}
    spelling: dict[str, str] = {}
    for name, value in request.query.items():
        merged.setdefault(spelling.setdefault(name.casefold(), name), []).append(value)
    return merged


def _trace_context(request: web.Request) -> tuple[str, str]:
    """The invocation's context: a new span of the caller's trace (W3C Trace Context, as ASP.NET
    Core's hosting activity continues it), else a new trace."""
    match = _TRACEPARENT.match(request.headers.get("traceparent", ""))
    if match is None:
        return new_trace_parent(), ""
    trace_id, _, flags = match.groups()
    return f"00-{trace_id}-{secrets.token_hex(8)}-{flags}", request.headers.get("tracestate", "")


def _output(result: InvocationResult, output_name: str | None) -> TypedOutput:
    if output_name is None:
        return None
    if output_name == RETURN:
        return result.return_value
    return result.outputs.get(output_name)


def _response(answer: TypedOutput) -> web.Response:
    """RawScriptResult.cs ``ExecuteResultAsync`` for what the Python worker answers."""
    if answer is None:
        return web.Response(status=200)
    if isinstance(answer, str):
        return web.Response(
            status=200, body=answer.encode(), headers={"Content-Type": "text/plain; charset=utf-8"}
        )
    if not isinstance(answer, HttpResponseData):
        raise NotModelled(f"an HTTP output of {type(answer).__name__}")
    if answer.enable_content_negotiation:
        raise NotModelled("content negotiation")
    status = int(answer.status_code) if re.fullmatch(r"[+-]?\d+", answer.status_code) else 200
    response = web.Response(status=status)
    content_type: str | None = None
    for name, value in answer.headers.items():
        if name.lower() == "content-type":
            content_type = value
        elif name not in response.headers:
            response.headers[name] = value
    body = answer.body
    if isinstance(body, bytes):
        response.body = body
        response.headers["Content-Type"] = content_type or "application/octet-stream"
    elif isinstance(body, str):
        response.body = body.encode()
        response.headers["Content-Type"] = content_type or "text/plain; charset=utf-8"
    else:
        raise NotModelled(f"an RpcHttp body of {type(body).__name__}")
    for cookie in answer.cookies:
        _set_cookie(response, cookie)
    return response


def _set_cookie(response: web.Response, cookie: Any) -> None:
    """GrpcMessageExtensionUtilities.cs ``RpcHttpCookieConverter``: each attribute that is set."""
    same_site = {1: "Lax", 2: "Strict", 3: "None"}.get(int(cookie.same_site))
    response.set_cookie(
        cookie.name,
        cookie.value,
        domain=cookie.domain.value if cookie.HasField("domain") else None,
        path=cookie.path.value if cookie.HasField("path") else "/",
        expires=(
            cookie.expires.value.ToDatetime().strftime("%a, %d %b %Y %H:%M:%S GMT")
            if cookie.HasField("expires")
            else None
        ),
        secure=cookie.secure.value if cookie.HasField("secure") else None,
        httponly=cookie.http_only.value if cookie.HasField("http_only") else None,
        samesite=same_site,
        max_age=int(cookie.max_age.value) if cookie.HasField("max_age") else None,
    )
