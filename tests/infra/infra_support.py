"""Helpers for the offline infrastructure tests (no Azure account, no Bicep CLI, no Docker)."""

from __future__ import annotations

import importlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from pycep import BicepParser

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
EMULATORS = REPO / "emulators"

_PARSER = BicepParser()


@cache
def parse_bicep(path: Path) -> dict[str, Any]:
    """Parse one .bicep file with pycep (the parser checkov uses) into its JSON form."""
    result = _PARSER.parse(file_path=path)
    return dict(result)


def messaging() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((INFRA / "messaging.json").read_text(encoding="utf-8"))
    return data


def doc(name: str) -> dict[str, Any]:
    """``infra/main.bicep`` for ``main``, else the module ``infra/app/<name>.bicep``, parsed."""
    return parse_bicep(INFRA / "main.bicep" if name == "main" else INFRA / "app" / f"{name}.bicep")


def body(resource: dict[str, Any]) -> dict[str, Any]:
    """Resource body; conditional resources (`= if (...) {}`) nest it one level deeper."""
    config: dict[str, Any] = resource["config"]
    inner: dict[str, Any] = config["config"] if "condition" in config else config
    return inner


def accessor(expr: Any) -> tuple[str, ...]:
    """Flatten a property accessor expression (a.b.c) into ('a', 'b', 'c')."""
    if isinstance(expr, str):
        return (expr,)
    operator = expr.get("operator", {}) if isinstance(expr, dict) else {}
    if operator.get("type") != "property_accessor":
        return ()
    operands = operator["operands"]
    return accessor(operands["operand_1"]) + accessor(operands["operand_2"])


def int_literal(expr: Any) -> int:
    """Integer literal, including pycep's unary-minus form for negative numbers."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    operator = expr["operator"]
    assert operator["type"] == "minus", expr
    return -int_literal(operator["operands"]["integer_value"])


def _scalar(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "\"'":
        return token[1:-1]
    return token


def _block(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][1].startswith("- "):
        items: list[str] = []
        while pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("- "):
            items.append(_scalar(lines[pos][1][2:].strip()))
            pos += 1
        return items, pos
    mapping: dict[str, Any] = {}
    while pos < len(lines) and lines[pos][0] == indent:
        key, sep, rest = lines[pos][1].partition(":")
        if not sep:
            raise ValueError(f"expected 'key: value', got {lines[pos][1]!r}")
        key, rest = _scalar(key.strip()), rest.strip()
        if key in mapping:
            raise ValueError(f"duplicate key {key!r}")
        pos += 1
        if rest:
            mapping[key] = _scalar(rest)
        elif pos < len(lines) and lines[pos][0] > indent:
            mapping[key], pos = _block(lines, pos, lines[pos][0])
        else:
            mapping[key] = None
    if pos < len(lines) and lines[pos][0] > indent:
        raise ValueError(f"unexpected indentation at {lines[pos][1]!r}")
    return mapping, pos


def parse_block_yaml(text: str) -> dict[str, Any]:
    """Parse the block-style YAML subset used by azure.yaml and the compose file.

    Mappings, lists of scalars, quoted or plain scalars, full-line comments. Anything else
    (flow style, anchors, multi-line scalars, inline comments) raises, so the files stay simple
    enough to be checked without PyYAML.
    """
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ValueError("tabs are not allowed for indentation")
        if stripped[0] in "{[&*|>" or " #" in stripped:
            raise ValueError(f"unsupported YAML construct in {stripped!r}")
        lines.append((len(raw) - len(raw.lstrip(" ")), stripped))
    if not lines:
        return {}
    value, pos = _block(lines, 0, lines[0][0])
    if pos != len(lines) or not isinstance(value, dict):
        raise ValueError("trailing content or top level is not a mapping")
    return value


def load_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML file with parse_block_yaml; cross-checked with PyYAML when it is installed."""
    text = path.read_text(encoding="utf-8")
    data = parse_block_yaml(text)
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        return data
    assert yaml.safe_load(text) == data, f"tiny YAML parser disagrees with PyYAML on {path}"
    return data


# ---- parameters ---------------------------------------------------------------------------------

AZD_OWN_VARIABLES = frozenset({"AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_PRINCIPAL_ID"})
"""Variables azd sets in every environment itself (Learn: azd environment variables)."""

_SUBSTITUTION = re.compile(r"^\$\{(?P<name>[A-Z][A-Z0-9_]*)(?:=(?P<default>[^}]*))?\}$")


def decorator_argument(definition: dict[str, Any], kind: str) -> Any:
    for item in definition.get("decorators", []):
        if item["type"] == kind:
            return item["argument"]
    return None


def is_secure(definition: dict[str, Any]) -> bool:
    """A ``@secure()`` parameter: ARM neither logs nor returns its value."""
    return any(item["type"] == "secure" for item in definition.get("decorators", []))


def main_parameter_mapping() -> dict[str, tuple[str, str | None]]:
    """main.parameters.json: Bicep parameter -> (azd variable, default in the substitution)."""
    data = json.loads((INFRA / "main.parameters.json").read_text(encoding="utf-8"))
    mapping: dict[str, tuple[str, str | None]] = {}
    for name, entry in data["parameters"].items():
        match = _SUBSTITUTION.match(str(entry["value"]))
        assert match, f"{name}: not a ${{VAR}} or ${{VAR=default}} substitution"
        mapping[name] = (match["name"], match["default"])
    return mapping


def typed(definition: dict[str, Any], raw: Any) -> Any:
    """A value for a Bicep parameter of ``definition``'s type (strings from azd are converted)."""
    kind = definition["type"]
    if kind == "int":
        return int(raw)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        assert raw in ("true", "false"), raw
        return raw == "true"
    return raw


def parameter_violations(definition: dict[str, Any], value: Any) -> list[str]:
    """What Bicep would reject of ``value`` for the parameter (type, @allowed, @min/@maxValue)."""
    problems = []
    kind = definition["type"]
    python_type = {"int": int, "bool": bool, "string": str, "object": dict, "array": list}[kind]
    if not isinstance(value, python_type) or (kind == "int" and isinstance(value, bool)):
        return [f"{value!r} is not a Bicep {kind}"]
    number = value if isinstance(value, int) else 0
    allowed = decorator_argument(definition, "allowed")
    if allowed is not None and value not in allowed:
        problems.append(f"{value!r} not in @allowed {allowed}")
    low = decorator_argument(definition, "min_value")
    if low is not None and number < int_literal(low):
        problems.append(f"{value!r} below @minValue {int_literal(low)}")
    high = decorator_argument(definition, "max_value")
    if high is not None and number > int_literal(high):
        problems.append(f"{value!r} above @maxValue {int_literal(high)}")
    return problems
