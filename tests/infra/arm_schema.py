"""Check every resource property in infra/ against the published schema of its type and version.

No Bicep CLI runs here, so the Bicep's property paths are held against Microsoft's own schema
metadata instead: the azure-mgmt-* models of the exact API version (dumped by
``sdk_schema_dump.py`` under the infra venv) and, where no such package exists, checked-in
extracts of the ARM REST specification (``schemas/*.json``, each naming its source). Both are
turned into one tree of nodes::

    {"type": "object" | "array" | "string" | "integer" | "number" | "boolean" | "any",
     "properties": {name: node}, "additional": node, "items": node,
     "readonly": bool, "enum": [...], "discriminator": {"property": name, "map": {value: node}},
     "$ref": definition}

and every resource body is walked along it. A violation is an unknown property (the schema
neither names it nor allows additional ones), a read-only property, a value outside an enum, or
a literal of the wrong JSON type. Values that are expressions are followed where the file says
what they can be: a parameter's ``@allowed`` values and default, a variable's value, both
branches of a conditional, each object of a ``union()``; anything computed at deployment time
(outputs of other resources, function results) is not a literal and is not judged.

pycep writes a string literal and a symbol the same way (``'FC1'`` and ``planName`` both become
a bare string): a string equal to a declared parameter, variable, resource, module or loop
variable name is taken as that symbol.

This module only reads: it never changes infra/ and never imports the app.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parent / "schemas"
SOURCES = SCHEMAS / "sources.json"

# Keys of a resource body that are Bicep's own, not properties of the ARM request body.
BICEP_KEYWORDS = frozenset({"name", "parent", "scope", "dependsOn"})
# Resource types whose schema depends on the (literal) resource name: sources.json keys them
# "<type>@<version>#<name>".
NAMED_SCHEMAS = frozenset({"Microsoft.Web/sites/config"})

Node = dict[str, Any]


def sources() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(SOURCES.read_text(encoding="utf-8"))["resources"]
    return data


class RestSpec:
    """Definitions of checked-in REST spec extracts, converted to nodes on demand."""

    def __init__(self) -> None:
        self._documents: dict[str, dict[str, Any]] = {}
        self._loaded: set[str] = set()
        self.definitions: dict[str, Node] = {}

    def load(self, file_name: str) -> None:
        if file_name not in self._loaded:
            extract = json.loads((SCHEMAS / file_name).read_text(encoding="utf-8"))
            for path, document in extract["documents"].items():
                known = self._documents.setdefault(path, {**document, "definitions": {}})
                if known.get("commit") != document.get("commit"):
                    raise ValueError(f"{path} is extracted at two commits ({file_name})")
                known["definitions"].update(document["definitions"])
            self._loaded.add(file_name)

    def key(self, document: str, ref: str) -> str:
        file_part, _, fragment = ref.partition("#")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(document), file_part))
        return f"{target if file_part else document}#{fragment}"

    def lookup(self, key: str) -> Node:
        """The node of ``<document path>#/definitions/<name>``."""
        if key in self.definitions:
            return self.definitions[key]
        document, _, fragment = key.partition("#")
        name = fragment.rsplit("/", 1)[-1]
        try:
            schema = self._documents[document]["definitions"][name]
        except KeyError:
            raise KeyError(f"{key} is not in the checked-in REST spec extracts") from None
        node: Node = {}
        self.definitions[key] = node  # before converting: definitions may be recursive
        node.update(self._convert(schema, document))
        return node

    def _convert(self, schema: dict[str, Any], document: str) -> Node:
        if "$ref" in schema:
            node: Node = {"$ref": self.key(document, schema["$ref"])}
            if schema.get("readOnly"):
                node["readonly"] = True
            return node
        properties: dict[str, Node] = {}
        additional: Node | None = None
        for parent in schema.get("allOf", []):
            inherited = resolve(self._convert(parent, document), self)
            properties.update(inherited.get("properties", {}))
            additional = inherited.get("additional", additional)
        for name, child in schema.get("properties", {}).items():
            properties[name] = self._convert(child, document)
        extra = schema.get("additionalProperties")
        if extra is True:
            additional = {"type": "any"}
        elif isinstance(extra, dict):
            additional = self._convert(extra, document)
        node = {"type": schema.get("type", "object" if properties or additional else "any")}
        if properties or node["type"] == "object":
            node["type"] = "object"
            node["properties"] = properties
        if additional is not None:
            node["additional"] = additional
        if "items" in schema:
            node["items"] = self._convert(schema["items"], document)
        if "enum" in schema:
            node["enum"] = list(schema["enum"])
        if schema.get("readOnly"):
            node["readonly"] = True
        return node


