"""ResourceDefinitions: a kind defined at run time. Only `admin` writes them.

* Named `<plural>.<group>`; the schema must build (`customkinds.Schema`), and plural, kind and short names must not
  clash with a built-in kind or another definition.
* Group, kind and plural never change; a schema update must keep reading stored objects
  (`apiserver.schemaevolution`).
* Deleting a definition works as Kubernetes deletes a CRD: when no object of the kind holds a finalizer, the
  definition and every object go in one etcd transaction (the response counts them); otherwise every object is
  marked for deletion (those without finalizers removed at once), the definition is marked too and stays served
  so that the finalizers can run (new objects are refused), and each apiserver's `DefinitionServer` removes it
  once the last object is gone. `--force` removes everything at once, finalizers or not.
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import codec, validation
from caravanserai.apiserver.kindrules import admission, fieldrules, versions
from caravanserai.apiserver.kinds.base import MARK, NOOP, REMOVE, KindContext, KindStrategy, KindTable, stamp
from caravanserai.apiserver.schemaevolution import RetiredField, breaking_changes, holds_field, retired_fields
from caravanserai.customkinds.schemas import SCOPE_CLUSTER, SCOPES, Schema, SchemaError, definition_name
from caravanserai.errors import FieldViolation, Invalid, NotFound
from caravanserai.storage.store import Also
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations, quote

log = structlog.get_logger(__name__)

SERVED_WITHIN = 5.0
"""How long a definition's Create or Update waits for this apiserver to serve the kind as written."""

KIND = meta.KINDS["resourcedefinitions"]
VERBS = ("get", "list", "watch", "create", "update", "update_status", "delete")
_KIND_NAME = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_LOWER_NAME = re.compile(r"[a-z][a-z0-9]{0,62}")
_JSON_PATH = re.compile(r"(\.[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?)+")


def definition_spec(errors: Violations, spec: v1.ResourceDefinitionSpec) -> None:
    """The rules of a definition's spec (not its name, which `check_name` compares with group and plural)."""
    if errors.required("spec.group", spec.group):
        problem = validate_dns_subdomain(spec.group)
        errors.check("spec.group", problem or (None if "." in spec.group else "must contain a dot, e.g. example.com"))
    if errors.required("spec.kind", spec.kind) and not _KIND_NAME.fullmatch(spec.kind):
        errors.add("spec.kind", f"{quote(spec.kind)} must be CamelCase letters and digits, starting with a capital")
    if errors.required("spec.plural", spec.plural) and not _LOWER_NAME.fullmatch(spec.plural):
        errors.add("spec.plural", f"{quote(spec.plural)} must be lowercase letters and digits, starting with a letter")
    for i, short in enumerate(spec.short_names):
        if not _LOWER_NAME.fullmatch(short):
            errors.add(f"spec.shortNames[{i}]", f"{quote(short)} must be lowercase letters and digits")
    for i, column in enumerate(spec.printer_columns):
        errors.required(f"spec.printerColumns[{i}].name", column.name)
        if not _JSON_PATH.fullmatch(column.json_path):
            errors.add(
                f"spec.printerColumns[{i}].jsonPath", f"{quote(column.json_path)} must look like .status.readyReplicas"
            )
    if spec.scope:
        errors.choice("spec.scope", spec.scope, SCOPES)
    for i, verb in enumerate(spec.node_verbs):
        if verb not in VERBS:
            errors.add(f"spec.nodeVerbs[{i}]", f"{quote(verb)} is not one of {', '.join(VERBS)}")
    for violation in admission.problems(spec.admission_hooks):
        errors.add(violation.field, violation.description)
    if spec.kind and spec.plural and spec.group:
        try:
            schema = Schema.compile(spec)
        except SchemaError as exc:
            errors.add(exc.field, exc.message)
        else:
            for violation in [*fieldrules.problems(spec, schema.object_cls.DESCRIPTOR), *versions.problems(spec)]:
                errors.add(violation.field, violation.description)


def _names(spec: v1.ResourceDefinitionSpec) -> list[tuple[str, str]]:
    """(field path, name) of every name the kind answers to."""
    names = [("spec.plural", spec.plural), ("spec.kind", spec.kind.lower())]
    return names + [(f"spec.shortNames[{i}]", s) for i, s in enumerate(spec.short_names)]


