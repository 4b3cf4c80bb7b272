"""Microsoft's Python worker (``azure_functions_runtime``) in this process, driven as the Functions
host drives it: worker init with the app directory, functions metadata, one function load per
function, then one invocation request per call.

Owns the host's side of that conversation: the protobuf module the host supplies (generated from
``local/standins/protos/function_rpc.proto`` by ``make install``), the request messages, and reading
the responses: the status, and an invocation's return value and output bindings decoded from their
typed data (an HTTP function's ``$return`` is an ``RpcHttp``: ``HttpResponseData``), and the
capabilities the worker declared at init. It must never do the worker's part: no indexing of the
app, no decoding of binding data, no parameter binding, no calling of a user function. The runtime
does all of that, and refuses what the real worker refuses.

One worker runs in a process in Azure; here several start one after another (a test each). Each
start therefore does what a new worker process would find: the app's script module imported
afresh and kept out of this process's ``sys.modules`` (``FunctionApp.get_functions()`` may run
once per app object), and the runtime's process-wide OpenTelemetry switch as a new process has it
(off until ``PYTHON_ENABLE_OPENTELEMETRY`` turns it on at init). The runtime reads its settings
(``PYTHON_*``) from ``os.environ``, as the worker process does.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import secrets
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import azure_functions_runtime  # type: ignore[import-untyped]
from azure_functions_runtime import otel as runtime_otel

from local.standins.host_binding import ModelBindingData

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO = Path(__file__).resolve().parent / "protos" / "function_rpc.proto"
_GENERATED = PROTO.with_name("function_rpc_pb2.py")
_SCRIPT_FILE = "function_app.py"  # PYTHON_SCRIPT_FILE_NAME's default; this app uses it


class WorkerProtocolMissing(RuntimeError):
    """The generated protobuf module is absent or older than its .proto."""


class WorkerStartError(RuntimeError):
    """The worker refused the app at init, metadata or load; the message is the worker's own."""


def load_protos() -> ModuleType:
    """The protobuf module the host hands the worker (``properties["protos"]``)."""
    if not _GENERATED.exists() or _GENERATED.stat().st_mtime < PROTO.stat().st_mtime:
        raise WorkerProtocolMissing(
            f"{_GENERATED.relative_to(REPO_ROOT)} is missing or older than {PROTO.name}: "
            "run `make install` (it compiles the .proto with grpcio-tools)"
        )
    return importlib.import_module("local.standins.protos.function_rpc_pb2")


@dataclass(frozen=True)
class Json:
    """Typed data ``json``: how the host sends a Cosmos DB trigger's document list or a property
    bag (``ApplicationProperties``)."""

    value: Any


@dataclass(frozen=True)
class HttpRequestData:
    """Typed data ``http`` as the host sends an HTTP trigger's request (``RpcHttp``): the fields
    the runtime reads (azure_functions_runtime/bindings/datumdef.py ``Datum.from_typed_data``).
    ``body`` None: no body field at all (the runtime then binds ``b""``)."""

    method: str
    url: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    params: Mapping[str, str]
    body: bytes | None = None


@dataclass(frozen=True)
class HttpResponseData:
    """An ``RpcHttp`` the worker answered (an HTTP output binding, ``$return`` or named), as the
    runtime builds it (datumdef.py ``datum_as_proto``): ``status_code`` a string ("" when unset),
    ``body`` decoded as any typed data (bytes from ``func.HttpResponse``), ``cookies`` the raw
    ``RpcHttpCookie`` messages (the worker moves ``Set-Cookie`` headers there)."""

    status_code: str
    headers: Mapping[str, str]
    body: TypedOutput
    cookies: tuple[Any, ...] = ()
    enable_content_negotiation: bool = False


# What the host puts in a ``TypedData``. Numbers and dates travel as ``json`` (the host serialises
# every value that is not a string, bytes or an SDK binding as JSON; the runtime cannot even read
# an ``int`` field: ``Datum.from_typed_data`` raises on it).
type TypedValue = str | bytes | Json | ModelBindingData | HttpRequestData

# What the worker answers in a ``TypedData`` (a return value, an output binding), decoded: None for
# no data; ``int`` and ``float`` for the runtime's ``int``/``double`` (a ``bool`` is an ``int``:
# ``datum_as_proto``); the collections as lists.
type TypedOutput = (
    str
    | bytes
    | Json
    | int
    | float
    | HttpResponseData
    | list[str]
    | list[bytes]
    | list[float]
    | list[int]
    | None
)


