"""Roles and bindings: Role and RoleBinding (namespaced), ClusterRole and ClusterRoleBinding (cluster-wide). How
the authorizer uses them: `apiserver.rbac`; the built-in ClusterRoles: `kinds.rbacdefaults`.

Rules:

* A rule names at least one verb (`get`, `list`, `watch`, `create`, `update`, `update_status`, `delete`, or `*`)
  and at least one kind: the plural of a kind this server serves, a subresource (`projects/log`,
  `projects/exec`, `projects/portforward`: `meta.SUBRESOURCES`), or `*` (which covers subresources too, as in
  Kubernetes; checked when the role is written, so a typo is refused instead of silently granting nothing).
  `names`, when given, are object names.
* A binding names its role (`spec.roleRef`: kind `Role` — RoleBindings only, in the binding's namespace — or
  `ClusterRole`, and a name) and its subjects (`User` or `Group`, with a name; the user need not exist yet, nor
  the role; none at all grants nothing, which is how the default binding is switched off). The role reference
  cannot change: delete and create the binding instead.
* Writing a role or a binding must not escalate: `granted` says what it would grant where, and the authorizer
  refuses a writer other than admin who does not hold all of it (`rbac.RoleIndex.covers`).
"""

from __future__ import annotations

from typing import Any

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindContext, KindStrategy
from caravanserai.apiserver.rbac import ALL, VERBS, RoleIndex
from caravanserai.errors import FieldViolation, Invalid
from caravanserai.text.selectors import validate_dns_subdomain, validate_reference
from caravanserai.text.violations import Violations, quote

ROLE, CLUSTER_ROLE = meta.KINDS["roles"], meta.KINDS["clusterroles"]
ROLE_BINDING, CLUSTER_ROLE_BINDING = meta.KINDS["rolebindings"], meta.KINDS["clusterrolebindings"]
SUBJECT_KINDS = ("User", "Group")


def rules(errors: Violations, path: str, items: Any) -> None:
    """The static rules of a role's rules (the kinds are checked against the served ones in `served_kinds`)."""
    for i, rule in enumerate(items):
        at = f"{path}[{i}]"
        if not rule.verbs:
            errors.add(f"{at}.verbs", f"is required (some of {', '.join(VERBS)}, or {quote(ALL)})")
        for j, verb in enumerate(rule.verbs):
            if verb not in (*VERBS, ALL):
                errors.add(
                    f"{at}.verbs[{j}]", f"{quote(verb)} is not a verb: one of {', '.join(VERBS)}, or {quote(ALL)}"
                )
        if not rule.kinds:
            errors.add(f"{at}.kinds", f"is required (plural resource names such as projects, or {quote(ALL)})")
        if rule.except_kinds and ALL not in rule.kinds:
            errors.add(f"{at}.exceptKinds", f"leaves kinds out of {quote(ALL)} only: list the kinds instead")
        for j, name in enumerate(rule.names):
            errors.check(f"{at}.names[{j}]", validate_dns_subdomain(name))


def served_kinds(ctx: KindContext, path: str, items: Any) -> None:
    """Invalid naming each rule's kind that this server does not serve."""
    if ctx.kinds is None:
        return
    served = {*ctx.kinds.plurals(), *meta.SUBRESOURCES}
    errors = Violations()
    for i, rule in enumerate(items):
        for field, kinds in (("kinds", rule.kinds), ("exceptKinds", rule.except_kinds)):
            for j, kind in enumerate(kinds):
                if kind != ALL and kind not in served:
                    errors.add(
                        f"{path}[{i}].{field}[{j}]", f"{quote(kind)} is not a kind this server serves nor a subresource"
                    )
    errors.raise_if_any(what="role")


def role_spec(errors: Violations, spec: v1.RoleSpec) -> None:
    rules(errors, "spec.rules", spec.rules)


