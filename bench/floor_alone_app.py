"""The platform floor alone as a function app: the floor's blueprint (``bench.floor_app``) in a
``FunctionApp`` of its own, which the worker loads as the script ``floor_alone_app.py`` of the app
directory bench/ (``PYTHON_SCRIPT_FILE_NAME``). Target 4's second figure starts it in a fresh
worker process against ``function_app.py`` (``bench.first_message``): the least a Service
Bus-triggered app on this platform imports, indexes and does up to its first message settled.

Nothing imports it; the worker does.
"""

import azure.functions as func

from bench import floor_app

app = func.FunctionApp()
app.register_functions(floor_app.blueprint)
