"""Custom kinds: the strategy of a kind defined by a ResourceDefinition.

* Objects are checked against the definition's descriptors (`schema_rules`): unknown fields, wrong wire
  types and undefined enum numbers are refused with their field path (`spec.replicas`), on top of the common
  metadata rules and size limits.
* What the definition adds (`apiserver.kindrules`): its `fieldRules` and CEL `validations` (defaults set on
  create and update, checks refused with the field path), its `admissionHooks` (mutating hooks change the object
  before validation, validating hooks may refuse it after) and its further `versions` (served by `grpcapi`).
* Status is a subresource: Create refuses it, Update keeps the stored one, UpdateStatus changes only it;
  generation moves on spec changes only (the base strategy's behaviour).
* Authorization: `admin` and `controller:*` identities read and write objects and their status, other identities
  read, `node:*` identities may use only the verbs listed in the definition's `nodeVerbs`.

The strategy is a `KindStrategy[Any]`: a custom kind's message class is built at run time from the definition's
descriptors, so no static type names its fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from caravanserai import v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kindrules import admission
from caravanserai.apiserver.kindrules.fieldrules import KindRules, RuleError
from caravanserai.apiserver.kindrules.versions import Version
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.customkinds.schemas import Schema, SchemaError, kind_for_definition
from caravanserai.errors import FailedPrecondition
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations, key_path


def schema_rules(errors: Violations, message: Message, path: str) -> None:
    """Check `message` (of a custom kind) against its descriptor: fields the descriptor does not know, fields sent
    with the wrong wire type (both arrive as unknown fields) and enum numbers the enum does not define."""
    unknowns: Any = UnknownFieldSet(message)  # iterable at run time; the stubs do not say so
    for unknown in unknowns:
        known = message.DESCRIPTOR.fields_by_number.get(unknown.field_number)
        if known is not None:
            errors.add(
                f"{path}.{known.json_name}",
                f"has the wrong type (wire type {unknown.wire_type}); expected {_type_of(known)}",
            )
        else:
            errors.add(path, f"unknown field number {unknown.field_number}")
    for field, value in message.ListFields():
        here = f"{path}.{field.json_name}"
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            for key in value:
                _schema_value(errors, key_path(here, str(key)), value_field, value[key])
        elif field.is_repeated:
            for i, item in enumerate(value):
                _schema_value(errors, f"{here}[{i}]", field, item)
        else:
            _schema_value(errors, here, field, value)


def _schema_value(errors: Violations, path: str, field: Any, value: Any) -> None:
    if field.message_type is not None:
        schema_rules(errors, value, path)
    elif field.enum_type is not None and value not in field.enum_type.values_by_number:
        names = ", ".join(v.name for v in field.enum_type.values)
        errors.add(path, f"{value} is not a value of {field.enum_type.name} ({names})")


def _type_of(field: Any) -> str:
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return str(field.enum_type.full_name)
    names = {v: k.removeprefix("TYPE_").lower() for k, v in vars(type(field)).items() if k.startswith("TYPE_")}
    return str(names.get(field.type, field.type))


class CustomKindStrategy(KindStrategy[Any]):  # classes built at run time: see the module docstring
    status_on_create = False
    controller_writes = frozenset({"create", "update", "update_status", "delete"})

    def __init__(self, definition: v1.ResourceDefinition) -> None:
        """Build the kind's classes from `definition` (SchemaError when they do not build)."""
        schema = Schema.compile(definition.spec)
        super().__init__(kind_for_definition(definition, schema.object_cls))
        self.definition = definition
        self.schema = schema
        self._node_verbs = frozenset(definition.spec.node_verbs)
        try:
            self.rules = KindRules(definition.spec, schema.object_cls.DESCRIPTOR)
        except RuleError as exc:
            raise SchemaError(exc.field, exc.message) from None
        self.hooks = admission.Hooks(definition.spec.admission_hooks, kind=self.kind)
        self.versions = {v.name: Version(definition, v, schema.object_cls) for v in definition.spec.versions}

    def default_new(self, obj: Any, *, now: float) -> None:
        self.rules.apply_defaults(obj, "spec")

    def prepare_update(self, old: Any, new: Any) -> Any:
        defaulted = type(new)()
        defaulted.CopyFrom(new)
        self.rules.apply_defaults(defaulted, "spec")
        return super().prepare_update(old, defaulted)

    def prepare_status(self, old: Any, new: Any, *, now: float) -> Any:
        merged = super().prepare_status(old, new, now=now)
        self.rules.apply_defaults(merged, "status")
        return merged

    async def mutate(self, ctx: KindContext, obj: Any, old: Any | None) -> Any:
        """The object after the mutating hooks (defaults applied again, generation moved on if they changed the
        spec of a stored object)."""
        if not self.hooks.mutating:
            return obj
        mutated = await self.hooks.mutate(obj, old)
        self.rules.apply_defaults(mutated, "spec")
        if old is not None and mutated.spec != old.spec:
            mutated.metadata.generation = old.metadata.generation + 1
        return mutated

    async def before_update(self, ctx: KindContext, old: Any, new: Any) -> None:
        errors = Violations()
        self.rules.check_transition(errors, old, new, "spec")
        errors.raise_if_any(what=self.kind.kind)
        await self.hooks.validate(new, old)

    async def before_create(self, ctx: KindContext, obj: Any) -> None:
        """Refuse new objects while the definition is being deleted (its objects' finalizers run); then the
        validating admission hooks."""
        if self.definition.metadata.HasField("deletion_timestamp"):
            raise FailedPrecondition(
                f"{self.kind.kind} {obj.metadata.name}: the definition {self.definition.metadata.name} is being "
                "deleted; no new objects of its kind"
            )
        await self.hooks.validate(obj, None)

    def validate(self, obj: Any) -> None:
        def spec_rule(errors: Violations, spec: Any) -> None:
            schema_rules(errors, spec, "spec")
            schema_rules(errors, obj.metadata, "metadata")
            self.rules.check(errors, obj, "spec")

        validation.check_object(
            obj,
            kind=self.kind.kind,
            name_rule=validate_dns_subdomain,
            spec_rule=spec_rule,
            api_version=self.kind.api_version,
        )

    def validate_status(self, obj: Any) -> None:
        validation.check_status(
            obj, kind=self.kind.kind, status_rule=lambda errors, status: self._status_rule(errors, obj, status)
        )

    def _status_rule(self, errors: Violations, obj: Any, status: Any) -> None:
        schema_rules(errors, status, "status")
        self.rules.check(errors, obj, "status")

    def node_allows(self, node: str, verb: str, *, name: str, obj: Any, old: Any, field_selector: str) -> bool:
        return verb in self._node_verbs


__all__ = ["CustomKindStrategy", "schema_rules"]
