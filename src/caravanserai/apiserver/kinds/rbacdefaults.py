"""The built-in ClusterRoles and the default binding, which every apiserver makes sure of before it serves.

* `view`: read every kind (custom kinds included) except Secrets and the RBAC kinds; never a project's logs
  (`projects/log`: containers may print what they read of Secrets, which `view` never reads), exec or port-forward.
* `edit`: `view`, plus reading Secrets and creating, updating and deleting the namespaced workload kinds
  (projects, projectsets, secrets, configs, backuprepositories, events) — not their status, which the control plane
  writes (a queued project is admitted by the queue in its turn, never by its owner) — and a project's logs
  (`get projects/log`), exec and port-forward (`create projects/exec`, `create projects/portforward`). Kubernetes'
  `view` reads `pods/log`; ours does not.
* `admin`: `edit`, plus roles and rolebindings (granted in a namespace through a RoleBinding, it lets a team lead
  manage who may do what there).
* `cluster-admin`: everything.
* ClusterRoleBinding `authenticated-view`: `view` for the group `system:authenticated`, so that what an
  authenticated identity could do before roles existed (read everything but Secrets) stays as it was. A cluster
  whose teams must not read each other's projects sets the annotation `caravanserai.io/autoupdate: "false"` on it
  and removes its subjects (deleting it is undone at the next start, as Kubernetes does with its bootstrap policy).

Guarantees: each is created when absent and brought back to its default when it differs, unless it carries
`caravanserai.io/autoupdate: "false"`. Several apiservers starting at once race harmlessly (compare-and-swap).
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

import structlog

from caravanserai import meta, v1
from caravanserai.apiserver import codec
from caravanserai.apiserver.kinds.base import stamp
from caravanserai.apiserver.rbac import ALL, AUTHENTICATED, RoleIndex
from caravanserai.errors import AlreadyExists, Conflict, NotFound
from caravanserai.storage import Store

log = structlog.get_logger(__name__)
R = TypeVar("R", v1.ClusterRole, v1.ClusterRoleBinding)

AUTOUPDATE = "caravanserai.io/autoupdate"
READ = ("get", "list", "watch")
WRITE = ("create", "update", "update_status", "delete")
EDIT = ("create", "update", "delete")  # no status writes: the control plane's (Kubernetes' edit has no */status)
WORKLOADS = ("projects", "projectsets", "secrets", "configs", "backuprepositories", "events")
RBAC_KINDS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
NAMESPACE_RBAC = ("roles", "rolebindings")
PROJECT_ACCESS = ("projects/log", "projects/exec", "projects/portforward")  # `meta.SUBRESOURCES`


def _rule(verbs: tuple[str, ...], kinds: tuple[str, ...]) -> v1.PolicyRule:
    return v1.PolicyRule(verbs=list(verbs), kinds=list(kinds))


def default_roles() -> dict[str, list[v1.PolicyRule]]:
    """The built-in ClusterRoles' rules, by name."""
    view = [v1.PolicyRule(verbs=list(READ), kinds=[ALL], except_kinds=["secrets", *RBAC_KINDS, *PROJECT_ACCESS])]
    access = [_rule((meta.SUBRESOURCES[sub],), (sub,)) for sub in PROJECT_ACCESS]
    edit = [*view, _rule(READ, ("secrets",)), _rule(EDIT, WORKLOADS), *access]
    admin = [*edit, _rule((*READ, *WRITE), NAMESPACE_RBAC)]
    return {"view": view, "edit": edit, "admin": admin, "cluster-admin": [_rule((ALL,), (ALL,))]}


def _role(name: str, rules: list[v1.PolicyRule], now: float) -> v1.ClusterRole:
    role = meta.with_type_meta(v1.ClusterRole(metadata=v1.ObjectMeta(name=name)))
    role.spec.rules.extend(rules)
    return _stamped(role, now)


def _binding(now: float) -> v1.ClusterRoleBinding:
    binding = meta.with_type_meta(v1.ClusterRoleBinding(metadata=v1.ObjectMeta(name="authenticated-view")))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="view"))
    binding.spec.subjects.add(kind="Group", name=AUTHENTICATED)
    return _stamped(binding, now)


def _stamped(obj: R, now: float) -> R:
    obj.metadata.uid, obj.metadata.generation = str(uuid.uuid4()), 1
    obj.metadata.annotations[AUTOUPDATE] = "true"
    stamp(obj.metadata.creation_timestamp, now)
    return obj


async def _ensure(store: Store, resource: str, wanted: Any) -> None:
    name = wanted.metadata.name
    for _ in range(5):
        try:
            item = await store.get(resource, name)
        except NotFound:
            try:
                await store.create(resource, name, codec.encode(wanted))
                log.info("created a built-in role object", resource=resource, name=name)
                return
            except AlreadyExists:
                continue
        stored = codec.decode(type(wanted), item.value, 0)
        if stored.metadata.annotations.get(AUTOUPDATE) == "false" or stored.spec == wanted.spec:
            return
        stored.spec.CopyFrom(wanted.spec)
        stored.metadata.generation += 1
        try:
            await store.update(resource, name, codec.encode(stored), expected_revision=item.mod_revision)
            log.info("brought a built-in role object back to its default", resource=resource, name=name)
            return
        except (Conflict, NotFound):
            continue


def default_objects(now: float = 0.0) -> list[v1.ClusterRole | v1.ClusterRoleBinding]:
    """The built-in ClusterRoles and the default binding, as a fresh cluster holds them."""
    return [*(_role(name, rules, now) for name, rules in default_roles().items()), _binding(now)]


def default_index() -> RoleIndex:
    """The grants of a fresh cluster (an authorizer without role caches judges by these)."""
    return RoleIndex.of(default_objects())


async def ensure_defaults(store: Store, *, now: float) -> None:
    """The built-in ClusterRoles and the default binding exist and are as defined (module docstring)."""
    for obj in default_objects(now):
        await _ensure(store, meta.kind_of(obj).plural, obj)


__all__ = ["AUTOUPDATE", "default_index", "default_objects", "default_roles", "ensure_defaults"]