def binding_spec(errors: Violations, spec: v1.RoleBindingSpec, *, role_kinds: tuple[str, ...]) -> None:
    errors.choice("spec.roleRef.kind", spec.role_ref.kind, role_kinds)
    if errors.required("spec.roleRef.name", spec.role_ref.name):
        errors.check("spec.roleRef.name", validate_reference(spec.role_ref.name))
    for i, subject in enumerate(spec.subjects):
        errors.choice(f"spec.subjects[{i}].kind", subject.kind, SUBJECT_KINDS)
        errors.required(f"spec.subjects[{i}].name", subject.name)


class _RoleStrategy(KindStrategy[Any]):
    """A Role or a ClusterRole (same spec)."""

    cache_decoded = True  # the authorizer reads the roles

    def validate(self, obj: Any) -> None:
        validation.check_object(obj, kind=self.kind.kind, name_rule=validate_dns_subdomain, spec_rule=role_spec)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=self.kind.kind, status_rule=validation.no_rules)

    async def before_create(self, ctx: KindContext, obj: Any) -> None:
        served_kinds(ctx, "spec.rules", obj.spec.rules)

    async def before_update(self, ctx: KindContext, old: Any, new: Any) -> None:
        served_kinds(ctx, "spec.rules", new.spec.rules)

    def granted(self, obj: Any, roles: RoleIndex) -> tuple[str, list[v1.PolicyRule]]:
        return obj.metadata.namespace, list(obj.spec.rules)


class _BindingStrategy(KindStrategy[Any]):
    """A RoleBinding or a ClusterRoleBinding (same spec)."""

    role_kinds: tuple[str, ...] = ("Role", "ClusterRole")
    cache_decoded = True  # the authorizer reads the bindings

    def validate(self, obj: Any) -> None:
        def spec_rule(errors: Violations, spec: v1.RoleBindingSpec) -> None:
            binding_spec(errors, spec, role_kinds=self.role_kinds)

        validation.check_object(obj, kind=self.kind.kind, name_rule=validate_dns_subdomain, spec_rule=spec_rule)

    def validate_status(self, obj: Any) -> None:
        validation.check_status(obj, kind=self.kind.kind, status_rule=validation.no_rules)

    async def before_update(self, ctx: KindContext, old: Any, new: Any) -> None:
        if new.spec.role_ref != old.spec.role_ref:
            was = f"{old.spec.role_ref.kind} {old.spec.role_ref.name}"
            raise Invalid.of(
                [FieldViolation("spec.roleRef", f"cannot change (was {was}): delete and create the binding")]
            )

    def granted(self, obj: Any, roles: RoleIndex) -> tuple[str, list[v1.PolicyRule]]:
        namespace = obj.metadata.namespace
        return namespace, roles.role_rules(obj.spec.role_ref, namespace)


class ClusterRoleBindingStrategy(_BindingStrategy):
    role_kinds = ("ClusterRole",)


ROLE_STRATEGY = _RoleStrategy(ROLE)
CLUSTER_ROLE_STRATEGY = _RoleStrategy(CLUSTER_ROLE)
ROLE_BINDING_STRATEGY = _BindingStrategy(ROLE_BINDING)
CLUSTER_ROLE_BINDING_STRATEGY = ClusterRoleBindingStrategy(CLUSTER_ROLE_BINDING)
STRATEGIES = (ROLE_STRATEGY, CLUSTER_ROLE_STRATEGY, ROLE_BINDING_STRATEGY, CLUSTER_ROLE_BINDING_STRATEGY)

__all__ = [
    "CLUSTER_ROLE",
    "CLUSTER_ROLE_BINDING",
    "CLUSTER_ROLE_BINDING_STRATEGY",
    "CLUSTER_ROLE_STRATEGY",
    "ROLE",
    "ROLE_BINDING",
    "ROLE_BINDING_STRATEGY",
    "ROLE_STRATEGY",
    "STRATEGIES",
    "SUBJECT_KINDS",
    "binding_spec",
    "role_spec",
    "rules",
    "served_kinds",
]
