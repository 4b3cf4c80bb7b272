"""The kit speaks of no app: nothing a user installs (every file under kit/src, and kit/README.md,
the distribution's long description) names this repository's code, pages, commands or names. A
user's operators must never be sent to our runbooks, a user's reader to our modules.

What counts as "this app" is read from the app itself, so the list grows with it: its top-level
folders as paths (``shared/``, ``docs/``, ``tests/`` ...), ``shared``'s modules (``shared.x``),
its commands (``python -m`` of a folder with a ``__main__``), its pages (every ``docs/*.md``
name), its function names (function_app.py), its Service Bus topic and subscriptions
(infra/messaging.json), its consumers' names, its telemetry namespace (``orders.<name>``) and
business measures, and "this app" itself.

Not counted, argued:
- the queue's name, ``orders``, as a word: the kit's vocabulary says "order" for what a message
  is about (``order_id`` of ``Handled`` and ``Decision``, the ``order_id`` telemetry attribute),
  inherited from the extraction and public since 0.1.0; renaming it is a breaking change of its
  own, so "orders" is English here (``orders.`` followed by a name, the app's namespace, is
  counted);
- ``function_app``, ``host.json``, ``requirements.txt``: the Functions host's names, which the
  kit must use (the v2 model's script module, the host's configuration).

ALLOWED holds what another change owns, each entry exact (a file and the text it may keep).

Checked to fail: on the kit of before this change, 22 mentions (docs/operations.md in two
descriptions and a comment, docs/events.md, tests/stock, tests/unit, infra/app/cosmos.bicep,
``python -m ops payments``, ``order-events``, ``payments.reconciliation_needed``, "this
repository").
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from shared.payments.consumer import CONSUMER_NAME as PAYMENTS_CONSUMER
from shared.stock.consumer import CONSUMER_NAME as STOCK_CONSUMER
from shared.telemetry.names import BUSINESS_COUNTERS, EXPORTED_LOGGER_NAME

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "kit"
# Folders of this checkout that are not the app's: the kit itself, and what tools make.
NOT_THE_APP = {"kit", "node_modules", "site", "mutants"}

# (file under kit/, exact text it may keep): owned by another change, to leave with it.
ALLOWED: set[tuple[str, str]] = {
    # kit/src/idempotent_consumer/_message.py belongs to a parallel change (import laziness and
    # the message module); its two mentions go with it.
    ("src/idempotent_consumer/_message.py", "``python -m ops show``"),
    ("src/idempotent_consumer/_message.py", "for every consumer of this app"),
}


def shipped_text() -> dict[str, str]:
    """What a user installs: every text file under kit/src, and the README."""
    files = [path for path in (KIT / "src").rglob("*") if path.is_file()]
    files = [
        path for path in files if "__pycache__" not in path.parts and ".egg-info" not in str(path)
    ]
    return {
        path.relative_to(KIT).as_posix(): path.read_text(encoding="utf-8")
        for path in [*files, KIT / "README.md"]
    }


def app_folders() -> list[str]:
    return sorted(
        path.name
        for path in REPO.iterdir()
        if path.is_dir() and not path.name.startswith(".") and path.name not in NOT_THE_APP
    )


def function_names() -> list[str]:
    """The names function_app.py gives its functions (``@app.function_name("...")``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse((REPO / "function_app.py").read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "function_name"
        ):
            names.extend(str(arg.value) for arg in node.args if isinstance(arg, ast.Constant))
    return names


def app_patterns() -> dict[str, re.Pattern[str]]:
    """What names this app, each a pattern with what it stands for."""
    folders = app_folders()
    messaging = json.loads((REPO / "infra" / "messaging.json").read_text(encoding="utf-8"))
    entities = [
        messaging["topicName"],
        messaging["inventorySubscriptionName"],
        messaging["paymentsSubscriptionName"],
    ]
    pages = sorted(path.name for path in (REPO / "docs").glob("*.md"))
    modules = sorted(
        path.stem for path in (REPO / "shared").iterdir() if path.name != "__init__.py"
    )
    commands = [name for name in folders if (REPO / name / "__main__.py").is_file()]
    names = [PAYMENTS_CONSUMER, STOCK_CONSUMER, *BUSINESS_COUNTERS, *function_names()]

    def words(items: list[str]) -> str:
        return "|".join(re.escape(item) for item in items)

    return {
        "a path of this repository": re.compile(rf"(?<![\w./-])(?:{words(folders)})/"),
        "a module of shared": re.compile(rf"\bshared\.(?:{words(modules)})\b"),
        "a command of this repository": re.compile(rf"python -m (?:{words(commands)})\b"),
        "a page of this repository's docs": re.compile(rf"(?<![\w-])(?:{words(pages)})"),
        "a name of this app": re.compile(rf"(?<![\w.-])(?:{words(entities + names)})(?![\w-])"),
        "this app's telemetry namespace": re.compile(rf"\b{EXPORTED_LOGGER_NAME}\.[a-z_]"),
        "this app itself": re.compile(r"\bthis (?:app|repository)\b", re.IGNORECASE),
    }


def mentions(texts: dict[str, str]) -> list[str]:
    found = []
    for what, pattern in app_patterns().items():
        for path, text in texts.items():
            for number, line in enumerate(text.splitlines(), 1):
                for match in pattern.finditer(line):
                    if not any(path == where and kept in line for where, kept in ALLOWED):
                        found.append(f"kit/{path}:{number}: {what}: {match.group(0)!r}")
    return found


def test_nothing_the_kit_ships_names_this_app() -> None:
    assert mentions(shipped_text()) == []


def test_the_patterns_find_what_they_stand_for() -> None:
    """Each pattern catches a mention of its kind, and lets the kit's own vocabulary pass."""
    caught = {
        "a.py": '"""See docs/operations.md, "Stale messages"."""',
        "b.py": "# shared.payments.consumer passes it",
        "c.py": "# resolved with python -m ops payments",
        "d.py": "# an app's tests/stock hold it",
        "e.py": 'MEASURE = "payments.reconciliation_needed"',
        "f.py": "# the span is process order-events",
        "g.py": "# logged on orders.consumer",
        "h.py": "# what every consumer of this app reads",
        "i.py": "# the capture_payment function",
    }
    passed = {
        "j.py": "order_id: str  # what the message is about; healthy orders are never parked",
        "k.py": "# beside the function_app module, host.json; learn.microsoft.com/azure/docs/x",
        "l.py": '# shared with the event loop; the kit\'s README, "Settings"',
    }

    assert sorted({line.split(":")[0] for line in mentions(caught)}) == sorted(
        f"kit/{name}" for name in caught
    )
    assert mentions(passed) == []
