"""The bench's function app: ``function_app.app`` with the platform floor's blueprint
(``bench.floor_app``) registered beside its functions, so that one worker start serves both
functions of target 3 (``azure_functions_runtime`` holds one app per process).

The worker loads it as the script ``bench_app.py`` of the app directory bench/
(``PYTHON_SCRIPT_FILE_NAME``, set by ``bench.standin``). Nothing else may import it: registering
the blueprint changes the app object, which must be the worker's own import of ``function_app``
(``local.standins.worker`` imports that module afresh at each start and keeps it out of this
process). The one top-level ``FunctionApp`` here is the product's, as the runtime's indexer
requires.
"""

from bench import floor_app
from function_app import app

app.register_functions(floor_app.blueprint)
