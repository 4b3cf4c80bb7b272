"""What the numbers were measured on: CPU, cores, load, Python and the packages on the path."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

PACKAGES = (
    "azure-cosmos",
    "azure-core",
    "aiohttp",
    "pydantic-core",
    "azure-functions",
    "azure-functions-runtime",
    "azurefunctions-extensions-bindings-servicebus",
    "grpcio",
    "opentelemetry-api",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            models = [line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line]
    except OSError:
        models = []
    return models[0] if models else platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe() -> dict[str, Any]:
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "load_average_at_start": [round(value, 2) for value in os.getloadavg()],
        "python": f"{sys.version.split()[0]} ({platform.python_implementation()})",
        "platform": platform.platform(),
        "packages": {package: _version(package) for package in PACKAGES},
    }
