"""The authorization matrix of the built-in roles: role × how it is bound × verb × kind (and the project
subresources logs, exec and port-forward) × namespace, every cell checked against the table below (written out by
hand, not derived from the roles' code)."""

from __future__ import annotations

import itertools

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.apiserver.kinds.rbacdefaults import default_objects
from caravanserai.apiserver.rbac import VERBS, RoleIndex
from caravanserai.errors import Forbidden
from caravanserai.process.identity import Identity

RBAC = {"roles", "rolebindings", "clusterroles", "clusterrolebindings"}
WORKLOADS = {"projects", "projectsets", "secrets", "configs", "backuprepositories", "events"}
READS = {"get", "list", "watch"}
ACCESS = {"projects/log": "get", "projects/exec": "create", "projects/portforward": "create"}  # subresource: verb
KINDS = sorted(meta.KINDS) + sorted(ACCESS)
NAMESPACES = ("team-a", "team-b", "")  # the bound namespace, another, every namespace


def expected(role: str, verb: str, kind: str) -> bool:
    """What each built-in ClusterRole allows, wherever it applies."""
    if role == "cluster-admin":
        return True
    if kind in ACCESS:  # never view: logs may print Secrets
        return role in {"edit", "admin"} and verb == ACCESS[kind]
    if role == "view":
        return verb in READS and kind != "secrets" and kind not in RBAC
    edit = (verb in READS and kind not in RBAC) or (kind in WORKLOADS and verb != "update_status")
    if role == "edit":
        return edit
    if role == "admin":
        return edit or kind in {"roles", "rolebindings"}
    return False  # no role at all


def _index(role: str, bound: str) -> RoleIndex:
    """The built-in roles (without the default binding), `role` bound to user u by a RoleBinding in team-a or a
    ClusterRoleBinding."""
    roles = [o for o in default_objects() if isinstance(o, v1.ClusterRole)]
    if role == "none":
        return RoleIndex.of(roles)
    spec = v1.RoleBindingSpec(
        role_ref=v1.RoleRef(kind="ClusterRole", name=role), subjects=[v1.Subject(kind="User", name="u")]
    )
    binding: v1.RoleBinding | v1.ClusterRoleBinding
    if bound == "rolebinding":
        binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="b", namespace="team-a"), spec=spec)
    else:
        binding = v1.ClusterRoleBinding(metadata=v1.ObjectMeta(name="b"), spec=spec)
    return RoleIndex.of([*roles, binding])


@pytest.mark.parametrize("bound", ["rolebinding", "clusterrolebinding"])
@pytest.mark.parametrize("role", ["view", "edit", "admin", "cluster-admin", "none"])
def test_every_cell(role: str, bound: str) -> None:
    authz = Authorizer(builtin_kinds(), roles=_index(role, bound))
    who = Identity("u")
    wrong: list[str] = []
    cells = 0
    for verb, kind, namespace in itertools.product(VERBS, KINDS, NAMESPACES):
        cluster_scoped = meta.KINDS[kind.partition("/")[0]].cluster_scoped
        where = "" if cluster_scoped else namespace
        applies = bound == "clusterrolebinding" or (not cluster_scoped and namespace == "team-a")
        want = applies and expected(role, verb, kind)
        got = authz.decide(who, verb, kind, namespace=where).allowed
        cells += 1
        if got != want:
            wrong.append(f"{verb} {kind} in {namespace or 'every namespace'}: got {got}, want {want}")
    assert cells == len(VERBS) * (len(meta.KINDS) + 3) * len(NAMESPACES)
    assert wrong == []


def test_the_matrix_covers_every_subresource() -> None:
    assert ACCESS == meta.SUBRESOURCES


@pytest.mark.parametrize("subresource", sorted(ACCESS))
def test_subresources_are_never_a_node_s_or_a_controller_s(subresource: str) -> None:
    """Logs, exec and port-forward: admin always; nodes and controllers never, whatever they may read; a role on
    `*` covers them (Kubernetes' wildcard), a role on `projects` does not."""
    everything = v1.ClusterRole(metadata=v1.ObjectMeta(name="all"))
    everything.spec.rules.add(verbs=["*"], kinds=["*"])
    projects = v1.ClusterRole(metadata=v1.ObjectMeta(name="projects"))
    projects.spec.rules.add(verbs=["*"], kinds=["projects"])
    bindings = []
    for role, subject in (("all", "node:n1"), ("all", "controller:gc"), ("all", "root"), ("projects", "p")):
        binding = v1.ClusterRoleBinding(metadata=v1.ObjectMeta(name=f"{role}-{subject}"))
        binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name=role))
        binding.spec.subjects.add(kind="User", name=subject)
        bindings.append(binding)
    authz = Authorizer(builtin_kinds(), roles=RoleIndex.of([everything, projects, *bindings]))
    verb = ACCESS[subresource]

    def allowed(who: Identity) -> bool:
        return authz.decide(who, verb, subresource, namespace="team-a", name="web").allowed

    assert allowed(Identity("admin")) and allowed(Identity("someone", frozenset({"admin"})))
    refused = authz.decide(Identity("node:n1"), verb, subresource, namespace="team-a", name="web")
    assert not refused.allowed and refused.reason == f"nodes and controllers are never allowed {subresource}"
    assert not allowed(Identity("controller:gc"))
    assert not allowed(Identity("gc", frozenset({"controllers"})))
    assert allowed(Identity("root"))
    assert not allowed(Identity("p"))


