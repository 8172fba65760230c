"""Plain data (as parsed from JSON or YAML) to protobuf messages and back, strictly and with field paths.

    project = from_data({"kind": "Project", "spec": {...}}, v1.Project)
    data = to_data(project)

`google.protobuf.json_format` does the final conversion; this module checks the data against the message
descriptor first, so that every problem is reported with its camelCase path (`spec.services[0].imag`) instead
of json_format's first error. Guarantees:

* **All problems at once.** `from_data` raises one `caravanserai.errors.Invalid` listing unknown fields (with a
  "did you mean" hint), fields given twice (camelCase and proto name), wrong types, out-of-range integers and
  bad timestamps.
* **Protobuf JSON rules.** Fields may use their camelCase or proto names; null leaves a field unset; integers
  (int64 too) may be integral numbers or decimal strings; enums are names or numbers; times are RFC 3339
  strings. Timestamp is the only well-known type with its special JSON form (the v1 resources use no other).
  Text must be valid Unicode: an unpaired surrogate (which a JSON escape such as "\\ud800" can make) is refused at
  its path.
* **Scalars in string maps** (labels, resource lists) are coerced to text: `true` → "true", and a number keeps
  the text it was written with when the parser recorded it in a `source_text` attribute (`010` stays "010").
  A string with an `rfc3339` attribute (a YAML timestamp) gives that value to Timestamp fields. An integer field
  written with a leading zero (`0400`) is refused as ambiguous (octal in YAML 1.1, decimal in 1.2): `0o400` or
  `256` say which — except in a file mode (`FILE_MODE_FIELDS`: `mode` of a volume or a tmpfs), where it is octal
  as everywhere file modes are written (`0400` is `0o400`, 256), so the form the schema shows works; there the
  strings "0400" and "0o400" are octal too (JSON has no octal numbers).
* **Capped.** Data with more than `max_values` values (counted after YAML aliases are expanded) is refused.
* `to_data` writes camelCase keys, int64 as numbers, times as RFC 3339, and omits empty fields and messages;
  `from_data(to_data(m), type(m)) == m` for messages without present-but-empty sub-messages.
"""

from __future__ import annotations

import base64
import difflib
import re
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from caravanserai.text.violations import Violations, key_path, quote

M = TypeVar("M", bound=Message)

MAX_VALUES = 500_000
"""Default for `from_data(max_values=…)`."""

_INTEGER = re.compile(r"[-+]?[0-9]{1,40}", re.ASCII)
_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


# ---- reading YAML ---------------------------------------------------------------------------------------------


class _TooLarge(Exception):
    pass


class _Decoder(Violations):
    """The violations found so far and the value budget."""

    def __init__(self, max_values: int) -> None:
        super().__init__()
        self.values = 0
        self.max_values = max_values

    def count(self) -> None:
        self.values += 1
        if self.values > self.max_values:
            raise _TooLarge


