"""Role-based access for the identities that are not admin, a node or a controller: which rules an identity holds,
where, from which binding (Kubernetes' RBAC, simplified).

Guarantees:

* **Deny unless granted.** Rules only add; there are no deny rules.
* **Where a grant applies.** A ClusterRoleBinding grants its ClusterRole's rules in every namespace and on the
  cluster-wide kinds. A RoleBinding grants the rules of its Role (of the same namespace) or ClusterRole within its
  own namespace only, and only on namespaced kinds. Listing or watching a namespaced kind across every namespace
  needs a cluster-wide grant.
* **Who.** A subject `User` matches the identity's user name, `Group` one of its groups; every authenticated
  identity is in the group `system:authenticated`. A binding may name a user who does not exist yet, and a role
  that does not exist yet (it grants nothing until the role is created).
* **A rule** allows a verb (or `*`) on a kind (its plural, or `*`); a rule with `names` allows only those objects,
  so never a list, a watch or a create.
* **No escalation.** Whoever is not admin may write a role or a binding only when they already hold every rule it
  would grant, where it would grant it (`covers`).
* **As fresh as the watch caches** of roles, clusterroles, rolebindings and clusterrolebindings; an identity's
  grants are computed once per revision of those caches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from caravanserai import meta, v1
from caravanserai.process.identity import Identity

VERBS = ("get", "list", "watch", "create", "update", "update_status", "delete")
"""The verbs a rule may name (or `*`)."""
ALL = "*"
AUTHENTICATED = "system:authenticated"
"""The group every authenticated identity belongs to."""
ROLES, CLUSTER_ROLES = "roles", "clusterroles"
ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS = "rolebindings", "clusterrolebindings"
RESOURCES = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)


class _Cache(Protocol):
    @property
    def objects(self) -> Mapping[str, Any]: ...

    @property
    def revision(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Grant:
    """One rule an identity holds: in `namespace` ("" = cluster-wide), from `source` (for the reasons given)."""

    rule: v1.PolicyRule
    namespace: str
    source: str


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


def rule_allows(rule: v1.PolicyRule, verb: str, resource: str, name: str) -> bool:
    """Does `rule` allow `verb` on the object `name` ("" for none: list, watch, create) of `resource`?"""
    if verb not in rule.verbs and ALL not in rule.verbs:
        return False
    if (resource not in rule.kinds and ALL not in rule.kinds) or resource in rule.except_kinds:
        return False
    return not rule.names or (bool(name) and name in rule.names)


def _covers(held: v1.PolicyRule, wanted: v1.PolicyRule, verb: str, kind: str) -> bool:
    """Does `held` cover `verb` on `kind` of `wanted` (a `*` only by a `*` leaving out no more than `wanted` does;
    names only by no names or a superset)?"""
    if verb not in held.verbs and ALL not in held.verbs:
        return False
    if kind not in held.kinds and ALL not in held.kinds:
        return False
    left_out = set(held.except_kinds)
    if kind in left_out or (kind == ALL and not left_out <= set(wanted.except_kinds)):
        return False
    return not held.names or (bool(wanted.names) and set(wanted.names) <= set(held.names))


def _subject_matches(subject: v1.Subject, who: Identity) -> bool:
    if subject.kind == "User":
        return subject.name == who.user
    return subject.kind == "Group" and (subject.name in who.groups or subject.name == AUTHENTICATED)


@dataclass(slots=True)
class Fixed:
    """Objects that never change, by key, in the shape of a watch cache (`RoleIndex.of`)."""

    objects: dict[str, Any]
    revision: int = 0


class RoleIndex:
    """The grants of identities, over the four RBAC watch caches (by plural; absent caches grant nothing)."""

    @classmethod
    def of(cls, objects: Iterable[Any]) -> RoleIndex:
        """An index over fixed role and binding objects (tests, and the policy of a fresh cluster)."""
        caches: dict[str, Fixed] = {resource: Fixed({}) for resource in RESOURCES}
        for obj in objects:
            namespace, name = obj.metadata.namespace, obj.metadata.name
            caches[meta.kind_of(obj).plural].objects[f"{namespace}/{name}" if namespace else name] = obj
        return cls(caches)

    def __init__(self, caches: Mapping[str, _Cache]) -> None:
        self._caches = {resource: caches[resource] for resource in RESOURCES if resource in caches}
        self._at: tuple[int, ...] = ()
        self._grants: dict[Identity, list[Grant]] = {}

    def _revision(self) -> tuple[int, ...]:
        return tuple(cache.revision for cache in self._caches.values())

    def _objects(self, resource: str) -> Iterable[Any]:
        cache = self._caches.get(resource)
        return cache.objects.values() if cache is not None else ()

    def role_rules(self, ref: v1.RoleRef, namespace: str) -> list[v1.PolicyRule]:
        """The rules of the role `ref` names (a Role of `namespace`, or a ClusterRole); none when it is missing."""
        resource, key = (ROLES, f"{namespace}/{ref.name}") if ref.kind == "Role" else (CLUSTER_ROLES, ref.name)
        cache = self._caches.get(resource)
        role = cache.objects.get(key) if cache is not None else None
        return list(role.spec.rules) if role is not None else []

    def grants(self, who: Identity) -> list[Grant]:
        """Every rule `who` holds, with where and from which binding."""
        revision = self._revision()
        if revision != self._at:
            self._at, self._grants = revision, {}
        found = self._grants.get(who)
        if found is None:
            found = self._grants[who] = list(self._compute(who))
        return found

    def _compute(self, who: Identity) -> Iterable[Grant]:
        for binding in self._objects(CLUSTER_ROLE_BINDINGS):
            if any(_subject_matches(s, who) for s in binding.spec.subjects):
                source = f"clusterrolebinding {binding.metadata.name} (clusterrole {binding.spec.role_ref.name})"
                for rule in self.role_rules(binding.spec.role_ref, ""):
                    yield Grant(rule, "", source)
        for binding in self._objects(ROLE_BINDINGS):
            if any(_subject_matches(s, who) for s in binding.spec.subjects):
                namespace, ref = binding.metadata.namespace, binding.spec.role_ref
                source = f"rolebinding {namespace}/{binding.metadata.name} ({ref.kind.lower()} {ref.name})"
                for rule in self.role_rules(ref, namespace):
                    yield Grant(rule, namespace, source)

    def decide(
        self, who: Identity, verb: str, resource: str, *, namespace: str, name: str, cluster_scoped: bool
    ) -> Decision:
        """May `who` do `verb` on `resource` (object `name`, "" for none) in `namespace` ("" = every namespace, or a
        cluster-wide kind)?"""
        for grant in self.grants(who):
            applies = not grant.namespace or (not cluster_scoped and grant.namespace == namespace)
            if applies and rule_allows(grant.rule, verb, resource, name):
                return Decision(True, f"allowed by {grant.source}")
        where = "" if cluster_scoped else f" in namespace {namespace}" if namespace else " in every namespace"
        return Decision(False, f"no role bound to {who.user} allows {verb} {resource}{where}")

    def covers(self, who: Identity, rules: Iterable[v1.PolicyRule], *, namespace: str) -> list[str]:
        """What of `rules` (to be granted in `namespace`, "" = cluster-wide) `who` does not hold there itself, one
        line per verb and kind missing; empty when `who` may grant them."""
        held = [g.rule for g in self.grants(who) if not g.namespace or (namespace and g.namespace == namespace)]
        missing: list[str] = []
        for rule in rules:
            for verb in rule.verbs:
                for kind in rule.kinds:
                    if not any(_covers(h, rule, verb, kind) for h in held):
                        limited = f" (names {', '.join(rule.names)})" if rule.names else ""
                        missing.append(f"{verb} {kind}{limited}")
        return missing


__all__ = [
    "ALL",
    "AUTHENTICATED",
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "RESOURCES",
    "ROLES",
    "ROLE_BINDINGS",
    "VERBS",
    "Decision",
    "Fixed",
    "Grant",
    "RoleIndex",
    "rule_allows",
]
