"""Manifests: YAML or JSON documents in, v1 objects out, and back. Reading files, directories and stdin, and
loading them a document at a time, is `caravanserai.text.manifestfiles`.

    objects = load_manifests(text, source="web.yaml")
    print(dump_yaml(objects))

Guarantees:

* **One parser.** YAML 1.2 (ruamel.yaml round-trip mode) reads both YAML and JSON; `---` separates documents,
  empty documents are skipped, and a document that is a list, or a `kind: …List` mapping with `items` (as
  `kubectl get -o yaml` writes), contributes each item (so `dump_json` output of several objects loads again).
* **Kinds.** Each document needs `apiVersion: caravanserai/v1` and a `kind` of Project, Node, Lease or Event;
  fields use the camelCase protobuf JSON names (the proto names are accepted too).
* **Strict and precise.** Unknown fields, wrong types, out-of-range integers and bad timestamps are all
  reported in one `caravanserai.errors.Invalid`, each as `<source>, document <n>, line <l>: <field path>: <problem>`,
  where line `l` is the line of the field at fault (of its deepest part the document has; where the document starts
  when it has none of it), e.g. `web.yaml, document 2, line 10: spec.services[0].imag: unknown field (did you mean
  "image"?)`.
* **YAML pitfalls handled.** Unquoted timestamps become RFC 3339 strings; numbers, booleans and timestamps
  in string maps (labels `tier: 1`, requests `cpu: 0.5`) keep their source text (`010` stays "010");
  int64 values may be strings or numbers. A raw U+0085, which the YAML reader would turn into a line break even
  inside quotes, is refused with its place (output writes it as the escape `\\N`).
* **Capped.** Nesting deeper than `MAX_DEPTH` and documents that expand (through aliases) to more than
  `MAX_VALUES` values (all items of a list document together) are refused, so hostile input cannot exhaust
  memory or time. Whatever the text, the result is objects or `Invalid`: no other exception escapes.
* **Output** (`to_dict`, `dump_yaml`, `dump_json`) uses camelCase, omits empty fields and writes int64 as
  numbers; loading it again gives equal objects.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.representer import RoundTripRepresenter

from caravanserai import meta, v1
from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.protojson import describe, from_data, to_data

Resource: TypeAlias = (
    v1.Project
    | v1.Node
    | v1.Lease
    | v1.Event
    | v1.Secret
    | v1.Config
    | v1.BackupRepository
    | v1.AdmissionPolicy
    | v1.NodeGroup
    | v1.ProjectSet
)

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted in a document."""

MAX_VALUES = 500_000
"""Most values (scalars, mappings, lists, counted after expanding aliases) accepted in one document."""


def _kind_names() -> str:
    """The kinds a manifest may hold: the built-in ones, then custom kinds known to this process."""
    return ", ".join(k.kind for k in sorted(meta.registered(), key=lambda k: (k.custom, k.kind)))


# ---- reading YAML -------------------------------------------------------------------------------------------


class _Int(int):
    """A YAML integer that remembers how it was written (see `caravanserai.text.protojson`)."""

    source_text = ""


class _Float(float):
    """A YAML float that remembers how it was written."""

    source_text = ""


class _Time(str):
    """A YAML timestamp: the text as written, plus `rfc3339`, its RFC 3339 form in UTC."""

    rfc3339 = ""


def _construct_int(constructor: RoundTripConstructor, node: Any) -> _Int:
    try:
        value = _Int(RoundTripConstructor.construct_yaml_int(constructor, node))
    except ValueError:  # `!!int abc`, or more digits than Python converts (4300): refused with the place
        problem = f"cannot read {_shown(node.value)} as an integer (at most 4300 digits)"
        raise ConstructorError(None, None, problem, node.start_mark) from None
    value.source_text = node.value
    return value


def _construct_float(constructor: RoundTripConstructor, node: Any) -> _Float:
    value = _Float(RoundTripConstructor.construct_yaml_float(constructor, node))
    value.source_text = node.value
    return value


def _construct_time(constructor: RoundTripConstructor, node: Any) -> _Time:
    value = _Time(node.value)
    stamp = Timestamp()
    try:
        stamp.FromJsonString(node.value)
    except ValueError:  # YAML-only forms: a date, a space or 't' separator, "-5" offsets, no offset (UTC)
        try:
            when = RoundTripConstructor.construct_yaml_timestamp(constructor, node)
            stamp.FromDatetime(when if isinstance(when, dt.datetime) else _midnight(when))
        except (ValueError, OverflowError):  # no time (month 13), or none in UTC (year 1 at +05:00): a string
            return value
    value.rfc3339 = stamp.ToJsonString()
    return value


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


