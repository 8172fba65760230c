"""Validation and defaults declared in a ResourceDefinition: `fieldRules` and CEL `validations`.

`KindRules(spec, object_cls)` compiles a definition's rules once; the custom kind's strategy then

* `apply_defaults(obj, scope)`: sets every unset field that has a default, when its parent is set (Kubernetes'
  structural defaulting); never changes a set field;
* `check(errors, obj, scope)`: adds a violation, named by the field's path (`spec.replicas`,
  `spec.template.spec.services[0].image`), for every field rule and every CEL rule the object breaks;
* `check_transition(old, new)`: the CEL rules that name `oldSelf`, on update only.

`scope` is "spec" (Create and Update) or "status" (UpdateStatus): a rule applies to the writes of the part of the
object its path starts with. `problems(spec, object_cls)` lists what is wrong with the rules themselves (unknown
fields, a check that does not fit the field's type, a pattern or CEL expression that does not compile, a default
that is not a value of the field); the definition is refused with those, so `KindRules` of a stored definition
always builds.

Values follow proto3: a field without presence that holds its zero value is unset (`required` refuses it, a
default replaces it); declare the field `optional` to tell 0 from unset. Numbers and enums without presence are
checked whether set or not (their value is the zero value); strings only when set.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from caravanserai import v1
from caravanserai.errors import FieldViolation
from caravanserai.text.violations import Violations, quote

SCOPES = ("spec", "status")
_NUMBERS = {
    FieldDescriptor.TYPE_DOUBLE,
    FieldDescriptor.TYPE_FLOAT,
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}


class RuleError(ValueError):
    """A rule of a definition that cannot be used; `field` is the rule's path in the definition."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# ---- paths ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One segment of a rule's path: a field, and whether the path goes on into each of its items (`[]`)."""

    field: FieldDescriptor
    each: bool


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _is_list(field: FieldDescriptor) -> bool:
    return field.is_repeated and not _is_map(field)


def compile_path(path: str, root: Descriptor, where: str) -> list[Step]:
    """The steps of `path` ("spec.a.b[].c") from the object message `root`; RuleError naming `where` when a
    segment is not a field, `[]` follows a field that is not a list or map, or the path crosses a list without it."""
    parts = path.split(".")
    if not path or parts[0] not in SCOPES:
        raise RuleError(where, f"{quote(path)} must start with spec or status")
    steps: list[Step] = []
    message: Descriptor | None = root
    for i, part in enumerate(parts):
        name, each = (part[:-2], True) if part.endswith("[]") else (part, False)
        if message is None:
            raise RuleError(where, f"{quote(path)}: {quote('.'.join(parts[:i]))} is not a message")
        field = _field_named(message, name)
        if field is None:
            raise RuleError(where, f"{quote(path)}: {message.full_name} has no field {quote(name)}")
        if each and not field.is_repeated:
            raise RuleError(where, f"{quote(path)}: {quote(name)} is not a list or map; drop the []")
        last = i == len(parts) - 1
        if field.is_repeated and not each and not last:
            raise RuleError(where, f"{quote(path)}: write {quote(name + '[]')} to reach into each item")
        steps.append(Step(field, each))
        item = _item_field(field) if each else field
        message = item.message_type
    return steps


def _field_named(message: Descriptor, name: str) -> FieldDescriptor | None:
    for field in message.fields:
        if name in (field.json_name, field.name):
            return field
    return None


def _item_field(field: FieldDescriptor) -> FieldDescriptor:
    """The field describing one item: a map's value field, or the list field itself."""
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        value: FieldDescriptor = entry.fields_by_name["value"]
        return value
    return field


@dataclass(frozen=True, slots=True)
class Spot:
    """A field reached by a path in one object: its parent message, and (after `[]`) the item's key."""

    path: str
    parent: Message
    field: FieldDescriptor


def walk(obj: Message, steps: list[Step]) -> Iterator[Spot]:
    """Every place `steps` reach in `obj` whose parent message is set (absent parents are skipped; the object's
    spec and status always count as set)."""
    yield from _walk(obj, steps, "")


def _walk(message: Message, steps: list[Step], prefix: str) -> Iterator[Spot]:
    step, rest = steps[0], steps[1:]
    field = step.field
    here = f"{prefix}.{field.json_name}" if prefix else field.json_name
    if not rest:
        yield Spot(here, message, field)
        return
    value = getattr(message, field.name)
    if not step.each:
        if not prefix or message.HasField(field.name):  # spec and status count as set: every object has them
            yield from _walk(value, rest, here)
        return
    items = [(f'{here}["{k}"]', value[k]) for k in sorted(value)] if _is_map(field) else _indexed(here, value)
    for path, item in items:
        if isinstance(item, Message):
            yield from _walk(item, rest, path)