def _printable(text: str) -> str:
    """`text` with unpaired surrogates (which JSON escapes such as "\\ud800" can produce) written as escapes, so
    that paths and messages holding it can be encoded and printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _unicode(decoder: _Decoder, text: str, path: str) -> bool:
    """Whether `text` is valid Unicode (no unpaired surrogate); records a violation at `path` when not."""
    if _printable(text) == text:
        return True
    decoder.add(path, "must be valid Unicode text, without unpaired surrogates")
    return False


def describe(value: object) -> str:
    """What `value` is, for messages: 'a string "x"', "an integer (3)", "a mapping", "null" …"""
    text = _scalar_text(value)
    if isinstance(value, str):
        return f"a string {quote(_printable(value))}"
    if isinstance(value, bool):
        return f"a boolean ({text})"
    if isinstance(value, int):
        return f"an integer ({text})"
    if isinstance(value, float):
        return f"a number ({text})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else f"a {type(value).__name__}"


def _cut(key: object) -> str:
    text = _printable(str(key))
    return text if len(text) <= 64 else text[:64] + "…"


def _join(path: str, key: object) -> str:
    return f"{path}.{_cut(key)}" if path else _cut(key)


def _scalar_text(value: object) -> str | None:
    """The text of a scalar as written in the manifest (for string maps); None for non-scalars."""
    if isinstance(value, bool):
        return "true" if value else "false"
    source_text = getattr(value, "source_text", None)
    if isinstance(source_text, str):
        return source_text
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _message(decoder: _Decoder, data: object, descriptor: Descriptor, path: str) -> dict[str, Any]:
    decoder.count()
    if not isinstance(data, Mapping):
        decoder.add(path, f"expected a mapping, got {describe(data)}")
        return {}
    fields = {**{f.name: f for f in descriptor.fields}, **{f.json_name: f for f in descriptor.fields}}
    given: dict[str, object] = {}
    result: dict[str, Any] = {}
    for key, value in data.items():
        here = _join(path, key)
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            close = difflib.get_close_matches(str(key), [f.json_name for f in descriptor.fields], n=1)
            decoder.add(here, "unknown field" + (f' (did you mean "{close[0]}"?)' if close else ""))
        elif field.name in given:
            decoder.add(here, f"duplicate field (also given as {given[field.name]})")
        else:
            given[field.name] = key
            if value is not None:  # null leaves the field unset, as in protobuf JSON
                result[field.json_name] = _field(decoder, value, field, here)
    return result


def _field(decoder: _Decoder, value: object, field: FieldDescriptor, path: str) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        decoder.count()
        if not isinstance(value, Mapping):
            decoder.add(path, f"expected a mapping, got {describe(value)}")
            return {}
        value_field = field.message_type.fields_by_name["value"]
        entries = {}
        for key, item in value.items():
            text = _scalar_text(key)
            here = key_path(path, _printable(str(key) if text is None else text))
            if text is None:
                decoder.add(here, f"keys must be strings, not {describe(key)}")
            elif not _unicode(decoder, text, here):
                continue
            elif value_field.type == FieldDescriptor.TYPE_STRING:
                decoder.count()
                item_text = _scalar_text(item)
                if item_text is None:
                    decoder.add(here, f"expected a string, got {describe(item)}")
                elif _unicode(decoder, item_text, here):
                    entries[text] = item_text
            else:
                entries[text] = _single(decoder, item, value_field, here)
        return entries
    if field.is_repeated:
        decoder.count()
        if not isinstance(value, list):
            decoder.add(path, f"expected a list, got {describe(value)}")
            return []
        return [_single(decoder, item, field, f"{path}[{i}]") for i, item in enumerate(value)]
    return _single(decoder, value, field, path)


def _single(decoder: _Decoder, value: object, field: FieldDescriptor, path: str) -> Any:
    """One value of `field` as protobuf JSON, or None after recording why it does not fit."""
    if field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
        return _timestamp(decoder, value, path)
    if field.message_type is not None:
        return _message(decoder, value, field.message_type, path)
    decoder.count()
    kind = field.type
    if kind in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES) and isinstance(value, str):
        return str(value) if _unicode(decoder, value, path) else None
    if kind == FieldDescriptor.TYPE_BOOL and isinstance(value, bool):
        return value
    if field.full_name in INT_OR_STRING_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind in _RANGES:
        return _integer(decoder, value, kind, path, octal=field.full_name in FILE_MODE_FIELDS)
    floating = kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
    if floating and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        names = list(field.enum_type.values_by_name)
        if isinstance(value, str) and value in names:
            return str(value)
        if isinstance(value, int) and not isinstance(value, bool) and value in field.enum_type.values_by_number:
            return int(value)
        decoder.add(path, f"expected one of {', '.join(names)}, got {describe(value)}")
        return None
    hint = "; quote it" if kind == FieldDescriptor.TYPE_STRING and _scalar_text(value) is not None else ""
    wanted = {
        FieldDescriptor.TYPE_STRING: "a string",
        FieldDescriptor.TYPE_BYTES: "a base64 string",
        FieldDescriptor.TYPE_BOOL: "a boolean (true or false)",
    }
    decoder.add(path, f"expected {wanted.get(kind, 'a number')}, got {describe(value)}{hint}")
    return None


_LEADING_ZERO = re.compile(r"[+-]?0[0-9]+")
_OCTAL = re.compile(r"\+?0[0-7]+")
_OCTAL_PREFIXED = re.compile(r"0o[0-7]+")

FILE_MODE_FIELDS = frozenset({"caravanserai.v1.Volume.mode", "caravanserai.v1.TmpfsMount.mode"})
"""Fields holding a file mode: there a number written with a leading zero (`0400`) is octal, as chmod, Kubernetes'
`defaultMode` and Compose read it."""


INT_OR_STRING_FIELDS = frozenset(
    {
        "caravanserai.v1.RollingUpdateStrategy.max_surge",
        "caravanserai.v1.RollingUpdateStrategy.max_unavailable",
        "caravanserai.v1.DisruptionBudget.min_available",
        "caravanserai.v1.DisruptionBudget.max_unavailable",
    }
)
"""String fields holding a count or a percentage (Kubernetes' IntOrString: `maxSurge: 2` or `maxSurge: 25%`): an
integer written there is taken as its decimal text."""


def _integer(decoder: _Decoder, value: object, kind: int, path: str, *, octal: bool = False) -> int | None:
    """An integer given as a number (1, 1.0, 1e3) or as decimal text ("1"), within the range of `kind`; with
    `octal` (a file mode), a number written with a leading zero is octal."""
    source = str(getattr(value, "source_text", "") or "")
    if octal and isinstance(value, str):  # a file mode in quotes: "0400" and "0o400" are octal too
        source = value
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    elif octal and isinstance(value, (int, str)) and _LEADING_ZERO.fullmatch(source):
        if not _OCTAL.fullmatch(source):
            decoder.add(path, f"{source} is not an octal file mode (digits 0-7 after the leading zero)")
            return None
        number = int(source, 8)
    elif octal and isinstance(value, str) and _OCTAL_PREFIXED.fullmatch(value):
        number = int(value, 8)
    elif isinstance(value, int) and not isinstance(value, bool):
        if _LEADING_ZERO.fullmatch(source):
            decoder.add(
                path,
                f"{getattr(value, 'source_text')} is ambiguous (YAML 1.1 reads a leading zero as octal, "
                f"YAML 1.2 as decimal): write 0o{str(getattr(value, 'source_text')).lstrip('+-0') or '0'} "
                "for octal or drop the zero",
            )
            return None
        number = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
    else:
        decoder.add(path, f"expected an integer, got {describe(value)}")
        return None
    low, high = _RANGES[kind]
    if not low <= number <= high:
        decoder.add(path, f"must be between {low} and {high}, not {number}")
        return None
    return number


def _timestamp(decoder: _Decoder, value: object, path: str) -> str | None:
    decoder.count()
    rfc3339 = getattr(value, "rfc3339", None)
    if isinstance(rfc3339, str) and rfc3339:
        return rfc3339
    if isinstance(value, str):
        try:
            Timestamp().FromJsonString(value)
            return str(value)
        except ValueError:
            pass
    decoder.add(path, f"expected an RFC 3339 time such as 2026-01-31T12:00:00Z, got {describe(value)}")
    return None


def to_data(obj: Message, *, enum_defaults: bool = False) -> dict[str, Any]:
    """`obj` as protobuf JSON with camelCase keys, int64 as numbers, times in RFC 3339, empty fields omitted.

    Fields come in field-number order and map keys sorted, so equal messages give equal output. With
    `enum_defaults`, enum fields holding their zero value are shown too (by name) in every message that is there:
    protobuf JSON drops them, though for an enum the zero value is a choice a reader wants to see (`IN_PLACE`).
    """
    result: dict[str, Any] = {}
    for field, value in _fields(obj, enum_defaults):
        if value is None and field.enum_type is not None:  # an enum at its zero value, shown by name
            result[field.json_name] = field.enum_type.values_by_number[0].name
        elif field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            converted: Any = {key: _output(value_field, value[key], enum_defaults) for key in sorted(value)}
            result[field.json_name] = converted
        else:
            converted = [_output(field, i, enum_defaults) for i in value] if field.is_repeated else None
            converted = _output(field, value, enum_defaults) if converted is None else converted
            if converted != {}:
                result[field.json_name] = converted
    return result


def _fields(obj: Message, enum_defaults: bool) -> list[tuple[FieldDescriptor, Any]]:
    """The set fields of `obj` in number order, with (field, None) for each unset zero-valued enum when
    `enum_defaults`."""
    listed: list[tuple[FieldDescriptor, Any]] = list(obj.ListFields())
    if enum_defaults:
        present = {field.number for field, _ in listed}
        fields: list[Any] = list(obj.DESCRIPTOR.fields)
        listed += [(f, None) for f in fields if f.number not in present and _zero_enum(f)]
        listed.sort(key=lambda pair: pair[0].number)
    return listed


def _zero_enum(field: FieldDescriptor) -> bool:
    """A singular enum field without presence (proto3), whose enum defines 0: unset means its zero value."""
    return (
        field.type == FieldDescriptor.TYPE_ENUM
        and not field.is_repeated
        and not field.has_presence
        and field.enum_type is not None
        and 0 in field.enum_type.values_by_number
    )


def _output(field: FieldDescriptor, value: Any, enum_defaults: bool = False) -> Any:
    if field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
        return value.ToJsonString()
    if field.message_type is not None:
        return to_data(value, enum_defaults=enum_defaults)
    if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type is not None:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def from_data(data: object, cls: type[M], *, max_values: int = MAX_VALUES) -> M:
    """A new `cls` message holding `data` (a mapping in protobuf JSON form). Raises `Invalid` on any problem."""
    decoder = _Decoder(max_values)
    try:
        normalized = _message(decoder, data, cast(Descriptor, cls.DESCRIPTOR), "")
    except _TooLarge:
        decoder.add("", f"too large: more than {max_values} values (an alias counts each time it is used)")
    if not decoder.violations:
        try:
            return json_format.ParseDict(normalized, cls())
        except json_format.ParseError as exc:  # not expected after the checks above; reported, not raised
            decoder.add("", str(exc))
    raise decoder.error(what=cls.DESCRIPTOR.name)


__all__ = ["FILE_MODE_FIELDS", "INT_OR_STRING_FIELDS", "MAX_VALUES", "describe", "from_data", "to_data"]
