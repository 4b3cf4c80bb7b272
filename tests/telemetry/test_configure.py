"""``configure_exporters``: nothing without a connection string, exactly once with one. Global
providers can be set once per process, so each case runs in a fresh interpreter, with a socket
guard that refuses every non-loopback connection and records every attempt."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from shared.telemetry import exporters as telemetry
from tests.integration.identity_endpoint import identity_endpoint, token_for

REPO = Path(__file__).resolve().parents[2]
# A closed local port for ingestion and live metrics: nothing can be delivered anywhere.
FAKE_CONNECTION_STRING = (
    "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
    "IngestionEndpoint=https://127.0.0.1:9/;LiveEndpoint=https://127.0.0.1:9/"
)

GUARD = textwrap.dedent(
    """
    import os, socket, sys
    LOOPBACK = {"127.0.0.1", "::1", "localhost"}
    attempts = []
    _connect, _getaddrinfo = socket.socket.connect, socket.getaddrinfo
    def connect(self, address):
        attempts.append(address[0] if isinstance(address, tuple) else address)
        if attempts[-1] not in LOOPBACK:
            raise OSError("non-loopback connection refused by the probe")
        return _connect(self, address)
    def getaddrinfo(host, *args, **kwargs):
        attempts.append(host)
        if host not in LOOPBACK:
            raise socket.gaierror("name resolution refused by the probe")
        return _getaddrinfo(host, *args, **kwargs)
    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo
    def finish():
        print("ok", flush=True)
        os._exit(0)  # no exit-time flush: nothing waits for an export
    """
)


def run_probe(body: str, tmp_path: Path, extra_env: dict[str, str] | None = None) -> None:
    script = GUARD + textwrap.dedent(body) + "\nfinish()\n"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    env |= extra_env or {}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok"), result.stdout


def test_without_a_connection_string_nothing_is_configured(tmp_path: Path) -> None:
    run_probe(
        f"""
        import opentelemetry._logs as logs, opentelemetry.metrics as metrics
        import opentelemetry.trace as trace
        from shared.telemetry.exporters import configure_exporters

        assert configure_exporters({{}}) is False
        assert configure_exporters({{"APPLICATIONINSIGHTS_CONNECTION_STRING": "  "}}) is False
        # The worker configured the distro already: configuring again would duplicate logs.
        assert configure_exporters({{
            "APPLICATIONINSIGHTS_CONNECTION_STRING": {FAKE_CONNECTION_STRING!r},
            "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY": "True",
        }}) is False

        assert "azure.monitor.opentelemetry" not in sys.modules
        assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
        assert type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
        assert type(logs.get_logger_provider()).__name__ == "ProxyLoggerProvider"
        assert "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS" not in os.environ
        assert attempts == [], attempts
        """,
        tmp_path,
    )


def test_with_a_connection_string_it_configures_exactly_once(tmp_path: Path) -> None:
    run_probe(
        f"""
        import logging
        import azure.monitor.opentelemetry as distro
        from azure.core.settings import settings as azure_settings
        from opentelemetry import _logs as logs, metrics, trace
        from opentelemetry.instrumentation.logging.handler import LoggingHandler
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        calls = []
        _configure = distro.configure_azure_monitor
        def counting(**options):
            calls.append(options)
            return _configure(**options)
        distro.configure_azure_monitor = counting
        warnings = []
        class Collect(logging.Handler):
            def emit(self, record):
                if record.levelno >= logging.WARNING:
                    warnings.append(record.getMessage())
        logging.getLogger().addHandler(Collect())

        from shared.telemetry.exporters import configure_exporters
        env = {{"APPLICATIONINSIGHTS_CONNECTION_STRING": {FAKE_CONNECTION_STRING!r}}}
        assert configure_exporters(env) is True
        assert configure_exporters(env) is True
        assert attempts == [], attempts  # configuring connects nowhere by itself

        assert len(calls) == 1, calls
        [options] = calls
        assert options["connection_string"] == {FAKE_CONNECTION_STRING!r}
        assert options["logger_name"] == "orders"
        assert "credential" not in options  # no APPLICATIONINSIGHTS_AUTHENTICATION_STRING
        assert options["instrumentation_options"]["requests"] == {{"enabled": False}}
        assert "azure_sdk" not in options["instrumentation_options"]  # stays on
        assert isinstance(trace.get_tracer_provider(), TracerProvider)
        assert isinstance(metrics.get_meter_provider(), MeterProvider)
        assert isinstance(logs.get_logger_provider(), LoggerProvider)
        handlers = logging.getLogger("orders").handlers
        assert [type(h) for h in handlers] == [LoggingHandler], handlers
        # Healthy INFO records leave with their sampled traces only (shared.telemetry.exporters).
        assert [type(f).__name__ for f in handlers[0].filters] == ["ExportedLogRecords"]
        assert not any(isinstance(h, LoggingHandler) for h in logging.getLogger().handlers)
        # The distro turns on azure-core's OpenTelemetry plugin: Cosmos calls become spans.
        assert azure_settings.tracing_implementation() is not None
        # No instance-metadata probe of the azure_vm detector.
        assert os.environ["OTEL_EXPERIMENTAL_RESOURCE_DETECTORS"] == "azure_functions"
        assert not [w for w in warnings if "Overriding" in w], warnings
        assert [a for a in attempts if a not in LOOPBACK] == [], attempts
        """,
        tmp_path,
    )


@pytest.mark.parametrize(
    ("authentication_string", "expected"),
    [
        ("", None),
        ("Authorization=AAD", "ManagedIdentityCredential"),
        (
            "ClientId=00000000-0000-0000-0000-000000000001;Authorization=AAD",
            "ManagedIdentityCredential",
        ),
        (
            "clientid=00000000-0000-0000-0000-000000000001; authorization=aad",
            "ManagedIdentityCredential",
        ),
        ("ClientId=00000000-0000-0000-0000-000000000001", None),
        ("Authorization=Key", None),
        ("garbage", None),
    ],
)
def test_managed_identity_from_the_authentication_string(
    authentication_string: str, expected: str | None
) -> None:
    credential = telemetry._aad_credential(authentication_string)

    assert (type(credential).__name__ if credential is not None else None) == expected


def test_the_exporter_authenticates_as_the_user_assigned_identity(tmp_path: Path) -> None:
    """What ``configure_exporters`` hands the distro is a managed identity credential that asks
    App Service's identity endpoint (here on 127.0.0.1) for the identity of the authentication
    string, not for the instance's AZURE_CLIENT_ID. Fails if the credential were the default
    chain, which takes AZURE_CLIENT_ID."""
    uami, other = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    with identity_endpoint() as endpoint:
        run_probe(
            f"""
            import azure.monitor.opentelemetry as distro
            calls = []
            _configure = distro.configure_azure_monitor
            def counting(**options):
                calls.append(options)
                return _configure(**options)
            distro.configure_azure_monitor = counting

            from shared.telemetry.exporters import configure_exporters
            assert configure_exporters({{
                "APPLICATIONINSIGHTS_CONNECTION_STRING": {FAKE_CONNECTION_STRING!r},
                "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": "ClientId={uami};Authorization=AAD",
            }}) is True
            [options] = calls
            credential = options["credential"]
            assert type(credential).__name__ == "ManagedIdentityCredential", credential
            token = credential.get_token("https://monitor.azure.com//.default")
            assert token.token == {token_for(uami)!r}, token.token
            """,
            tmp_path,
            {**endpoint.environment, "AZURE_CLIENT_ID": other},
        )
    assert [(r.client_id, r.secret_ok) for r in endpoint.requests] == [(uami, True)]