def test_groups_names_and_the_default_binding() -> None:
    roles = default_objects()  # with the default binding: every authenticated identity may view
    reader = v1.Role(metadata=v1.ObjectMeta(name="read-web", namespace="team-a"))
    reader.spec.rules.add(verbs=["get", "update"], kinds=["projects"], names=["web"])
    binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="ops", namespace="team-a"))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="Role", name="read-web"))
    binding.spec.subjects.add(kind="Group", name="ops")
    authz = Authorizer(builtin_kinds(), roles=RoleIndex.of([*roles, reader, binding]))
    anyone, ops = Identity("someone"), Identity("o", frozenset({"ops"}))
    assert authz.decide(anyone, "get", "projects", namespace="team-b", name="x").allowed  # authenticated-view
    assert not authz.decide(anyone, "get", "secrets", namespace="team-a", name="x").allowed  # view never reads them
    assert not authz.decide(anyone, "update", "projects", namespace="team-a", name="web").allowed
    decision = authz.decide(ops, "update", "projects", namespace="team-a", name="web")
    assert decision.allowed and decision.reason == "allowed by rolebinding team-a/ops (role read-web)"
    assert not authz.decide(ops, "update", "projects", namespace="team-a", name="api").allowed  # names limit it
    assert not authz.decide(ops, "update", "projects", namespace="team-b", name="web").allowed  # its namespace only
    denied = authz.decide(ops, "delete", "projects", namespace="team-a", name="web")
    assert denied.reason == "no role bound to o allows delete projects in namespace team-a"


def test_writing_a_role_or_a_binding_cannot_grant_more_than_one_holds() -> None:
    roles = [o for o in default_objects() if isinstance(o, v1.ClusterRole)]
    lead = v1.RoleBinding(metadata=v1.ObjectMeta(name="lead", namespace="team-a"))
    lead.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="admin"))
    lead.spec.subjects.add(kind="User", name="lead")
    authz = Authorizer(builtin_kinds(), roles=RoleIndex.of([*roles, lead]))
    who = Identity("lead")
    edit_binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="dev", namespace="team-a"))
    edit_binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="edit"))
    edit_binding.spec.subjects.add(kind="User", name="dev")
    authz.check(who, "create", "rolebindings", name="dev", obj=edit_binding)  # admin in team-a holds all of edit
    elsewhere = meta.copy(edit_binding)
    elsewhere.metadata.namespace = "team-b"
    with pytest.raises(Forbidden, match="may not create rolebindings/dev"):
        authz.check(who, "create", "rolebindings", name="dev", obj=elsewhere)  # no rights in team-b at all
    everything = v1.RoleBinding(metadata=v1.ObjectMeta(name="root", namespace="team-a"))
    everything.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="cluster-admin"))
    everything.spec.subjects.add(kind="User", name="lead")
    with pytest.raises(Forbidden, match=r"grants what they do not hold in namespace team-a: \* \*"):
        authz.check(who, "create", "rolebindings", name="root", obj=everything)
    role = v1.Role(metadata=v1.ObjectMeta(name="nodes", namespace="team-a"))
    role.spec.rules.add(verbs=["delete"], kinds=["nodes"])
    with pytest.raises(Forbidden, match="delete nodes"):
        authz.check(who, "create", "roles", name="nodes", obj=role)


def test_a_role_may_name_a_subresource_for_some_projects() -> None:
    roles = [o for o in default_objects() if isinstance(o, v1.ClusterRole)]
    reader = v1.Role(metadata=v1.ObjectMeta(name="web-logs", namespace="team-a"))
    reader.spec.rules.add(verbs=["get"], kinds=["projects/log"], names=["web"])
    binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="support", namespace="team-a"))
    binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="Role", name="web-logs"))
    binding.spec.subjects.add(kind="Group", name="support")
    lead = v1.RoleBinding(metadata=v1.ObjectMeta(name="lead", namespace="team-a"))
    lead.spec.role_ref.CopyFrom(v1.RoleRef(kind="ClusterRole", name="admin"))
    lead.spec.subjects.add(kind="User", name="lead")
    binder = v1.Role(metadata=v1.ObjectMeta(name="binder", namespace="team-a"))
    binder.spec.rules.add(verbs=["*"], kinds=["rolebindings"])
    binder_binding = v1.RoleBinding(metadata=v1.ObjectMeta(name="binder", namespace="team-a"))
    binder_binding.spec.role_ref.CopyFrom(v1.RoleRef(kind="Role", name="binder"))
    binder_binding.spec.subjects.add(kind="User", name="m")
    objects = [*roles, reader, binding, lead, binder, binder_binding]
    authz = Authorizer(builtin_kinds(), roles=RoleIndex.of(objects))
    support = Identity("s", frozenset({"support"}))
    decision = authz.decide(support, "get", "projects/log", namespace="team-a", name="web")
    assert decision.allowed and decision.reason == "allowed by rolebinding team-a/support (role web-logs)"
    assert not authz.decide(support, "get", "projects/log", namespace="team-a", name="api").allowed
    assert not authz.decide(support, "get", "projects/log", namespace="team-b", name="web").allowed
    assert not authz.decide(support, "create", "projects/exec", namespace="team-a", name="web").allowed
    authz.check(Identity("lead"), "create", "roles", name="web-logs", obj=reader)  # admin in team-a holds it
    helper = meta.copy(binding)
    helper.metadata.name = "helper"
    with pytest.raises(Forbidden, match=r"get projects/log \(names web\)"):  # m may bind, but holds no logs
        authz.check(Identity("m"), "create", "rolebindings", name="helper", obj=helper)
