"""Exporter bootstrap: traces, metrics and logs to Application Insights through the Azure
Monitor OpenTelemetry distro, at most once per worker process, and only when
``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set: tests and local runs stay offline. The app
configures the distro itself; the Functions worker must not (see docs/telemetry.md:
``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY`` stays unset, ``PYTHON_ENABLE_OPENTELEMETRY=true``).

Exported logs (``ExportedLogRecords``, on the exporter's handler only): every record at WARNING
and above, always; an INFO record (a healthy delivery's outcome, ``processed`` or ``duplicate``,
an event published) only when the span current at that moment is sampled, so that healthy
outcomes reach Application Insights with the traces the sampler keeps (5 per second per process
by default), not once per order: ``orders.messages`` and ``orders.relay.published`` count every
one of them, and every failure still has its log line (docs/telemetry.md, "Logs").

Called by the composition root only (``shared.bootstrap``), before anything else is built.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

from shared.telemetry.names import EXPORTED_LOGGER_NAME, LOGGER_NAME

CONNECTION_STRING_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
AUTHENTICATION_STRING_SETTING = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"
WORKER_TELEMETRY_SETTING = "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"
RESOURCE_DETECTORS_SETTING = "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS"

# Of the distro's default instrumentations, only the Azure SDK one is of use here; the others
# would only trace the managed identity token requests (requests/urllib3) or web frameworks.
_UNUSED_INSTRUMENTATIONS = (
    "django",
    "fastapi",
    "flask",
    "httpx",
    "psycopg2",
    "requests",
    "urllib",
    "urllib3",
)


logger = logging.getLogger(LOGGER_NAME)
_configure_lock = threading.Lock()
_configured = False


class ExportedLogRecords(logging.Filter):
    """The exporter's filter: records at WARNING and above always; INFO and below only with a
    sampled trace (the current span's W3C sampled flag: a non-recording span, as without an
    SDK, has none). Local handlers (the console, tests, the demo's counts) see every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return bool(trace.get_current_span().get_span_context().trace_flags.sampled)


def configure_exporters(env: Mapping[str, str]) -> bool:
    """Send traces, metrics and logs to Application Insights, once per process, if a connection
    string is set. Returns whether this module's exporters are (now) configured.

    Not configured, and False, when:

    - ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is unset or blank: nothing is exported, no
      exporter exists, nothing connects anywhere (tests, local runs).
    - ``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY`` is true: the Functions worker has then
      already configured the distro, and a second configuration would export every log twice.

    With ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` = ``ClientId=...;Authorization=AAD`` the
    exporters authenticate with that managed identity: local auth is disabled on the
    Application Insights resource, so an instrumentation key alone is not enough.
    """
    global _configured
    connection_string = env.get(CONNECTION_STRING_SETTING, "").strip()
    if not connection_string:
        return False
    if env.get(WORKER_TELEMETRY_SETTING, "").strip().lower() in {"true", "1"}:
        logger.warning(
            "%s is true: the Functions worker configured Azure Monitor, the app does not "
            "(unset it: the worker's configuration lacks the managed identity and the logger "
            "name this app uses)",
            WORKER_TELEMETRY_SETTING,
        )
        return False
    with _configure_lock:
        if _configured:
            return True
        # The distro's default detectors include azure_vm, which probes the instance metadata
        # endpoint over the network; the Functions worker sets this same default.
        os.environ.setdefault(RESOURCE_DETECTORS_SETTING, "azure_functions")
        from azure.monitor.opentelemetry import configure_azure_monitor  # heavy: import on use

        options: dict[str, Any] = {
            "connection_string": connection_string,
            "logger_name": EXPORTED_LOGGER_NAME,
            # azure_sdk stays on: the distro then sets azure-core's tracing_implementation to
            # OpenTelemetry, and the Cosmos DB calls become child spans of the consumer span.
            "instrumentation_options": {
                name: {"enabled": False} for name in _UNUSED_INSTRUMENTATIONS
            },
        }
        credential = _aad_credential(env.get(AUTHENTICATION_STRING_SETTING, ""))
        if credential is not None:
            options["credential"] = credential
        configure_azure_monitor(**options)
        _filter_exported_logs()
        _configured = True
        return True


def _filter_exported_logs() -> None:
    """Put ``ExportedLogRecords`` on the handler the distro attached to our logger (an
    OpenTelemetry ``LoggingHandler``: azure/monitor/opentelemetry/_configure.py, _setup_logging,
    ``logger.addHandler(handler)``), and on no other handler."""
    from opentelemetry.instrumentation.logging.handler import LoggingHandler

    for handler in logging.getLogger(EXPORTED_LOGGER_NAME).handlers:
        if isinstance(handler, LoggingHandler) and not any(
            isinstance(f, ExportedLogRecords) for f in handler.filters
        ):
            handler.addFilter(ExportedLogRecords())


def _aad_credential(authentication_string: str) -> Any | None:
    parts = {
        key.strip().lower(): value.strip()
        for key, _, value in (part.partition("=") for part in authentication_string.split(";"))
        if value
    }
    if parts.get("authorization", "").upper() != "AAD":
        return None
    from azure.identity import ManagedIdentityCredential  # constructing it opens no connection

    client_id = parts.get("clientid")
    return (
        ManagedIdentityCredential(client_id=client_id) if client_id else ManagedIdentityCredential()
    )
