"""host.json, the one setting of the Service Bus extension the settlement needs: how many messages
the host hands the worker at once (``extensions.serviceBus.maxConcurrentCalls``), which sizes
the settlement pool so that no settlement queues behind another.

Where host.json is: next to the ``function_app.py`` the Python worker loaded (the v2 model's
script file, imported as the module ``function_app``), else in the working directory. An app
that knows better passes its path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# The Service Bus extension's default for maxConcurrentCalls (learn.microsoft.com/azure/
# azure-functions/functions-bindings-service-bus, host.json settings).
DEFAULT_MAX_CONCURRENT_CALLS = 16


def app_host_json() -> Path:
    """The host.json of the running function app: beside the loaded ``function_app`` module,
    else in the working directory."""
    app = sys.modules.get("function_app")
    app_file = getattr(app, "__file__", None)
    root = Path(app_file).resolve().parent if app_file else Path.cwd()
    return root / "host.json"


def max_concurrent_calls(host_json: Path | None = None) -> int:
    """host.json ``extensions.serviceBus.maxConcurrentCalls``, or the extension's default;
    ``host_json`` None: ``app_host_json()``."""
    path = app_host_json() if host_json is None else host_json
    try:
        value = json.loads(path.read_text())["extensions"]["serviceBus"]["maxConcurrentCalls"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_MAX_CONCURRENT_CALLS
    return value if isinstance(value, int) and value >= 1 else DEFAULT_MAX_CONCURRENT_CALLS
