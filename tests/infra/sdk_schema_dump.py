"""Dump the published schemas of the Bicep's resource types from the azure-mgmt-* Python models.

Runs under the infra venv (``.venv-infra``, requirements-infra.txt), never under the app's venv:
the management SDKs are test tools here, not app dependencies. ``tests/infra/test_arm_schema.py``
starts it as a subprocess and reads its JSON from stdout.

For every ``sdk`` entry of ``tests/infra/schemas/sources.json`` it imports the model class and
turns the generated serialization metadata into the schema tree ``tests/infra/arm_schema.py``
checks the Bicep against:

- ``_attribute_map``: the REST key path of every attribute (``properties.serverFarmId`` is the
  ``serverFarmId`` property of the ``properties`` object; ``\\.`` is a literal dot) and its type
  (``str``, ``[Model]``, ``{str}``, a model name ...); the key ``""`` (``additional_properties``)
  means the schema allows properties it does not name;
- ``_validation``: ``readonly`` attributes (the service ignores or rejects them in a PUT);
- the ``__init__`` annotations: an attribute typed ``Union[str, "_models.SomeEnum"]`` takes the
  values of that enum;
- ``_subtype_map``: polymorphic models, chosen by a discriminator property's value.

It also proves the models are the ones of the Bicep's API version: a multi-API package's models
live in a ``vYYYY_MM_DD`` folder named after it; a single-API package's operations module
defaults ``api-version`` to it (the ``operations`` entry names that module).

This module must never import the app, pycep or pytest (the infra venv has none of them).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

# ARM_SCHEMA_SOURCES: another mapping, for the test that shows a wrong version is refused.
SOURCES = Path(
    os.environ.get(
        "ARM_SCHEMA_SOURCES", Path(__file__).resolve().parent / "schemas" / "sources.json"
    )
)

_SCALARS = {
    "str": "string",
    "bool": "boolean",
    "int": "integer",
    "long": "integer",
    "float": "number",
    "decimal": "number",
    "iso-8601": "string",
    "rfc-1123": "string",
    "unix-time": "integer",
    "duration": "string",
    "date": "string",
    "time": "string",
    "bytearray": "string",
    "base64": "string",
    "object": "any",
}
_API_VERSION_DEFAULT = re.compile(r'api[-_]version"?\s*,\s*"(\d{4}-\d{2}-\d{2}(?:-preview)?)"')
_FOLDER_VERSION = re.compile(r"\.v(\d{4})_(\d{2})_(\d{2})(_preview)?\.")


def _split_key(key: str) -> list[str]:
    """``properties.a\\.b`` -> ``["properties", "a.b"]`` (msrest's flattening convention)."""
    parts = re.split(r"(?<!\\)\.", key)
    return [part.replace("\\.", ".") for part in parts]


class _Dumper:
    def __init__(self) -> None:
        self.definitions: dict[str, dict[str, Any]] = {}

    def type_node(self, type_name: str, models: Any) -> dict[str, Any]:
        if type_name.startswith("[") and type_name.endswith("]"):
            return {"type": "array", "items": self.type_node(type_name[1:-1], models)}
        if type_name.startswith("{") and type_name.endswith("}"):
            return {"type": "object", "additional": self.type_node(type_name[1:-1], models)}
        if type_name in _SCALARS:
            return {"type": _SCALARS[type_name]}
        return {"$ref": self.model(getattr(models, type_name))}

    def model(self, cls: type) -> str:
        """Register ``cls`` (and everything it references) and return its definition name."""
        name = f"{cls.__module__.rsplit('.', 1)[0]}.{cls.__qualname__}"
        if name in self.definitions:
            return name
        node: dict[str, Any] = {"type": "object", "properties": {}}
        self.definitions[name] = node
        # The package (``...models``) exports the models and their enums; ``_models_py3`` only
        # the models.
        models = importlib.import_module(cls.__module__.rsplit(".", 1)[0])
        attribute_map: dict[str, dict[str, str]] = getattr(cls, "_attribute_map", {})
        validation: dict[str, dict[str, Any]] = getattr(cls, "_validation", {})
        enums = self._enums(cls, models)
        for attr, spec in attribute_map.items():
            if spec["key"] == "":
                node["additional"] = {"type": "any"}
                continue
            path = _split_key(spec["key"])
            holder = node
            for part in path[:-1]:  # flattened: properties.x lives in the "properties" object
                holder = holder["properties"].setdefault(part, {"type": "object", "properties": {}})
            child = self.type_node(spec["type"], models)
            if validation.get(attr, {}).get("readonly"):
                child["readonly"] = True
            if attr in enums:
                child["enum"] = enums[attr]
            holder["properties"][path[-1]] = child
        subtypes: dict[str, dict[str, str]] = getattr(cls, "_subtype_map", None) or {}
        for attr, mapping in subtypes.items():
            key = _split_key(attribute_map[attr]["key"])[-1]
            node["discriminator"] = {
                "property": key,
                "map": {
                    value: {"$ref": self.model(getattr(models, sub))}
                    for value, sub in mapping.items()
                },
            }
        return name

    @staticmethod
    def _enums(cls: type, models: Any) -> dict[str, list[Any]]:
        """Attributes whose ``__init__`` annotation names an enum of the models module."""
        found: dict[str, list[Any]] = {}
        try:
            parameters = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
        except (TypeError, ValueError):
            return found
        for attr, parameter in parameters.items():
            annotation = parameter.annotation
            names = re.findall(r"_models\.(\w+)", str(annotation))
            if not names and isinstance(annotation, type) and issubclass(annotation, enum.Enum):
                names = [annotation.__name__]
            for enum_name in names:
                candidate = getattr(models, enum_name, None)
                if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
                    found[attr] = [member.value for member in candidate]
        return found


def _api_version_evidence(entry: dict[str, Any], version: str) -> str:
    """Why these models are the ones of ``version``; raises if they are not."""
    module_path = entry["sdk"].split(":")[0]
    folder = _FOLDER_VERSION.search(f".{module_path}.")
    if folder:
        found = f"{folder[1]}-{folder[2]}-{folder[3]}" + ("-preview" if folder[4] else "")
        if found != version:
            raise SystemExit(f"{entry['sdk']}: folder is for {found}, the Bicep uses {version}")
        return f"models folder {module_path}"
    operations = importlib.import_module(entry["operations"])
    prefix = entry.get("builder")
    if prefix:  # one module for every operation group: only this type's request builders count
        functions = [
            inspect.getsource(function)
            for name, function in inspect.getmembers(operations, inspect.isfunction)
            if name.startswith(prefix)
        ]
        source = "\n".join(functions)
    else:
        source = Path(typing.cast(str, operations.__file__)).read_text(encoding="utf-8")
    defaults = set(_API_VERSION_DEFAULT.findall(source))
    if defaults != {version}:
        where = f"{entry['operations']}{' ' + prefix + '*' if prefix else ''}"
        raise SystemExit(f"{where}: api-version defaults {defaults}, need {version}")
    where = f"{entry['operations']}{' ' + prefix + '*' if prefix else ''}"
    return f"{where} defaults api-version to {version}"


def main() -> None:
    sources: dict[str, dict[str, Any]] = json.loads(SOURCES.read_text(encoding="utf-8"))
    dumper = _Dumper()
    resources: dict[str, Any] = {}
    for key, entry in sorted(sources["resources"].items()):
        if "sdk" not in entry:
            continue
        version = key.rsplit("@", 1)[1].split("#")[0]
        module_name, _, class_name = entry["sdk"].partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        distribution = entry["package"]
        from importlib.metadata import version as installed_version

        resources[key] = {
            "$ref": dumper.model(cls),
            "source": f"{distribution}=={installed_version(distribution)} {entry['sdk']}",
            "evidence": _api_version_evidence(entry, version),
        }
    json.dump({"resources": resources, "definitions": dumper.definitions}, sys.stdout)


if __name__ == "__main__":
    main()
