"""Whether a new schema of a custom kind still reads every object stored under the old one.

`breaking_changes(old, new)` walks the spec and status messages of the old schema (and every message they reach)
and compares each with the new schema. Refused, each as a violation naming the field:

* a message of the old schema missing from the new one (`spec.schema`: message X was removed);
* a field number that disappeared (stored objects may hold it);
* a field number now carrying another field (reused: old name ≠ new name);
* a field whose type, cardinality (repeated/map) or message/enum type changed (retyped);
* an enum value that disappeared (stored objects may hold it).

Anything else — new fields, new messages, new enum values, changed comments or printer columns — is compatible.
"""

from __future__ import annotations

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from caravanserai.customkinds.schemas import Schema
from caravanserai.errors import FieldViolation

_TYPE_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and isinstance(value, int)
}


def breaking_changes(old: Schema, new: Schema) -> list[FieldViolation]:
    """Every change from `old` to `new` that would break stored objects (empty when compatible)."""
    found: list[FieldViolation] = []
    seen: set[tuple[str, str]] = set()
    _compare(old.spec, _same(new, old.spec, "spec", found), "spec", found, seen)
    _compare(old.status, _same(new, old.status, "status", found), "status", found, seen)
    return found


def _same(new: Schema, old: Descriptor, path: str, found: list[FieldViolation]) -> Descriptor | None:
    """The message of `new` named like `old` (None, with a violation, when it was removed)."""
    try:
        return new.pool.FindMessageTypeByName(old.full_name)
    except KeyError:
        found.append(FieldViolation("spec.schema", f"message {old.full_name} (used by {path}) was removed"))
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


def _compare(
    old: Descriptor,
    new: Descriptor | None,
    path: str,
    found: list[FieldViolation],
    seen: set[tuple[str, str]],
) -> None:
    if new is None or (old.full_name, path) in seen:
        return
    seen.add((old.full_name, path))
    for field in old.fields:
        here = f"{path}.{field.json_name}"
        now = new.fields_by_number.get(field.number)
        if now is None:
            found.append(FieldViolation(here, f"field number {field.number} was removed; stored objects may hold it"))
        elif now.name != field.name:
            found.append(FieldViolation(here, f"field number {field.number} is reused by {now.name}"))
        elif _describe(now) != _describe(field):
            found.append(
                FieldViolation(
                    here, f"field number {field.number} changes type from {_describe(field)} to {_describe(now)}"
                )
            )
        elif field.message_type is not None:
            _compare(field.message_type, now.message_type, here, found, seen)
        elif field.enum_type is not None and now.enum_type is not None:
            _compare_enum(field.enum_type, now.enum_type, here, found)


def _compare_enum(old: EnumDescriptor, new: EnumDescriptor, path: str, found: list[FieldViolation]) -> None:
    for value in old.values:
        if value.number not in new.values_by_number:
            found.append(FieldViolation(path, f"enum value {value.name} ({value.number}) was removed"))


__all__ = ["breaking_changes"]
