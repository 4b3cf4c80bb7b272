"""The local Cosmos DB server dies with the process that started it, however that process ends.

A test run killed, or a mutant that ``make mutation`` times out (mutmut ends it with SIGKILL, so
no fixture stops anything), used to leave its ``node`` server running for ever (four after one
run: docs/testing.md). Fails with ``local/standins/cosmos_server.py`` started without its
stdin pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# A parent that starts a server, says its pid, and waits to be killed.
_PARENT = """
import sys, time
from local.standins.cosmos_server import LocalCosmosServer
server = LocalCosmosServer(keep_alive=sys.argv[1] == "keep-alive")
server.start()
print(server.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan is reaped by whoever adopted it, maybe later)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in {"Z", "X"}


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
@pytest.mark.parametrize("mode", ["keep-alive", "cli"])
def test_the_server_exits_when_its_parent_is_killed(mode: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, mode],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    try:
        assert _running(server_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _running(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(server_pid), "cosmosdb-server outlived its parent"
    finally:
        if _running(server_pid):
            os.kill(server_pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
