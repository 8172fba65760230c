"""Whether a new schema of a custom kind still reads every object stored under the old one.

`breaking_changes(old, new)` walks the spec and status messages of the old schema (and every message they reach)
and compares each with the new schema. Refused, each as a violation naming the field and what to do instead:

* a message of the old schema missing from the new one (`spec.schema`: message X was removed);
* a field number that disappeared without being reserved (stored objects may hold it): retire it instead;
* a field number now carrying a field of another name (a rename, which clients and stored JSON do not follow):
  add the new name under a new number and retire the old one;
* a field whose type, cardinality (repeated/map) or message/enum type changed (retyped);
* an enum value that disappeared (stored objects may hold it).

`retired_fields(old, new)` lists the fields the new schema retires: removed, with both their number and their
name reserved in their message (`reserved 5; reserved "compress";`). Retiring is compatible once no stored object
sets the field; the apiserver counts the objects that do (`holds_field`) and refuses the update while any does.

`incompatibilities(cls_schema, served)` is the client's side of a rollback: whether a process built with an older
(or newer) class can read and write the objects of the served definition. Anything else — new fields, new
messages, new enum values, changed comments or printer columns — is compatible.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from caravanserai.customkinds.schemas import Schema
from caravanserai.errors import FieldViolation

_TYPE_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and isinstance(value, int)
}


@dataclass(frozen=True, slots=True)
class RetiredField:
    """A field the new schema removed and reserved: `path` (`spec.compress`), its message and number."""

    path: str
    message: str  # full name of the message that held it
    number: int
    name: str


@dataclass(slots=True)
class _Walk:
    violations: list[FieldViolation] = dataclasses.field(default_factory=list)
    retired: list[RetiredField] = dataclasses.field(default_factory=list)
    seen: set[tuple[str, str]] = dataclasses.field(default_factory=set)


def breaking_changes(old: Schema, new: Schema) -> list[FieldViolation]:
    """Every change from `old` to `new` that would break stored objects (empty when compatible)."""
    return _walk(old, new).violations


def retired_fields(old: Schema, new: Schema) -> list[RetiredField]:
    """The fields of `old` that `new` removed and reserved (number and name): compatible once no object sets them."""
    return _walk(old, new).retired


def incompatibilities(cls_schema: Schema, served: Schema) -> list[FieldViolation]:
    """Why a process whose classes compile to `cls_schema` cannot use the objects of the `served` schema (empty when
    it can): every field of the classes must be served under the same number, name and type. Fields only the
    served schema has are fine (the classes keep them as unknown fields, and write them back unchanged)."""
    walk = _walk(cls_schema, served)
    retired = [
        FieldViolation(r.path, f"field number {r.number} is retired by the served definition") for r in walk.retired
    ]
    return walk.violations + retired


def holds_field(message: Message, retired: RetiredField) -> bool:
    """Whether `message` (an object decoded with the old schema) sets the retired field anywhere."""
    if message.DESCRIPTOR.full_name == retired.message and any(
        f.number == retired.number for f, _ in message.ListFields()
    ):
        return True
    for desc, value in message.ListFields():
        if desc.message_type is None:
            continue
        if desc.message_type.GetOptions().map_entry:
            values: Any = value.values() if desc.message_type.fields_by_name["value"].message_type else ()
        else:
            values = value if desc.is_repeated else (value,)
        if any(holds_field(item, retired) for item in values):
            return True
    return False


def _walk(old: Schema, new: Schema) -> _Walk:
    walk = _Walk()
    _compare(old.spec, _same(new, old.spec, "spec", walk), "spec", walk)
    _compare(old.status, _same(new, old.status, "status", walk), "status", walk)
    return walk


def _same(new: Schema, old: Descriptor, path: str, walk: _Walk) -> Descriptor | None:
    """The message of `new` named like `old` (None, with a violation, when it was removed)."""
    try:
        return new.pool.FindMessageTypeByName(old.full_name)
    except KeyError:
        walk.violations.append(FieldViolation("spec.schema", f"message {old.full_name} (used by {path}) was removed"))
        return None


def _describe(field: FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return f"map<{_describe(key)}, {_describe(value)}>"
    if field.message_type is not None:
        base = field.message_type.full_name
    elif field.enum_type is not None:
        base = field.enum_type.full_name
    else:
        base = _TYPE_NAMES.get(field.type, str(field.type))
    return f"repeated {base}" if field.is_repeated else base


def _reserved(message: Descriptor) -> tuple[list[tuple[int, int]], set[str]]:
    """The reserved number ranges ([start, end)) and names of `message`."""
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    return [(r.start, r.end) for r in proto.reserved_range], set(proto.reserved_name)


def _reserve(field: FieldDescriptor) -> str:
    return f'reserved {field.number}; reserved "{field.name}";'


def _removed(old: FieldDescriptor, new: Descriptor, here: str, walk: _Walk) -> None:
    ranges, names = _reserved(new)
    number_reserved = any(start <= old.number < end for start, end in ranges)
    if number_reserved and old.name in names:
        walk.retired.append(RetiredField(here, new.full_name, old.number, old.name))
        return
    walk.violations.append(
        FieldViolation(
            here,
            f"field number {old.number} was removed; stored objects may hold it: to retire the field, reserve its "
            f"number and name ({_reserve(old)}), allowed once no stored object sets it",
        )
    )


def _compare(old: Descriptor, new: Descriptor | None, path: str, walk: _Walk) -> None:
    if new is None or (old.full_name, path) in walk.seen:
        return
    walk.seen.add((old.full_name, path))
    for field in old.fields:
        here = f"{path}.{field.json_name}"
        now = new.fields_by_number.get(field.number)
        if now is None:
            _removed(field, new, here, walk)
        elif now.name != field.name:
            walk.violations.append(
                FieldViolation(
                    here,
                    f"field number {field.number} is renamed to {now.name}, which stored objects and clients do not "
                    f"follow: add {now.name} under a new number, then retire {field.name} once no stored object "
                    f"sets it ({_reserve(field)})",
                )
            )
        elif _describe(now) != _describe(field):
            walk.violations.append(
                FieldViolation(
                    here, f"field number {field.number} changes type from {_describe(field)} to {_describe(now)}"
                )
            )
        elif field.message_type is not None:
            _compare(field.message_type, now.message_type, here, walk)
        elif field.enum_type is not None and now.enum_type is not None:
            _compare_enum(field.enum_type, now.enum_type, here, walk)


def _compare_enum(old: EnumDescriptor, new: EnumDescriptor, path: str, walk: _Walk) -> None:
    for value in old.values:
        if value.number not in new.values_by_number:
            walk.violations.append(FieldViolation(path, f"enum value {value.name} ({value.number}) was removed"))


__all__ = ["RetiredField", "breaking_changes", "holds_field", "incompatibilities", "retired_fields"]
