"""Runs the local Cosmos DB API stand-in, ``@vercel/cosmosdb-server`` (installed by npm into the
repo), on a free loopback port over HTTPS with its bundled self-signed certificate, with five of
its request handlers replaced by the JS modules beside this file (``cosmos_change_feed.js``,
``cosmos_batch.js``, ``cosmos_partition_index.js``) so that it answers as the service does where
the product relies on it:

- a transactional batch is all or nothing: 200 when every operation succeeds; 207 Multi-Status
  when one fails, that operation with its status (409 conflict, 404, 412 for an unmet ``ifMatch``
  or filter predicate, 400) and every other one 424, nothing written; patch operations (with
  their filter predicate and ``ifMatch``) run inside it; more than 100 operations, an empty batch
  or an operation on another partition key value 400, a body over 2 MB 413. azure-cosmos raises
  ``CosmosBatchOperationError`` from the 207 (``aio/_cosmos_client_connection_async.py:
  2091-2114``). The package ran a batch operation by operation, answered 200 and had no patch;
- a single-item patch evaluates its filter predicate as written (the package lower-cased it:
  ``c.orderVersion`` became ``c.orderversion``);
- a point read of a missing item is 404 (the package answered 500);
- the change feed (a read feed with ``A-IM: Incremental Feed``, what azure-cosmos's
  ``query_items_change_feed`` sends): an append-only log per container, one LSN per
  transaction, read by seeking to the continuation, never by scanning the documents (the
  package answered every document with ``etag: 1``, then 304 for ever);
- a query with a partition key reads that partition's documents only, from an index by
  partition key value (the package ran every query over the whole container).

Each JS module's header cites the sources (learn.microsoft.com/azure/cosmos-db/nosql/transactional-
batch, .../partial-document-update, the REST API's List Documents page, the SDKs' batch parsing
and change feed state) for each behaviour.

It is started through its library with HTTP keep-alive, as Cosmos DB behaves: the package's CLI
answers every request with ``connection: close``, so each request would pay a new TCP connection
and TLS handshake (several milliseconds of CPU on both sides). ``keep_alive=False`` starts the
package's CLI as it is published: its own handlers (batches not atomic), without keep-alive; a
baseline, used by nothing in the product.

What it does not do (tests that need these run only against the real emulator, see
docs/testing.md): the request charge is always 1, no TTL, no throttling, no session consistency
tokens, no index but the partition key's; in a batch, no non-atomic (bulk) mode and no
``ifNoneMatch`` (both refused with 400, so nothing relies on them by accident), no 5-second
execution limit, no sub-status codes; the change feed has one range (no splits), no
all-versions-and-deletes mode and not the service's LSN values; the full lists head the JS
modules.

The server dies with the process that started it, however that process ends: its stdin is a
pipe whose only writer is this process, so when it exits, even by SIGKILL (a mutant that timed
out, a test run killed), the kernel closes the pipe and the server reads end-of-file ("The
'end' event is emitted when there is no more data to be consumed from the stream",
nodejs.org/api/stream.html#event-end) and exits. ``subprocess`` pipes are not inherited by
other children (os.pipe creates non-inheritable descriptors, docs.python.org/3/library/
os.html#fd-inheritance), so no other process keeps it open.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient

from ops.init_cosmos import ORDERS_INDEXING_POLICY

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI = REPO_ROOT / "node_modules" / "@vercel" / "cosmosdb-server" / "lib" / "cli.js"
LIBRARY = CLI.parent / "index.js"
# Replace the package's batch, patch, read and read-feed handlers (and hook its store for the
# change log); each must load before the library.
SERVICE_SEMANTICS = tuple(
    Path(__file__).resolve().parent / name
    for name in ("cosmos_change_feed.js", "cosmos_batch.js", "cosmos_partition_index.js")
)
# The Cosmos DB emulator's published, well-known key: not a secret. cosmosdb-server accepts any.
EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)
_READY = re.compile(rb"connections at (\S+):(\d+)")
# The CLI's start-up (cli.js) with the library's keepAlive option, which the CLI does not expose,
# and the service's batch semantics installed first; it prints the same "Ready to accept HTTPS
# connections at host:port" line.
# Every start-up script begins with this: exit when the parent's end of stdin closes.
_EXIT_WITH_PARENT = """
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
"""
_KEEP_ALIVE_SCRIPT = """
const [library, host, port, ...semantics] = process.argv.slice(1);
for (const module of semantics) require(module).install(require("path").dirname(library));
const { createHttpsServer } = require(library);
const server = createHttpsServer({ keepAlive: true }).listen(Number(port), host, () => {
  console.log(`Ready to accept HTTPS connections at ${host}:${server.address().port}`);
});
"""


class LocalCosmosServer:
    def __init__(self, start_timeout_s: float = 30.0, *, keep_alive: bool = True) -> None:
        self._start_timeout_s = start_timeout_s
        self.keep_alive = keep_alive
        self._process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def start(self) -> str:
        node = shutil.which("node")
        if node is None or not CLI.exists():
            raise RuntimeError(
                "the local Cosmos DB server is not installed: run `make install` (needs node/npm)"
            )
        command = (
            [
                node,
                "-e",
                _EXIT_WITH_PARENT + _KEEP_ALIVE_SCRIPT,
                *(str(LIBRARY), "127.0.0.1", "0", *map(str, SERVICE_SEMANTICS)),
            ]
            if self.keep_alive
            # The CLI as it is, with its own handlers (it reads process.argv.slice(2): the
            # arguments after its path).
            else [
                node,
                "-e",
                _EXIT_WITH_PARENT + "require(process.argv[1]);",
                str(CLI),
                *("--host", "127.0.0.1", "--port", "0"),
            ]
        )
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,  # never written: its closing is the parent's end
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self._process.stdout is not None
        deadline = time.monotonic() + self._start_timeout_s
        output = b""
        while time.monotonic() < deadline:
            line = self._process.stdout.readline()  # the server prints one line when it listens
            if not line:
                break
            output += line
            match = _READY.search(line)
            if match:
                host, port = match.group(1).decode(), int(match.group(2))
                self.endpoint = f"https://{host}:{port}/"
                return self.endpoint
        self.stop()
        raise RuntimeError(f"cosmosdb-server did not start: {output.decode(errors='replace')}")

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (benchmarks read its CPU time)."""
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        if self._process is not None:
            if self._process.stdin is not None:
                self._process.stdin.close()
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None

    def __enter__(self) -> LocalCosmosServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def ensure_container(
    client: CosmosClient,
    database: str = "orders",
    container: str = "orders",
    partition_path: str = "/orderId",
    default_ttl: int | None = None,
    indexing_policy: dict[str, Any] | None = None,
) -> ContainerProxy:
    """Create the database and the container (partition key ``partition_path``: ``/orderId``
    for orders and payments, ``/sku`` for the inventory; the deployed indexing policy, the
    orders container's unless ``indexing_policy`` is given (the requests container's: its
    completer's query): the server refuses an ORDER BY of several fields without its composite
    index, as Cosmos DB does) if missing; ``default_ttl`` the container's ``defaultTtl`` when
    given."""
    db = await client.create_database_if_not_exists(database)
    return await db.create_container_if_not_exists(
        container,
        partition_key=PartitionKey(path=partition_path),
        indexing_policy=ORDERS_INDEXING_POLICY if indexing_policy is None else indexing_policy,
        # -1: items never expire unless their own ttl says (the requests container's records)
        default_ttl=default_ttl,
    )
