"""The mutation report: per-module scores and every survivor, from mutmut's results in
``mutants/`` and the constant mutants' ``mutants/constant-results.json``.

Writes ``docs/mutation-report.json`` (everything, for tools) and ``docs/mutation-report.md``
(the scores, the survivors still to kill, and those argued equivalent). A survivor is argued
equivalent when docs/testing.md lists its name, with the reason, under "Equivalent mutants".

A run over some of the modules (``--run N --title ...``) is one run among the report's runs: it
replaces run N's section of docs/mutation-report.md and its entry under ``runs`` in the JSON,
and keeps the other runs and the hand-written lines above the first run (what each run was).
Without a run number the report is rewritten as the one run it holds.

Scores: caught / mutants, where caught = killed + timeout (a hung test run is caught, as mutmut
counts it too), and the net score leaves the argued equivalents out of the mutants.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code

if TYPE_CHECKING:
    from tools.mutation.run import MutationConfig

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "mutants"
TESTING_DOC = REPO / "docs" / "testing.md"
REPORT_MD = REPO / "docs" / "mutation-report.md"
REPORT_JSON = REPO / "docs" / "mutation-report.json"
CAUGHT = {"killed", "timeout"}
_EQUIVALENT_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$")


def equivalents(doc: Path = TESTING_DOC) -> dict[str, str]:
    """Mutant name -> reason, from the table under docs/testing.md's "Equivalent mutants"."""
    found: dict[str, str] = {}
    if not doc.exists():
        return found
    in_section = False
    for line in doc.read_text().splitlines():
        if line.startswith("## "):
            in_section = line.strip() == "## Equivalent mutants"
        elif in_section and (row := _EQUIVALENT_ROW.match(line)):
            found[row.group(1)] = row.group(2)
    return found


