"""What the numbers were measured on."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

PACKAGES = (
    "azure-cosmos",
    "azure-core",
    "aiohttp",
    "pydantic",
    "pydantic-core",
    "azure-functions",
    "azure-functions-runtime",
    "azurefunctions-extensions-bindings-servicebus",
    "azure-servicebus",
    "grpcio",
    "opentelemetry-api",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _node_version() -> str:
    try:
        return subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not found"


def describe() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "node": _node_version(),
        "packages": versions,
        "load_average_at_start": [round(value, 2) for value in load],
    }
