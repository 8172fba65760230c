"""`caractrl schema project|node`: a JSON Schema (draft 2020-12) of the manifest, made from the protobuf
descriptors, so that editors validate and complete YAML:

    caractrl schema project > project.schema.json
    # in web.yaml, for yaml-language-server:   # yaml-language-server: $schema=project.schema.json

How fields map:

* names are the camelCase JSON names; every object has `additionalProperties: false` (typos are caught);
* `map<string, string>` → an object of strings; `repeated` → an array; messages → `$defs` entries;
* `google.protobuf.Timestamp` → a `date-time` string; int64 → integer or decimal string (protobuf JSON);
  int32 → integer within 32 bits, narrowed when the comment gives a range such as `(1-65535)`; a file mode
  (`protojson.FILE_MODE_FIELDS`) → an integer or a string of digits, octal when written with a leading zero
  (`0400`, `0o400`, "0400"), as the server reads it;
* descriptions are the proto comments, read from the generated `.pyi` stubs (mypy-protobuf keeps them);
  a string field whose comment is just a list of values (`"Ready" or "NotReady".`,
  `NoSchedule, PreferNoSchedule or NoExecute.`) becomes an `enum` of those values;
* required: `apiVersion`, `kind`, `metadata` (with `name`), plus the fields the server always requires
  (`spec.services[].name` and `.image` for projects, and the like: each kind's `SchemaBits` in the CLI's kind
  table, `cli/kinds/`, which also says which kinds `caractrl schema` offers).
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from importlib import resources
from typing import Any

import click
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from caravanserai import meta
from caravanserai.cli.kinds import VIEWS, plurals, view_of
from caravanserai.cli.resources import CUSTOM_KINDS, resolve_kind
from caravanserai.text.protojson import FILE_MODE_FIELDS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_KINDS = plurals(lambda view: view.schema is not None)
_STUBS = ("resources_pb2.pyi", "backups_pb2.pyi")
_ITEM = r'(?:"[^"]*"|[A-Z][A-Za-z]*)(?: \([^)]*\))?'
_ENUM = re.compile(rf"^{_ITEM}(?:(?:, | or |, or ){_ITEM})+\.?$")
_VALUE = re.compile(r'"([^"]*)"|([A-Z][A-Za-z]*)(?: \([^)]*\))?')
_RANGE = re.compile(r"\((\d+)-(\d+)\)")

# Fields the server always requires (by message name and camelCase field name), beyond apiVersion/kind/metadata:
# those of every kind, then each kind's own (applied by message name to every schema, as a message name means the
# same message in every kind).
REQUIRED: dict[str, tuple[str, ...]] = {
    "ObjectMeta": ("name",),
    "Condition": ("type", "status"),
    **{name: fields for view in VIEWS.values() if view.schema for name, fields in view.schema.required.items()},
}
_NON_EMPTY = frozenset(pair for view in VIEWS.values() if view.schema for pair in view.schema.non_empty)
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
}
_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED64,
}


# ---- comments from the stubs ----------------------------------------------------------------------------------


@cache
def proto_docs() -> dict[str, str]:
    """Comments of the v1 messages and fields, keyed `Message` and `Message.field` ({} without the stubs)."""
    docs: dict[str, str] = {}
    for stub in _STUBS:
        try:
            text = resources.files("caravanserai.api.v1").joinpath(stub).read_text(encoding="utf-8")
        except (OSError, ModuleNotFoundError):
            continue
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef):
                _class_docs(node, docs)
    return docs


def _class_docs(cls: ast.ClassDef, docs: dict[str, str]) -> None:
    doc = ast.get_docstring(cls)
    if doc:  # the last paragraph: comments above it are section banners of the .proto file
        docs[cls.name] = doc.split("\n\n")[-1].strip()
    body = cls.body
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and index + 1 < len(body):
            after = body[index + 1]
            if (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[f"{cls.name}.{stmt.target.id}"] = after.value.value.strip()
        elif isinstance(stmt, ast.FunctionDef) and ast.get_docstring(stmt):
            docs[f"{cls.name}.{stmt.name}"] = ast.get_docstring(stmt) or ""


def documented_values(doc: str) -> list[str] | None:
    """The values a comment such as `"Always" (default), "OnFailure" or "Never".` lists; None for prose."""
    text = " ".join(doc.split())
    if " or " not in text or not _ENUM.match(text):
        return None
    return [quoted if quoted or not word else word for quoted, word in _VALUE.findall(text)]


# ---- descriptors to schema ----------------------------------------------------------------------------------


def _integer(field: FieldDescriptor, doc: str) -> dict[str, Any]:
    if field.full_name in FILE_MODE_FIELDS:  # octal as written (0400), so an editor reading YAML 1.2 sees 400
        return {"type": ["integer", "string"], "minimum": 0, "maximum": 7777, "pattern": "^(0o?[0-7]+|[0-9]+)$"}
    if field.type in _INT64:
        return {"type": ["integer", "string"], "pattern": "^-?[0-9]+$"}
    low, high = _INT_RANGES[field.type]
    bounds = _RANGE.search(doc)
    if bounds:
        low, high = max(low, int(bounds.group(1))), min(high, int(bounds.group(2)))
    return {"type": "integer", "minimum": low, "maximum": high}


def _scalar(field: FieldDescriptor, doc: str) -> dict[str, Any]:
    if field.type == FieldDescriptor.TYPE_STRING:
        values = documented_values(doc)
        return {"type": "string", "enum": values} if values else {"type": "string"}
    if field.type == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if field.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return {"type": "number"}
    if field.type == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        return {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    return _integer(field, doc)


class SchemaBuilder:
    """Builds `$defs` for a message and everything it reaches."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.docs = proto_docs()

    def ref(self, descriptor: Descriptor) -> dict[str, Any]:
        if descriptor.full_name == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        if descriptor.name not in self.defs:
            self.defs[descriptor.name] = {}  # placeholder: recursion stops here
            self.defs[descriptor.name] = self.message(descriptor)
        return {"$ref": f"#/$defs/{descriptor.name}"}

    def message(self, descriptor: Descriptor) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object"}
        if descriptor.name in self.docs:
            schema["description"] = self.docs[descriptor.name]
        schema["properties"] = {f.json_name: self.field(descriptor, f) for f in descriptor.fields}
        required = list(REQUIRED.get(descriptor.name, ()))
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema

    def field(self, owner: Descriptor, field: FieldDescriptor) -> dict[str, Any]:
        doc = self.docs.get(f"{owner.name}.{field.name}", "")
        message = field.message_type
        schema: dict[str, Any]
        if message is not None and message.GetOptions().map_entry:
            schema = {
                "type": "object",
                "additionalProperties": self.single(message, message.fields_by_name["value"], ""),
            }
        elif field.is_repeated:
            schema = {"type": "array", "items": self.single(owner, field, doc)}
            if (owner.name, field.json_name) in _NON_EMPTY:
                schema["minItems"] = 1
        else:
            schema = self.single(owner, field, doc)
        return {"description": doc, **schema} if doc else schema

    def single(self, owner: Descriptor, field: FieldDescriptor, doc: str) -> dict[str, Any]:
        if field.message_type is not None:
            return self.ref(field.message_type)
        return _scalar(field, doc)