def _indexed(here: str, value: Any) -> list[tuple[str, Any]]:
    return [(f"{here}[{i}]", item) for i, item in enumerate(value)]


def is_set(parent: Message, field: FieldDescriptor) -> bool:
    """Whether `field` of `parent` holds a value (proto3: a zero value of a field without presence is unset)."""
    value = getattr(parent, field.name)
    if field.is_repeated:
        return len(value) > 0
    if field.has_presence:
        return parent.HasField(field.name)
    return bool(value != field.default_value)


# ---- values ---------------------------------------------------------------------------------------------------


def to_value(message: Message) -> dict[str, Any]:
    """The JSON form of `message` as CEL and the checks see it: every field (zero values included) by its JSON
    name, enums by name, 64-bit integers as ints, bytes as base64; unset message fields are left out."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.message_type is not None and not field.is_repeated and not message.HasField(field.name):
            continue
        out[field.json_name] = _field_value(field, getattr(message, field.name))
    return out


def _field_value(field: Any, value: Any) -> Any:  # a FieldDescriptor (upb's or the pure one)
    if _is_map(field):
        item = _item_field(field)
        return {str(k): _scalar(item, value[k]) for k in value}
    if field.is_repeated:
        return [_scalar(field, v) for v in value]
    return _scalar(field, value)


def _scalar(field: Any, value: Any) -> Any:  # a FieldDescriptor
    if field.message_type is not None:
        return to_value(value)
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value


# ---- compiled rules -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldRule:
    rule: v1.FieldRule
    steps: list[Step]
    pattern: re.Pattern[str] | None
    default: Any  # the parsed JSON default, or None


@dataclass(frozen=True, slots=True)
class _CelRule:
    rule: v1.ValidationRule
    steps: list[Step]
    program: Any  # celpy.Runner
    transition: bool


class KindRules:
    """The compiled field rules and CEL rules of one definition (see the module docstring)."""

    def __init__(self, spec: v1.ResourceDefinitionSpec, root: Descriptor) -> None:
        """Compile the rules against the object message `root`; RuleError for the first unusable rule."""
        self._fields = [_compile_field_rule(r, root, f"spec.fieldRules[{i}]") for i, r in enumerate(spec.field_rules)]
        self._cel = [_compile_cel_rule(r, root, f"spec.validations[{i}]") for i, r in enumerate(spec.validations)]

    def __bool__(self) -> bool:
        return bool(self._fields or self._cel)

    def apply_defaults(self, obj: Message, scope: str) -> None:
        """Set each unset field of `scope` that has a default, where its parent is set (in place)."""
        for compiled in self._fields:
            if compiled.default is None or compiled.rule.path.split(".")[0] != scope:
                continue
            for spot in walk(obj, compiled.steps):
                if not is_set(spot.parent, spot.field):
                    _set_json(spot.parent, spot.field, compiled.default)

    def check(self, errors: Violations, obj: Message, scope: str) -> None:
        """Add a violation for every field rule and every CEL rule (without oldSelf) of `scope` `obj` breaks."""
        for field_rule in self._fields:
            if field_rule.rule.path.split(".")[0] == scope:
                for spot in walk(obj, field_rule.steps):
                    _check_field(errors, field_rule, spot)
        for cel_rule in self._cel:
            if not cel_rule.transition and _scope(cel_rule) == scope:
                for path, value in _cel_values(obj, cel_rule):
                    _evaluate(errors, cel_rule, path, {"self": value})

    def check_transition(self, errors: Violations, old: Message, new: Message, scope: str) -> None:
        """Add a violation for every transition rule (naming oldSelf) of `scope` the change from `old` to `new`
        breaks; items of lists are paired by index, and a rule is skipped where `old` has no value."""
        for cel_rule in self._cel:
            if cel_rule.transition and _scope(cel_rule) == scope:
                before = dict(_cel_values(old, cel_rule))
                for path, value in _cel_values(new, cel_rule):
                    if path in before:
                        _evaluate(errors, cel_rule, path, {"self": value, "oldSelf": before[path]})


def _scope(rule: _CelRule) -> str:
    return rule.steps[0].field.name


def problems(spec: v1.ResourceDefinitionSpec, root: Descriptor) -> list[FieldViolation]:
    """What is wrong with the rules of `spec` for the object message `root` (empty: `KindRules` builds)."""
    found = []
    for i, rule in enumerate(spec.field_rules):
        try:
            _compile_field_rule(rule, root, f"spec.fieldRules[{i}]")
        except RuleError as exc:
            found.append(FieldViolation(exc.field, exc.message))
    for i, cel in enumerate(spec.validations):
        try:
            _compile_cel_rule(cel, root, f"spec.validations[{i}]")
        except RuleError as exc:
            found.append(FieldViolation(exc.field, exc.message))
    return found


def _compile_field_rule(rule: v1.FieldRule, root: Descriptor, where: str) -> _FieldRule:
    steps = compile_path(rule.path, root, f"{where}.path")
    last = steps[-1]
    field = _item_field(last.field) if last.each else last.field
    many = last.field.is_repeated and not last.each
    number = not many and field.type in _NUMBERS
    text = not many and field.type == FieldDescriptor.TYPE_STRING
    if (rule.HasField("minimum") or rule.HasField("maximum")) and not number:
        raise RuleError(where, f"minimum and maximum need a number field; {quote(rule.path)} is not one")
    if (rule.pattern or rule.HasField("min_length") or rule.HasField("max_length")) and not text:
        raise RuleError(where, f"pattern, minLength and maxLength need a string field; {quote(rule.path)} is not one")
    if (rule.HasField("min_items") or rule.HasField("max_items")) and not many:
        raise RuleError(where, f"minItems and maxItems need a list or map field; {quote(rule.path)} is not one")
    if rule.enum:
        _check_enum_subset(rule, field, many, where)
    pattern = None
    if rule.pattern:
        try:
            pattern = re.compile(rule.pattern)
        except re.error as exc:
            raise RuleError(f"{where}.pattern", f"does not compile: {exc}") from None
    default = _parse_default(rule, last, where) if rule.default else None
    return _FieldRule(rule, steps, pattern, default)


def _check_enum_subset(rule: v1.FieldRule, field: FieldDescriptor, many: bool, where: str) -> None:
    if many or field.message_type is not None:
        raise RuleError(where, f"enum needs a scalar field; {quote(rule.path)} is not one")
    if field.enum_type is not None:
        unknown = [v for v in rule.enum if v not in field.enum_type.values_by_name]
        if unknown:
            names = ", ".join(v.name for v in field.enum_type.values)
            raise RuleError(f"{where}.enum", f"{quote(unknown[0])} is not a value of {field.enum_type.name} ({names})")


def _parse_default(rule: v1.FieldRule, last: Step, where: str) -> Any:
    try:
        value = json.loads(rule.default)
    except ValueError as exc:
        raise RuleError(f"{where}.default", f"is not JSON: {exc}") from None
    if last.each:
        raise RuleError(f"{where}.default", "cannot default each item of a list or map; default the field itself")
    probe = last.field.containing_type
    if probe is None:
        raise RuleError(f"{where}.path", "names no field of a message")
    try:
        json_format.ParseDict({last.field.json_name: value}, _new(probe))
    except json_format.ParseError as exc:
        raise RuleError(f"{where}.default", f"is not a value of {quote(rule.path)}: {exc}") from None
    return value


def _new(descriptor: Descriptor) -> Message:
    from google.protobuf import message_factory

    message: Message = message_factory.GetMessageClass(descriptor)()
    return message


def _set_json(parent: Message, field: FieldDescriptor, value: Any) -> None:
    """Set `field` of `parent` to the JSON `value` (checked by `_parse_default`)."""
    holder = type(parent)()
    json_format.ParseDict({field.json_name: value}, holder)
    parent.MergeFrom(holder)


def _compile_cel_rule(rule: v1.ValidationRule, root: Descriptor, where: str) -> _CelRule:
    steps = compile_path(rule.path or "spec", root, f"{where}.path")
    if rule.field_path and rule.field_path.split(".")[0] not in SCOPES:
        raise RuleError(f"{where}.fieldPath", f"{quote(rule.field_path)} must start with spec or status")
    if not rule.rule:
        raise RuleError(f"{where}.rule", "is required")
    env = celpy.Environment()
    try:
        program = env.program(env.compile(rule.rule))
    except Exception as exc:  # celpy raises its parser's errors, whose classes it does not export
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuleError(f"{where}.rule", f"does not compile: {first}") from None
    return _CelRule(rule, steps, program, transition=re.search(r"\boldSelf\b", rule.rule) is not None)


def _cel_values(obj: Message, rule: _CelRule) -> Iterator[tuple[str, Any]]:
    """(path, JSON value) of each set place the rule's path reaches: a message, list, map or scalar."""
    for spot in walk(obj, rule.steps):
        step = rule.steps[-1]
        value = getattr(spot.parent, spot.field.name)
        if step.each:
            item = _item_field(spot.field)
            keys = sorted(value) if _is_map(spot.field) else range(len(value))
            for key in keys:
                path = f'{spot.path}["{key}"]' if _is_map(spot.field) else f"{spot.path}[{key}]"
                yield path, _scalar(item, value[key])
        elif (
            len(rule.steps) == 1  # spec or status itself: always there
            or spot.field.message_type is None
            or spot.field.is_repeated
            or spot.parent.HasField(spot.field.name)
        ):
            yield spot.path, _field_value(spot.field, value)