class Schemas:
    """The root node of every resource type and API version, from the SDK dump and the extracts."""

    def __init__(self, sdk_dump: dict[str, Any]) -> None:
        self.sdk_definitions: dict[str, Node] = sdk_dump["definitions"]
        self.sdk_resources: dict[str, Node] = sdk_dump["resources"]
        self.rest = RestSpec()
        self.roots: dict[str, Node] = {}
        for key, entry in sources().items():
            if "rest" in entry:
                self.rest.load(entry["rest"])
                self.roots[key] = {"$ref": "rest:" + entry["definition"]}
            elif key in self.sdk_resources:
                self.roots[key] = {"$ref": "sdk:" + self.sdk_resources[key]["$ref"]}

    def lookup(self, ref: str) -> Node:
        kind, _, key = ref.partition(":")
        if kind == "sdk":
            return self.sdk_definitions[key]
        if kind == "rest":
            return self.rest.lookup(key)
        # refs inside SDK definitions are bare definition names; inside REST ones, "file#/..."
        if "#" in ref:
            return self.rest.lookup(ref)
        return self.sdk_definitions[ref]


def resolve(node: Node, schemas: Schemas | RestSpec) -> Node:
    """Follow ``$ref`` (keeping a ``readonly`` set on the referencing property)."""
    seen = 0
    readonly = bool(node.get("readonly"))
    while "$ref" in node:
        ref = node["$ref"]
        node = schemas.lookup(ref)
        seen += 1
        if seen > 50:
            raise RuntimeError(f"reference cycle at {ref}")
    if readonly and not node.get("readonly"):
        node = {**node, "readonly": True}
    return node


@dataclass(frozen=True)
class Violation:
    file: str
    resource: str
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.resource}.{self.path}: {self.problem}"


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] == "'":
        return key[1:-1]
    return key