class _Constructor(RoundTripConstructor):
    """Round-trip constructor whose numbers and timestamps remember their source text."""


_Constructor.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _construct_time)


def _documents(text: str, first_line: int) -> tuple[list[Any], FieldViolation | None]:
    """Every document of `text` up to the first syntax error (None for empty ones), and that error. Line numbers
    in errors count from `first_line` (0: the text is a whole file)."""
    next_line = text.find("\x85")
    if next_line >= 0:  # ruamel reads U+0085 as a line break even inside quotes: the string would silently change
        line = first_line + text.count("\n", 0, next_line) + 1
        column = next_line - text.rfind("\n", 0, next_line)
        problem = "U+0085 (next line) is read as a line break; write it as \\N or \\u0085 in a double-quoted string"
        return [], FieldViolation("", f"line {line}, column {column}: invalid YAML: {problem}")
    yaml = YAML(typ="rt")
    yaml.Constructor = _Constructor
    yaml.max_depth = MAX_DEPTH
    documents: list[Any] = []
    try:
        for document in yaml.load_all(text):
            documents.append(document)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        mark = getattr(exc, "problem_mark", None) if isinstance(exc, MarkedYAMLError) else None
        where = f"line {first_line + mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return documents, FieldViolation("", f"{where}invalid YAML: {problem}")
    except Exception as exc:  # noqa: BLE001 - ruamel's constructors raise plain Python errors on hostile input
        # such as `!!float abc`, `!!bool maybe`, `!!int 0x`, `!!set x` or a list holding a mapping used as a key
        return documents, FieldViolation("", f"invalid YAML: cannot construct a value: {str(exc)[:200]}")
    return documents, None


# ---- from documents to objects ------------------------------------------------------------------------------


def _resource(data: object) -> Resource:
    """The object a parsed document describes; raises `Invalid` listing the problems of the document."""
    if not isinstance(data, Mapping):
        raise Invalid.of([FieldViolation("", f"expected a mapping with apiVersion and kind, got {describe(data)}")])
    violations = []
    api_version, kind = data.get("apiVersion"), data.get("kind")
    try:
        found: meta.Kind | None = meta.kind_named(kind) if isinstance(kind, str) else None
    except KeyError:
        found = None
    expected = found.api_version if found is not None else v1.API_VERSION
    if api_version is None:
        violations.append(FieldViolation("apiVersion", f"is required ({expected})"))
    elif api_version != expected:
        violations.append(FieldViolation("apiVersion", f"must be {expected}, not {_shown(api_version)}"))
    if found is None:
        kinds = _kind_names()
        problem = f"unknown kind {_shown(kind)}: expected one of {kinds}" if kind is not None else ""
        violations.append(FieldViolation("kind", problem or f"is required (one of {kinds})"))
    if violations or found is None:
        raise Invalid.of(violations)
    obj: Resource = from_data(data, found.cls, max_values=MAX_VALUES)
    return obj


def _shown(value: object) -> str:
    return json.dumps(value[:64]) if isinstance(value, str) else describe(value)


def _within(document: object, limit: int) -> bool:
    """Whether `document` holds at most `limit` values (keys, scalars, mappings, lists), counting each use of an
    alias; stops counting at the limit, so a recursive or exponential alias structure costs `limit` steps."""
    pending, count = [document], 0
    while pending:
        item = pending.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _elements(document: object) -> list[Any] | None:
    """The objects of a document that holds several: a list, or a `kind: …List` mapping with `items`."""
    if isinstance(document, list):
        return document
    if isinstance(document, Mapping) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
        return items if isinstance(items, list) else None
    return None


@dataclass
class Parsed:
    """What `parse_manifests` found: the objects, and one line per problem (`<origin>: <problem>`) with its
    violation."""

    objects: list[Resource] = field(default_factory=list)
    trees: list[object] = field(default_factory=list)  # the loaded YAML of each object, for `field_line`
    problems: list[str] = field(default_factory=list)
    violations: list[FieldViolation] = field(default_factory=list)


def _line_of(node: object, first_line: int) -> str:
    """`, line L` (L from 1) where a loaded YAML mapping or sequence starts, or "" for a scalar or nothing."""
    position = getattr(node, "lc", None)
    if position is None or getattr(position, "line", None) is None:
        return ""
    return f", line {first_line + position.line + 1}"