def decode_typed_data(data: Any) -> TypedOutput:
    """The host's reading of a ``TypedData`` the worker sent."""
    kind = data.WhichOneof("data")
    match kind:
        case None:
            return None
        case "string" | "bytes" | "int" | "double":
            value: str | bytes | int | float = getattr(data, kind)
            return value
        case "stream":
            stream: bytes = data.stream
            return stream
        case "json":
            return Json(json.loads(data.json))
        case "http":
            http = data.http
            return HttpResponseData(
                status_code=http.status_code,
                headers=dict(http.headers),
                body=decode_typed_data(http.body) if http.HasField("body") else None,
                cookies=tuple(http.cookies),
                enable_content_negotiation=http.enable_content_negotiation,
            )
        case "collection_string":
            return list(data.collection_string.string)
        case "collection_bytes":
            return list(data.collection_bytes.bytes)
        case "collection_double":
            return list(data.collection_double.double)
        case "collection_sint64":
            return list(data.collection_sint64.sint64)
    raise ValueError(f"typed data {kind!r} is not one a worker answers with")


def typed_data(protos: Any, value: TypedValue) -> Any:
    if isinstance(value, ModelBindingData):
        return protos.TypedData(
            model_binding_data=protos.ModelBindingData(
                version=value.version,
                source=value.source,
                content_type=value.content_type,
                content=value.content,
            )
        )
    if isinstance(value, Json):
        return protos.TypedData(json=json.dumps(value.value, default=str))
    if isinstance(value, HttpRequestData):
        return protos.TypedData(
            http=protos.RpcHttp(
                method=value.method,
                url=value.url,
                headers=dict(value.headers),
                query=dict(value.query),
                params=dict(value.params),
                body=None if value.body is None else protos.TypedData(bytes=value.body),
            )
        )
    if isinstance(value, str):
        return protos.TypedData(string=value)
    return protos.TypedData(bytes=value)


@dataclass(frozen=True)
class IndexedFunction:
    """One function as the worker reported it in its metadata response (its raw bindings)."""

    name: str
    function_id: str
    bindings: tuple[Mapping[str, Any], ...]
    max_retry_count: int
    # The raw ``RpcRetryOptions`` the worker reported (strategy, intervals), or None without a
    # retry policy: the host applies it to a failed invocation of a Cosmos DB trigger.
    retry_options: Any = None

    @property
    def trigger(self) -> Mapping[str, Any]:
        return next(b for b in self.bindings if str(b["type"]).endswith("Trigger"))


@dataclass(frozen=True)
class InvocationResult:
    """What the worker answered to one invocation request."""

    invocation_id: str
    function: str
    trace_parent: str
    succeeded: bool
    error: str | None  # the worker's RpcException message, e.g. "ValueError: ..."
    stack_trace: str
    # The function's ``$return`` (``InvocationResponse.return_value``) and its output bindings
    # (``output_data``) by name, decoded; None and empty when it failed or answered nothing.
    return_value: TypedOutput = None
    outputs: Mapping[str, TypedOutput] = field(default_factory=dict)


def new_trace_parent() -> str:
    """The W3C context of the host's invocation activity: a new trace for each invocation."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


@dataclass(frozen=True)
class _WorkerRequest:
    """What the worker's proxy passes each ``handle_event`` function."""

    name: str
    request: Any
    properties: Mapping[str, Any]

    @classmethod
    def of(
        cls, protos: Any, name: str, properties: Mapping[str, Any], **content: Any
    ) -> _WorkerRequest:
        """The host's ``StreamingMessage``: a new request id and ``content``, its one request
        field."""
        return cls(
            name, protos.StreamingMessage(request_id=uuid.uuid4().hex, **content), properties
        )


