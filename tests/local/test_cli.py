"""`python -m local`: the commands a developer types."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "local", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_send_without_a_namespace_or_connection_says_what_to_give() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ServiceBusConnection"}

    result = run("send", "--count", "1", env=env)

    assert result.returncode == 2
    assert "--namespace" in result.stdout
    assert "--connection-string" in result.stdout


def test_init_cosmos_names_the_missing_setting() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSMOS_")}

    result = run("init-cosmos", env=env)

    assert result.returncode == 2
    assert result.stderr.strip() == "invalid app setting COSMOS_ENDPOINT: is required but not set"


def test_every_command_is_listed_in_help() -> None:
    result = run("--help")

    assert result.returncode == 0
    for command in ("demo", "chaos", "send", "init-cosmos"):
        assert command in result.stdout