class ResourceDefinitionStrategy(KindStrategy[v1.ResourceDefinition]):
    """Only admin writes definitions (no controller writes, no node access); everyone else reads them."""

    cache_decoded = True  # every change is compared with the served kinds

    def validate(self, obj: v1.ResourceDefinition) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=definition_spec)
        expected = definition_name(obj.spec.plural, obj.spec.group)
        if obj.metadata.name != expected:
            raise Invalid.of([FieldViolation("metadata.name", f"must be {quote(expected)} (<plural>.<group>)")])

    def validate_status(self, obj: v1.ResourceDefinition) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)

    async def before_create(self, ctx: KindContext, obj: v1.ResourceDefinition) -> None:
        await self._refuse_clashes(ctx, obj)

    async def before_update(self, ctx: KindContext, old: v1.ResourceDefinition, new: v1.ResourceDefinition) -> None:
        """Kind never changes (group and plural are fixed by the name); the new schema must read stored objects."""
        if new.spec.kind != old.spec.kind:
            raise Invalid.of([FieldViolation("spec.kind", f"cannot change (was {quote(old.spec.kind)})")])
        if (new.spec.scope or SCOPE_CLUSTER) != (old.spec.scope or SCOPE_CLUSTER):
            was = quote(old.spec.scope or SCOPE_CLUSTER)
            raise Invalid.of(
                [FieldViolation("spec.scope", f"cannot change (was {was}): stored objects are keyed by it")]
            )
        old_schema, new_schema = Schema.compile(old.spec), Schema.compile(new.spec)
        violations = breaking_changes(old_schema, new_schema)
        retired = retired_fields(old_schema, new_schema) if not violations else []
        if retired:
            violations = await _still_set(ctx, old.spec.plural, old_schema.object_cls, retired)
        if violations:
            raise Invalid.of(violations, what=f"schema update of {new.metadata.name}")
        await self._refuse_clashes(ctx, new)

    async def after_write(self, ctx: KindContext, obj: v1.ResourceDefinition) -> None:
        """Reply only once this apiserver serves the kind as defined (at most `SERVED_WITHIN` s), so a client may
        create objects of the kind as soon as its definition call returns. Other apiservers (and the other workers
        of `--workers N`) follow within a second, and one that has not yet waits for the kind on its first request
        instead of refusing it (`DefinitionServer.find_kind`)."""
        if ctx.kinds is None:
            return

        def served(kinds: KindTable) -> bool:
            strategy = kinds.get(obj.spec.plural)
            definition = getattr(strategy, "definition", None)
            return definition is not None and definition.spec == obj.spec

        if not await ctx.kinds.wait_until(served, SERVED_WITHIN):
            log.warning("definition stored but its kind is not served yet", definition=obj.metadata.name)

    async def _refuse_clashes(self, ctx: KindContext, obj: v1.ResourceDefinition) -> None:
        """Invalid when a name of the kind is taken by a built-in kind or another stored definition."""
        taken: dict[str, str] = {}
        for builtin in meta.KINDS.values():
            taken.update(dict.fromkeys(builtin.names(), f"built-in kind {builtin.kind}"))
        async for page in ctx.store.pages(self.plural):
            for item in page.items:
                if item.name != obj.metadata.name:
                    other = codec.decode(v1.ResourceDefinition, item.value, item.mod_revision)
                    taken.update({name: f"definition {item.name}" for _, name in _names(other.spec)})
        violations = [
            FieldViolation(path, f"{quote(name)} is taken by {taken[name]}")
            for path, name in _names(obj.spec)
            if name in taken
        ]
        if violations:
            raise Invalid.of(violations, what=f"definition {obj.metadata.name}")

    async def plan_delete(self, ctx: KindContext, obj: v1.ResourceDefinition, *, force: bool, now: float) -> str:
        """REMOVE (with every object) when forced or when no object holds a finalizer; NOOP when already marked;
        otherwise MARK, after marking every object of the kind for deletion (see the module docstring)."""
        if force:
            return REMOVE
        if obj.metadata.HasField("deletion_timestamp"):
            return NOOP
        cls = Schema.compile(obj.spec).object_cls
        instances = [
            codec.decode(cls, item.value, item.mod_revision)
            async for page in ctx.store.pages(obj.spec.plural)
            for item in page.items
        ]
        finalized = [i for i in instances if i.metadata.finalizers]
        if not finalized:
            return REMOVE
        for instance in instances:
            await _mark_instance(ctx, obj.spec.plural, instance, now)
        return MARK

    def removable_after_update(self, obj: v1.ResourceDefinition) -> bool:
        """Never on update: a definition marked for deletion goes once its last object is gone."""
        return False

    async def remove(self, ctx: KindContext, obj: v1.ResourceDefinition, *, also: list[Also] | None = None) -> int:
        """Delete the definition and every object of its kind in one transaction; how many objects went."""
        return await ctx.store.delete_with_contents(
            self.plural,
            obj.metadata.name,
            expected_revision=int(obj.metadata.resource_version),
            contents=obj.spec.plural,
        )


async def _mark_instance(ctx: KindContext, plural: str, instance: Any, now: float) -> None:
    """Remove `instance` when it holds no finalizer, else mark it for deletion. Compare-and-swap: an object that
    changed meanwhile raises Conflict, and the delete is tried again from a fresh read; one that went is fine."""
    name, revision = meta.key_of(instance), int(instance.metadata.resource_version)
    try:
        if not instance.metadata.finalizers:
            await ctx.store.delete(plural, name, expected_revision=revision)
        elif not instance.metadata.HasField("deletion_timestamp"):
            stamp(instance.metadata.deletion_timestamp, now)
            await ctx.store.update(plural, name, codec.encode(instance), expected_revision=revision)
    except NotFound:
        pass


async def _still_set(
    ctx: KindContext, plural: str, cls: type[object], retired: list[RetiredField]
) -> list[FieldViolation]:
    """A violation for each retired field that stored objects still set ("3 objects still set spec.compress")."""
    counts = dict.fromkeys(retired, 0)
    async for page in ctx.store.pages(plural):
        for item in page.items:
            obj = codec.decode(cls, item.value, item.mod_revision)
            for field in retired:
                counts[field] += holds_field(obj, field)
    return [
        FieldViolation(
            f.path, f"{n} object{'s' if n != 1 else ''} still set{'s' if n == 1 else ''} {f.path}; clear it first"
        )
        for f, n in counts.items()
        if n
    ]


STRATEGY = ResourceDefinitionStrategy(KIND)

__all__ = ["STRATEGY", "VERBS", "ResourceDefinitionStrategy", "definition_spec"]