_SEGMENT = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def field_line(node: object, path: str, first_line: int = 0) -> str:
    """`, line L` of the deepest part of the field `path` (`spec.services[0].imag`, `metadata.labels["a b"]`)
    found in the loaded document `node`: the line of the bad field itself, not of the document; `_line_of(node)`
    when not even its first part is found."""
    found = ""
    for match in _SEGMENT.finditer(path):
        name, index, quoted = match.groups()
        lc = getattr(node, "lc", None)
        if index is not None and isinstance(node, list) and int(index) < len(node) and lc is not None:
            line, node = lc.item(int(index))[0], node[int(index)]
        elif isinstance(node, Mapping) and lc is not None:
            key = _key_in(node, json.loads(quoted) if quoted else name)
            position = None if key is None else lc.key(key)
            if position is None:  # not there, or there only through a `<<:` merge key (no line of its own)
                break
            line, node = position[0], node[key]
        else:
            break
        found = f", line {first_line + line + 1}"
    return found or _line_of(node, first_line)


def _key_in(mapping: Mapping[Any, Any], name: str) -> Any:
    """The key of `mapping` that the path part `name` stands for: itself, or its snake_case or any-case form."""
    if name in mapping:
        return name
    wanted = name.replace("_", "").lower()
    return next((k for k in mapping if isinstance(k, str) and k.replace("_", "").lower() == wanted), None)


def parse_manifests(text: str, *, source: str, first_document: int = 1, first_line: int = 0) -> Parsed:
    """The objects and problems of every document in `text`. Problems name `<source>, document <n>, line <l>` (n
    counting
    from `first_document`) and lines counting from `first_line`, for a text cut out of a larger file."""
    parsed = Parsed()
    documents, syntax_error = _documents(text, first_line)
    for number, document in enumerate(documents, start=first_document):
        place = f"{source}, document {number}{_line_of(document, first_line)}"
        elements = _elements(document)
        if elements is not None and not _within(elements, MAX_VALUES):  # one budget for all items together
            too_large = FieldViolation("", f"too large: more than {MAX_VALUES} values (an alias counts each use)")
            parsed.problems.append(f"{place}: {too_large.description}")
            parsed.violations.append(too_large)
            continue
        base = f"{source}, document {number}"
        items = [(base, document)]
        if elements is not None:
            items = [(f"{base}, item {i}", element) for i, element in enumerate(elements, start=1)]
        for where, data in items:
            if data is None:
                continue
            try:
                parsed.objects.append(_resource(data))
                parsed.trees.append(data)
            except Invalid as exc:
                parsed.problems.extend(
                    f"{where}{field_line(data, v.field, first_line)}: {v}"
                    if v.field
                    else f"{where}{_line_of(data, first_line)}: {v.description}"
                    for v in exc.violations
                )
                parsed.violations.extend(exc.violations)
    if syntax_error is not None:
        parsed.problems.append(f"{source}, document {first_document + len(documents)}: {syntax_error.description}")
        parsed.violations.append(syntax_error)
    return parsed


def load_manifests(text: str, *, source: str = "<stdin>") -> list[Resource]:
    """The objects of every document in `text`, in order. `source` names the text in error messages.

    Raises `Invalid` listing every problem of every document (its message joins them with "; ").
    """
    parsed = parse_manifests(text, source=source)
    if parsed.problems:
        raise Invalid("; ".join(parsed.problems), parsed.violations)
    return parsed.objects


# ---- output -------------------------------------------------------------------------------------------------


def to_dict(obj: Message) -> dict[str, Any]:
    """`obj` as protobuf JSON with camelCase keys, int64 as numbers, times in RFC 3339, empty fields omitted."""
    return to_data(obj)


class _Representer(RoundTripRepresenter):
    """Round-trip representer that double-quotes strings holding U+0085: written raw, the reader would take it for
    a line break (see `_documents`), so it is written as the escape \\N."""


def _represent_str(representer: RoundTripRepresenter, data: str) -> Any:
    style = '"' if "\x85" in data else None
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Representer.add_representer(str, _represent_str)


def dump_yaml(objs: Iterable[Message]) -> str:
    """YAML for `objs`, one document each, separated by `---`."""
    yaml = YAML(typ="rt")
    yaml.Representer = _Representer
    yaml.default_flow_style = False
    yaml.width = 4096  # no folding of long strings
    out = io.StringIO()
    yaml.dump_all([to_dict(obj) for obj in objs], out)
    return out.getvalue()


def dump_json(objs: Sequence[Message]) -> str:
    """JSON for `objs`: one object when there is exactly one, otherwise a list; indented, newline-terminated."""
    documents = [to_dict(obj) for obj in objs]
    data: Any = documents[0] if len(documents) == 1 else documents
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


__all__ = [
    "MAX_DEPTH",
    "MAX_VALUES",
    "Parsed",
    "Resource",
    "dump_json",
    "dump_yaml",
    "field_line",
    "load_manifests",
    "parse_manifests",
    "to_dict",
]
