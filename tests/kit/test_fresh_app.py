"""A user's function app from the wheel alone: the kit is built as a wheel by the standard tool
(``python -m build``), installed into a fresh venv from an app directory holding only
``function_app.py`` (the units-sold consumer, examples/units_sold.py, and the binder's lines),
``host.json`` and a ``requirements.txt`` naming the wheel; then the consumer runs through
Microsoft's worker against the local Cosmos server (``tests/kit/fresh_app_driver.py``, in the
fresh venv): redeliveries, five concurrent deliveries of one message, and a delivery stopped
between two partitions, as tests/kit/test_your_own_consumer.py does through ``decide``.

The fresh venv installs the wheel with no package index: its declared dependencies must already
be satisfied, and they are by the project venv's site-packages, which a ``.pth`` file appends
after the fresh venv's own (the stand-ins' libraries come from there too). The kit is imported
from the wheel (its ``__file__`` is in the fresh venv), and ``shared`` never.

Checked to fail: with ``bind_consumer`` registering ``auto_complete_messages=True`` (the host
stand-in refuses the app), and with the kit's ``decide`` skipping the inbox marker check (the
redelivery counts twice).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "units_sold.py"
# What a user adds below their consumer's definition: the whole wiring.
BINDING = """

import azure.functions as func
from idempotent_consumer.functions import bind_consumer

app = func.FunctionApp()
bind_consumer(app, units_sold, topic="%TOPIC_NAME%", subscription="%SUBSCRIPTION_NAME%")
"""
HOST_JSON = {
    "version": "2.0",
    "extensionBundle": {
        "id": "Microsoft.Azure.Functions.ExtensionBundle",
        "version": "[4.*, 5.0.0)",
    },
    "extensions": {"serviceBus": {"autoCompleteMessages": False, "maxConcurrentCalls": 8}},
}


def function_app_text() -> str:
    """The one file of the user's app: the example consumer, then the binding."""
    return EXAMPLE.read_text(encoding="utf-8") + BINDING


def run(
    command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=cwd, env=env, check=False
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture
async def sku_container(app_env: dict[str, str]) -> AsyncIterator[ContainerProxy]:
    async with CosmosClient(
        app_env["COSMOS_ENDPOINT"], credential=app_env["COSMOS_KEY"], connection_verify=False
    ) as client:
        database = await client.create_database_if_not_exists(app_env["COSMOS_DATABASE"])
        name = f"units-{uuid.uuid4().hex[:8]}"
        yield await database.create_container(name, partition_key=PartitionKey(path="/sku"))
        await database.delete_container(name)


def fresh_app(tmp_path: Path) -> tuple[Path, Path]:
    """The wheel built, a fresh venv, and the app directory installed from its requirements."""
    sources = tmp_path / "kit"
    shutil.copytree(REPO / "kit", sources, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(sources),
        ]
    )
    [wheel] = dist.glob("idempotent_consumer_azure-*.whl")

    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(function_app_text(), encoding="utf-8")
    (app / "host.json").write_text(json.dumps(HOST_JSON, indent=2), encoding="utf-8")
    shutil.copy2(wheel, app / wheel.name)
    (app / "requirements.txt").write_text(f"./{wheel.name}\n", encoding="utf-8")

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    # After the venv's own site-packages: the project's (what this interpreter sees), for the
    # stand-ins and the dependencies. Never the kit's sources: only site-packages directories.
    project = [entry for entry in sys.path if entry.endswith("site-packages")]
    assert sysconfig.get_path("purelib") in project
    (site / "zz_project_site_packages.pth").write_text("\n".join(project) + "\n", encoding="utf-8")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-index",
            "-r",
            "requirements.txt",
        ],
        cwd=app,
    )
    assert (site / "idempotent_consumer" / "__init__.py").is_file()
    return app, python


async def units(container: ContainerProxy) -> dict[str, int]:
    query = "SELECT * FROM c WHERE c.day = '2026-11-30'"
    return {item["sku"]: item["units"] async for item in container.query_items(query)}


@pytest.mark.slow
async def test_a_fresh_app_counts_units_once_through_the_wheel_and_microsoft_s_worker(
    tmp_path: Path, app_env: dict[str, str], sku_container: ContainerProxy
) -> None:
    app, python = fresh_app(tmp_path)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env |= {
        "COSMOS_CONTAINER": sku_container.id,
        "TOPIC_NAME": "order-events",
        "SUBSCRIPTION_NAME": "units-sold",
    }

    result = run([str(python), "-m", "tests.kit.fresh_app_driver", str(app)], cwd=REPO, env=env)
    report = json.loads(result.stdout.strip().splitlines()[-1])

    assert report["functions"] == ["analytics_units_sold"]
    assert report["redeliveries"] == ["complete:True"] * 3
    assert report["concurrent"] == ["complete:True"] * 5
    # Stopped after SKU-B1's commit: abandoned; the redelivery finishes SKU-B2 and SKU-B3.
    assert report["stopped"] == ["abandon:True", "complete:True"]
    assert report["halfway"] == {"SKU-B1": 2}
    assert report["stop_refused_requests"] >= 1
    assert report["dead_letters"] == 0
    assert await units(sku_container) == {
        "SKU-A1": 5,
        "SKU-A2": 1,
        "SKU-B1": 2,
        "SKU-B2": 4,
        "SKU-B3": 1,
    }
    assert Path(report["kit_file"]).is_relative_to(tmp_path / "venv")
    assert report["shared_imported"] == []