def kind_schema(resource: str) -> dict[str, Any]:
    """The JSON Schema of a manifest of a built-in `resource` ("projects" or "nodes")."""
    return schema_of(meta.KINDS[resource])


def schema_of(kind: meta.Kind) -> dict[str, Any]:
    """The JSON Schema of a manifest of `kind` (built-in, or custom with its `<group>/v1` apiVersion)."""
    builder = SchemaBuilder()
    builder.ref(kind.cls.DESCRIPTOR)
    top = builder.defs[kind.kind]
    top["properties"]["apiVersion"] = {"description": "API group and version.", "const": kind.api_version}
    top["properties"]["kind"] = {"description": "Kind of the object.", "const": kind.kind}
    bits = view_of(kind).schema
    top["required"] = ["apiVersion", "kind", "metadata", *(bits.top_required if bits else ())]
    return {
        "$schema": DRAFT,
        "$id": f"{kind.kind.lower()}.json",
        "title": f"Caravanserai {kind.kind} manifest ({kind.api_version})",
        "$ref": f"#/$defs/{kind.kind}",
        "$defs": dict(sorted(builder.defs.items())),
    }


@click.command("schema")
@click.argument("kind", metavar="KIND")
def schema(kind: str) -> None:
    """Print the JSON Schema (draft 2020-12) of manifests of KIND: project, node, or a custom kind (by plural,
    kind or short name)."""
    resolved = resolve_kind(kind, allowed=(*SCHEMA_KINDS, CUSTOM_KINDS))
    click.echo(json.dumps(schema_of(resolved), indent=2, ensure_ascii=False))


__all__ = [
    "DRAFT",
    "REQUIRED",
    "SCHEMA_KINDS",
    "SchemaBuilder",
    "documented_values",
    "kind_schema",
    "proto_docs",
    "schema",
    "schema_of",
]