def _evaluate(errors: Violations, rule: _CelRule, path: str, values: dict[str, Any]) -> None:
    where = rule.rule.field_path or path
    activation = {name: json_to_cel(value) for name, value in values.items()}
    try:
        result = rule.program.evaluate(activation)
    except Exception as exc:  # CELEvalError and the errors of the functions it calls
        errors.add(where, f"rule {quote(rule.rule.rule)} could not be evaluated: {_first_line(exc)}")
        return
    if isinstance(result, Exception):
        errors.add(where, f"rule {quote(rule.rule.rule)} could not be evaluated: {_first_line(result)}")
    elif result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
        errors.add(where, rule.rule.message or f"failed rule: {rule.rule.rule}")


def _first_line(exc: BaseException) -> str:
    args = exc.args
    text = str(args[0]) if args else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _check_field(errors: Violations, compiled: _FieldRule, spot: Spot) -> None:
    rule, parent, field = compiled.rule, spot.parent, spot.field
    present = is_set(parent, field)
    if rule.required and not present:
        errors.add(spot.path, "is required")
    value = getattr(parent, field.name)
    if field.is_repeated:
        if compiled.steps[-1].each:
            item = _item_field(field)
            keys = sorted(value) if _is_map(field) else range(len(value))
            for key in keys:
                path = f'{spot.path}["{key}"]' if _is_map(field) else f"{spot.path}[{key}]"
                _check_scalar(errors, rule, compiled.pattern, path, item, value[key], True)
            return
        _check_items(errors, rule, spot.path, len(value))
        return
    checked = present or (not field.has_presence and (field.type in _NUMBERS or field.enum_type is not None))
    if checked:
        _check_scalar(errors, rule, compiled.pattern, spot.path, field, value, present)