class FunctionsWorker:
    """A started worker: its indexed functions, and invocation by function name."""

    def __init__(
        self,
        protos: Any,
        app_directory: Path,
        functions: list[IndexedFunction],
        capabilities: Mapping[str, str] | None = None,
    ):
        self.protos = protos
        self.app_directory = app_directory
        self.functions = {function.name: function for function in functions}
        # What the worker declared in its init response (``RawHttpBodyBytes``, ``RpcHttpBodyOnly``
        # ...): the host shapes what it sends by them.
        self.capabilities: Mapping[str, str] = dict(capabilities or {})

    @classmethod
    async def start(cls, app_directory: Path = REPO_ROOT) -> FunctionsWorker:
        """Init, metadata and load, as the host does at start-up; raises ``WorkerStartError``
        with the worker's own message when it refuses the app."""
        protos = load_protos()
        directory = str(app_directory)
        properties = {"protos": protos, "host": "127.0.0.1"}
        script_module = Path(_SCRIPT_FILE).stem
        in_this_process = sys.modules.pop(script_module, None)
        _reset_opentelemetry_switch()
        azure_functions_runtime.start_threadpool_executor()
        sys.path.insert(0, directory)  # the worker runs with the app directory on its path
        try:
            init = await azure_functions_runtime.worker_init_request(
                _WorkerRequest.of(
                    protos,
                    "WorkerInitRequest",
                    properties,
                    worker_init_request=protos.WorkerInitRequest(
                        host_version="local", function_app_directory=directory
                    ),
                )
            )
        finally:
            sys.path.remove(directory)
            # The worker's import of the app is its own, as in its own process.
            sys.modules.pop(script_module, None)
            if in_this_process is not None:
                sys.modules[script_module] = in_this_process
        try:
            _raise_unless_succeeded(protos, init.result, "worker init")
        except WorkerStartError:
            azure_functions_runtime.stop_threadpool_executor()
            raise
        metadata = await azure_functions_runtime.functions_metadata_request(
            _WorkerRequest.of(
                protos,
                "WorkerMetadataRequest",
                properties,
                functions_metadata_request=protos.FunctionsMetadataRequest(
                    function_app_directory=directory
                ),
            )
        )
        _raise_unless_succeeded(protos, metadata.result, "functions metadata")
        functions: list[IndexedFunction] = []
        for entry in metadata.function_metadata_results:
            loaded = await azure_functions_runtime.function_load_request(
                _WorkerRequest.of(
                    protos,
                    "FunctionLoadRequest",
                    properties,
                    function_load_request=protos.FunctionLoadRequest(
                        function_id=entry.function_id, metadata=entry
                    ),
                )
            )
            _raise_unless_succeeded(protos, loaded.result, f"function load of {entry.name}")
            functions.append(
                IndexedFunction(
                    name=entry.name,
                    function_id=entry.function_id,
                    bindings=tuple(json.loads(raw) for raw in entry.raw_bindings),
                    max_retry_count=entry.retry_options.max_retry_count,
                    retry_options=(
                        entry.retry_options if entry.HasField("retry_options") else None
                    ),
                )
            )
        if not functions:
            raise WorkerStartError(f"the worker indexed no function in {directory}")
        return cls(protos, app_directory, functions, dict(init.capabilities))

    def triggered_function(
        self, trigger_type: str, function_name: str | None = None
    ) -> IndexedFunction:
        """The first function whose trigger binding is ``trigger_type`` (``serviceBusTrigger``,
        ``cosmosDBTrigger``), or the one named ``function_name``."""
        for function in self.functions.values():
            if function_name is not None and function.name != function_name:
                continue
            if function.trigger["type"] == trigger_type:
                return function
        raise LookupError(f"no {trigger_type} function named {function_name or '(any)'} in the app")

    def close(self) -> None:
        azure_functions_runtime.stop_threadpool_executor()

    async def invoke(
        self,
        function_name: str,
        inputs: Mapping[str, TypedValue],
        *,
        trigger_metadata: Mapping[str, TypedValue] | None = None,
        trace_parent: str | None = None,
        trace_state: str = "",
        retry_count: int = 0,
    ) -> InvocationResult:
        """One invocation request: ``inputs`` by binding name (the trigger's included), as the
        host sends them; the worker decodes, binds and calls. A function's exception comes
        back as a failed result, never raised here; what it returned and wrote to its output
        bindings comes back decoded (``return_value``, ``outputs``)."""
        protos = self.protos
        function = self.functions[function_name]
        invocation_id = str(uuid.uuid4())
        trace_parent = trace_parent or new_trace_parent()
        request = protos.InvocationRequest(
            invocation_id=invocation_id,
            function_id=function.function_id,
            input_data=[
                protos.ParameterBinding(name=name, data=typed_data(protos, value))
                for name, value in inputs.items()
            ],
            trigger_metadata={
                name: typed_data(protos, value) for name, value in (trigger_metadata or {}).items()
            },
            trace_context=protos.RpcTraceContext(
                trace_parent=trace_parent, trace_state=trace_state
            ),
            retry_context=protos.RetryContext(
                retry_count=retry_count, max_retry_count=function.max_retry_count
            ),
        )
        # A task of its own, as the worker's dispatcher gives every request: the runtime makes
        # the invocation's trace context current and never detaches it.
        response = await asyncio.create_task(
            azure_functions_runtime.invocation_request(
                _WorkerRequest.of(
                    protos, "FunctionInvocationRequest", {}, invocation_request=request
                )
            )
        )
        succeeded = response.result.status == protos.StatusResult.Success
        return InvocationResult(
            invocation_id=invocation_id,
            function=function_name,
            trace_parent=trace_parent,
            succeeded=succeeded,
            error=None if succeeded else response.result.exception.message,
            stack_trace=response.result.exception.stack_trace,
            return_value=(
                decode_typed_data(response.return_value)
                if response.HasField("return_value")
                else None
            ),
            outputs={
                binding.name: decode_typed_data(binding.data) for binding in response.output_data
            },
        )


def _reset_opentelemetry_switch() -> None:
    runtime_otel.otel_manager.set_otel_libs_available(False)
    runtime_otel.otel_manager.set_azure_monitor_available(False)


def _raise_unless_succeeded(protos: Any, result: Any, step: str) -> None:
    if result.status != protos.StatusResult.Success:
        raise WorkerStartError(f"{step} failed: {result.exception.message}")