def mutmut_results(modules: tuple[str, ...]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for module in modules:
        meta = WORK / f"{module}.meta"
        if not meta.exists():
            continue
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            rows.append(
                {
                    "name": name,
                    "module": module,
                    "kind": "mutmut",
                    "status": status_by_exit_code[code],
                }
            )
    return rows


def constant_results() -> list[dict[str, Any]]:
    path = WORK / "constant-results.json"
    stored: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
    return [{"name": name, "kind": "constant", **result} for name, result in sorted(stored.items())]


def _survived(row: dict[str, Any]) -> bool:
    """Not caught; a mutant not yet run (a partial run) is no survivor, only "other"."""
    return row["status"] not in CAUGHT | {"not checked"}


def _diff(row: dict[str, Any]) -> list[str]:
    if row["kind"] == "constant":
        return [f"- {row['old'].strip()}", f"+ {row['new'].strip()}"]
    try:
        text = get_diff_for_mutant(row["name"], path=row["module"])
    except Exception as error:  # noqa: BLE001 - a missing diff must not lose the report
        return [f"(no diff: {type(error).__name__})"]
    return [
        line
        for line in text.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def write(config: MutationConfig, run: int | None = None, title: str = "") -> dict[str, Any]:
    argued = equivalents()
    rows = mutmut_results(config.modules) + constant_results()
    for row in rows:
        if _survived(row):
            row["diff"] = _diff(row)
            if row["name"] in argued:
                row["equivalent"] = argued[row["name"]]
    modules = []
    for module in config.modules:
        mine = [row for row in rows if row["module"] == module]
        statuses = Counter(row["status"] for row in mine)
        caught = sum(statuses[status] for status in CAUGHT)
        equivalent = sum(1 for row in mine if "equivalent" in row)
        modules.append(
            {
                "module": module,
                "mutants": len(mine),
                "mutmut": sum(1 for row in mine if row["kind"] == "mutmut"),
                "constant": sum(1 for row in mine if row["kind"] == "constant"),
                "statuses": dict(sorted(statuses.items())),
                "caught": caught,
                "equivalent": equivalent,
                "score": round(caught / len(mine), 3) if mine else None,
                "net_score": round(caught / (len(mine) - equivalent), 3)
                if len(mine) > equivalent
                else None,
            }
        )
    record = json.loads((WORK / "run.json").read_text()) if (WORK / "run.json").exists() else {}
    report = {
        "commit": _git("rev-parse", "--short", "HEAD"),
        "mutmut": importlib.metadata.version("mutmut"),
        "selection": list(config.selection),
        "seconds": record.get("seconds"),
        "clean_runs": record.get("clean_runs", []),
        "reruns": record.get("reruns", []),
        "note": record.get("note", ""),
        "modules": modules,
        "survivors": [row for row in rows if _survived(row)],
    }
    if run is None:
        REPORT_JSON.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        REPORT_MD.write_text(_markdown(report))
    else:
        _write_run({"run": run, **report}, title)
    print(f"report: {REPORT_MD}, {REPORT_JSON}")
    return report


def _write_run(report: dict[str, Any], title: str) -> None:
    """Run ``report["run"]`` in place of its older section and entry, the newest first."""
    stored = json.loads(REPORT_JSON.read_text()) if REPORT_JSON.exists() else {}
    runs = [kept for kept in stored.get("runs", []) if kept.get("run") != report["run"]]
    runs = sorted([report, *runs], key=lambda kept: -int(kept.get("run", 0)))
    REPORT_JSON.write_text(json.dumps({"runs": runs}, indent=1, ensure_ascii=False) + "\n")

    heading = f"## Run {report['run']}: "
    body = _markdown(report).split("\n", 2)[2]  # without the page's own title
    section = [
        heading + title,
        *("#" + line if line.startswith("#") else line for line in body.splitlines()),
    ]
    text = REPORT_MD.read_text() if REPORT_MD.exists() else "# Mutation report\n\n"
    lines = text.rstrip("\n").splitlines()
    sections = _run_sections(lines)
    sections[report["run"]] = section
    first = next((at for at, line in enumerate(lines) if line.startswith("## Run ")), len(lines))
    ordered = [sections[number] for number in sorted(sections, reverse=True)]
    REPORT_MD.write_text(
        "\n".join([*lines[:first], *(line for section in ordered for line in section)]) + "\n"
    )


def _run_sections(lines: list[str]) -> dict[int, list[str]]:
    """The report's "## Run N: ..." sections by N, each up to the next."""
    sections: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if match := re.match(r"## Run (\d+)\b", line):
            current = sections.setdefault(int(match.group(1)), [])
        if current is not None:
            current.append(line)
    return sections


def _markdown(report: dict[str, Any]) -> str:
    minutes = f"{report['seconds'] / 60:.0f} min" if report["seconds"] else "n/a"
    lines = [
        "# Mutation report",
        "",
        f"Written by `make mutation` (tools/mutation; mutmut {report['mutmut']} plus the "
        f"hand-made constant mutants) at commit `{report['commit']}`, full run {minutes} on this "
        "project's 2-core machine. How to read and extend it: docs/testing.md.",
        "",
        f"Test selection: {', '.join(f'`{path}`' for path in report['selection'])}.",
        "",
        *_validity(report),
        "| module | mutants (mutmut + constant) | caught | survived | other | argued equivalent "
        "| score | net score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for module in report["modules"]:
        statuses = module["statuses"]
        other = module["mutants"] - module["caught"] - statuses.get("survived", 0)
        lines.append(
            f"| `{module['module']}` | {module['mutants']} ({module['mutmut']} + "
            f"{module['constant']}) | {module['caught']} | {statuses.get('survived', 0)} | "
            f"{other} | {module['equivalent']} | {_percent(module['score'])} | "
            f"{_percent(module['net_score'])} |"
        )
    lines += [
        "",
        "caught = killed or timed out; other = not run (no selected test reaches the function: "
        "counted as not caught) or suspicious; net score = caught / (mutants - argued "
        "equivalent).",
        "",
    ]
    open_rows = [row for row in report["survivors"] if "equivalent" not in row]
    argued_rows = [row for row in report["survivors"] if "equivalent" in row]
    lines += [f"## Survivors to kill ({len(open_rows)})", ""]
    lines += _survivor_lines(open_rows) or ["None.", ""]
    lines += [f"## Argued equivalent ({len(argued_rows)}; reasons in docs/testing.md)", ""]
    lines += _survivor_lines(argued_rows) or ["None.", ""]
    return "\n".join(lines)


def _validity(report: dict[str, Any]) -> list[str]:
    checks = report["clean_runs"]
    if checks and all(check["passed"] for check in checks):
        lines = [
            "The unmutated selection passed after each half of the run ("
            + ", ".join(check["when"] for check in checks)
            + "): every kill below is a mutant's."
        ]
    else:
        failed = [check for check in checks if not check["passed"]] or [{"when": "(none run)"}]
        lines = [
            "**INVALID: the unmutated selection did not pass "
            + ", ".join(check["when"] for check in failed)
            + "; kills may be the environment's, not the tests'.**"
        ]
    for names in report["reruns"]:
        lines.append(
            "Run again after the full run, over its results (tests added since): "
            + ", ".join(f"`{name}`" for name in names)
            + "."
        )
    if report["note"]:
        lines.append(report["note"])
    return [*lines, ""]


def _survivor_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for module in sorted({row["module"] for row in rows}):
        lines += [f"### `{module}`", ""]
        for row in (row for row in rows if row["module"] == module):
            status = "" if row["status"] == "survived" else f" ({row['status']})"
            lines.append(f"- `{row['name']}`{status}")
            lines += ["  ```diff", *(f"  {line}" for line in row.get("diff", [])), "  ```"]
        lines.append("")
    return lines


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _git(*args: str) -> str:
    completed = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return completed.stdout.strip() or "unknown"