def _check_items(errors: Violations, rule: v1.FieldRule, path: str, count: int) -> None:
    if rule.HasField("min_items") and count < rule.min_items:
        errors.add(path, f"has {count} items; at least {rule.min_items} required")
    if rule.HasField("max_items") and count > rule.max_items:
        errors.add(path, f"has {count} items; at most {rule.max_items} allowed")


def _check_scalar(
    errors: Violations,
    rule: v1.FieldRule,
    pattern: re.Pattern[str] | None,
    path: str,
    field: FieldDescriptor,
    value: Any,
    present: bool,
) -> None:
    if field.type in _NUMBERS:
        if rule.HasField("minimum") and value < rule.minimum:
            errors.add(path, f"{value} is less than the minimum {_number(rule.minimum)}")
        if rule.HasField("maximum") and value > rule.maximum:
            errors.add(path, f"{value} is more than the maximum {_number(rule.maximum)}")
    if isinstance(value, str) and present:
        if pattern is not None and not pattern.search(value):
            errors.add(path, f"{quote(value)} does not match {quote(rule.pattern)}")
        if rule.HasField("min_length") and len(value) < rule.min_length:
            errors.add(path, f"is {len(value)} characters long; at least {rule.min_length} required")
        if rule.HasField("max_length") and len(value) > rule.max_length:
            errors.add(path, f"is {len(value)} characters long; at most {rule.max_length} allowed")
    if rule.enum:
        text = _scalar(field, value)
        text = text if isinstance(text, str) else json.dumps(text)
        if text not in rule.enum:
            errors.add(path, f"{quote(text)} is not one of {', '.join(rule.enum)}")


def _number(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else str(value)


__all__ = ["KindRules", "RuleError", "compile_path", "is_set", "problems", "to_value", "walk"]