def _body(resource: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = resource["config"]
    while "config" in config and ("condition" in config or "loop_type" in config):
        config = config["config"]
    return config


def _decorator(definition: dict[str, Any], kind: str) -> Any:
    for item in definition.get("decorators", []):
        if item["type"] == kind:
            return item["argument"]
    return None


def _loop_variables(tree: Any) -> Iterator[str]:
    """Item and index names of every ``[for ...]`` (resource or property loops)."""
    if isinstance(tree, dict):
        loop = tree.get("loop_type")
        if isinstance(loop, dict):
            detail = loop.get("detail", {})
            yield from (detail[key] for key in ("item_name", "index_name") if detail.get(key))
        for child in tree.values():
            yield from _loop_variables(child)
    elif isinstance(tree, list):
        for child in tree:
            yield from _loop_variables(child)


class _Walker:
    def __init__(self, document: dict[str, Any], schemas: Schemas, file: str) -> None:
        self.document = document
        self.schemas = schemas
        self.file = file
        self.parameters: dict[str, Any] = document.get("parameters", {})
        self.variables: dict[str, Any] = document.get("variables", {})
        self.symbols = (
            set(self.parameters)
            | set(self.variables)
            | set(document.get("resources", {}))
            | set(document.get("modules", {}))
        )
        self.symbols |= set(_loop_variables(document.get("resources", {})))
        self.violations: list[Violation] = []
        self._resource = ""
        self._expanding: set[str] = set()

    def resource(self, name: str, resource: dict[str, Any]) -> None:
        if resource.get("existing"):
            return  # a reference to a deployed resource: no request body is sent
        self._resource = name
        body = _body(resource)
        key = f"{resource['type']}@{resource['api_version']}"
        if resource["type"] in NAMED_SCHEMAS:
            key = f"{key}#{body.get('name')}"
        root = self.schemas.roots.get(key)
        if root is None:
            self._violate("", f"no published schema registered for {key} (tests/infra/schemas)")
            return
        node = resolve(root, self.schemas)
        for prop, value in body.items():
            if prop in BICEP_KEYWORDS:
                continue
            self._property(node, prop, value, prop)

    def _violate(self, path: str, problem: str) -> None:
        self.violations.append(Violation(self.file, self._resource, path, problem))

    def _property(self, parent: Node, key: str, value: Any, path: str) -> None:
        child = parent.get("properties", {}).get(key)
        if child is None:
            child = parent.get("additional")
            if child is None:
                self._violate(path, "unknown property: not in the published schema")
                return
        if child.get("readonly"):
            self._violate(path, "read-only property: the service sets it")
            return
        self._value(child, value, path)

    def _value(self, node: Node, value: Any, path: str) -> None:
        try:
            node = resolve(node, self.schemas)
        except KeyError as missing:
            self._violate(path, f"schema incomplete: {missing}")
            return
        if node.get("readonly"):
            self._violate(path, "read-only property: the service sets it")
            return
        kind = node.get("type", "any")
        if kind == "any" or value is None:
            return
        if isinstance(value, dict) and "loop_type" in value and "config" in value:
            if kind != "array":  # a property-level [for ...]: an array of its body
                self._violate(path, f"an array where the schema expects {kind}")
                return
            self._value(node.get("items", {"type": "any"}), value["config"], f"{path}[]")
        elif isinstance(value, dict) and len(value) == 1 and "operator" in value:
            self._operator(node, value["operator"], path)
        elif isinstance(value, dict) and len(value) == 1 and "function" in value:
            function = value["function"]
            if function.get("type") == "union":
                for argument in function.get("parameters", {}).values():
                    self._value(node, argument, path)
        elif isinstance(value, dict):
            self._object(node, value, path)
        elif isinstance(value, list):
            if kind != "array":
                self._violate(path, f"an array where the schema expects {kind}")
                return
            for index, item in enumerate(value):
                self._value(node.get("items", {"type": "any"}), item, f"{path}[{index}]")
        elif isinstance(value, str) and value in self.symbols:
            self._symbol(node, value, path)
        else:
            self._literal(node, value, path)

    def _operator(self, node: Node, operator: dict[str, Any], path: str) -> None:
        operands = operator.get("operands", {})
        if operator.get("type") == "conditional":
            self._value(node, operands.get("true_value"), path)
            self._value(node, operands.get("false_value"), path)
        elif operator.get("type") == "minus" and isinstance(operands.get("integer_value"), int):
            self._literal(node, -operands["integer_value"], path)
        # other operators (comparisons, logic, property access) compute a value at deployment

    def _symbol(self, node: Node, name: str, path: str) -> None:
        if name in self._expanding:
            return
        self._expanding.add(name)
        try:
            if name in self.variables:
                self._value(node, self.variables[name]["value"], path)
            elif name in self.parameters:
                definition = self.parameters[name]
                allowed = _decorator(definition, "allowed")
                for candidate in allowed or []:
                    self._value(node, candidate, f"{path} (@allowed {name})")
                if "default" in definition:
                    self._value(node, definition["default"], f"{path} (default of {name})")
            # resources, modules, loop variables: values known only at deployment
        finally:
            self._expanding.discard(name)

    def _object(self, node: Node, value: dict[str, Any], path: str) -> None:
        kind = node.get("type", "any")
        if kind != "object":
            self._violate(path, f"an object where the schema expects {kind}")
            return
        discriminator = node.get("discriminator")
        if discriminator:
            keys = {_unquote(k): v for k, v in value.items()}
            chosen = keys.get(discriminator["property"])
            if isinstance(chosen, str) and chosen not in self.symbols:
                if chosen not in discriminator["map"]:
                    self._violate(
                        f"{path}.{discriminator['property']}",
                        f"{chosen!r} is not one of {sorted(discriminator['map'])}",
                    )
                    return
                node = resolve(discriminator["map"][chosen], self.schemas)
        for key, item in value.items():
            name = _unquote(key)
            self._property(node, name, item, f"{path}.{name}")

    def _literal(self, node: Node, value: Any, path: str) -> None:
        kind = node.get("type", "any")
        expected = {
            "string": (str,),
            "integer": (int,),
            "number": (int, float),
            "boolean": (bool,),
            "object": (dict,),
        }.get(kind)
        is_bool = isinstance(value, bool)
        if expected and (not isinstance(value, expected) or (is_bool and kind != "boolean")):
            self._violate(path, f"{value!r} where the schema expects {kind}")
            return
        enum = node.get("enum")
        if enum and isinstance(value, str) and "${" in value:
            return  # interpolated at deployment
        if enum and value not in enum:
            self._violate(path, f"{value!r} is not one of {enum}")


def check_document(document: dict[str, Any], schemas: Schemas, file: str) -> list[Violation]:
    walker = _Walker(document, schemas, file)
    for name, resource in document.get("resources", {}).items():
        walker.resource(name, resource)
    return walker.violations


def resource_types(document: dict[str, Any]) -> Iterator[str]:
    """``type@version`` of every resource the document deploys (not ``existing`` ones)."""
    for resource in document.get("resources", {}).values():
        if resource.get("existing"):
            continue
        key = f"{resource['type']}@{resource['api_version']}"
        if resource["type"] in NAMED_SCHEMAS:
            key = f"{key}#{_body(resource).get('name')}"
        yield key
