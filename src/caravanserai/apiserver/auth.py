"""Who is calling (authentication) and whether they may (authorization).

Identity comes from the client certificate's common name under mutual TLS, or from a bearer token listed in the
token file (`token,user[,group;group]` per line). User names carry the role:

| identity            | may                                                                                  |
|---------------------|--------------------------------------------------------------------------------------|
| `admin`, group admin| everything                                                                           |
| `controller:<name>` | read everything; write project status, node status, leases, events; delete projects; |
|                     | garbage collection on every kind (`collects`): delete an object with owner           |
|                     | references, update one only to drop owner references or the `foregroundDeletion` /   |
|                     | `orphan` finalizer; per-controller exceptions of a kind (`controller_allows`):       |
|                     | `controller:autoscaler` labels a Node into a node group, cordons and deletes (never  |
|                     | forced) the Nodes of groups (`kinds.node.autoscaler_allows`); emptying a namespace   |
|                     | being deleted: delete any object in it, and the namespace itself once marked          |
| `node:<name>`       | read the projects it runs: bound to it, or handed over from it while the hand-off    |
|                     | lasts (`kinds.project.strategy.node_sees`: a get of another is refused, lists and    |
|                     | watches carry only those, so no project spec leaves the nodes that run it); read     |
|                     | every Route (its ingress routes any host to the node that runs it, `kinds.route`)    |
|                     | and every Node (their addresses; no project data);                                   |
|                     | write its own Node and Lease and the status of projects bound to it (also the write  |
|                     | that unbinds one after a move asked of it: `finish_move`); create events, update its  |
|                     | own events; read the Secrets, Configs and BackupRepositories a project bound to it    |
|                     | references, and the Secrets of those repositories (lists and watches carry only       |
|                     | those: the node authorizer's rule, `kinds.nodegraph`); never its Node's taints,      |
|                     | cordon or labels outside its own (`kinds.node.node_restricted`: NodeRestriction)     |
| anyone else         | what their roles grant (`apiserver.rbac`: Roles and ClusterRoles bound by RoleBindings |
|                     | and ClusterRoleBindings to the user or a group of theirs); by default the binding      |
|                     | `authenticated-view` grants `view` (read everything but Secrets) to everyone           |
|                     | (`kinds.rbacdefaults`); whoever writes a role or a binding must hold what it grants    |

Whoever may create or update objects of a kind, only an admin may set the fields its strategy's `admin_only` names
(projects: privileged containers, devices, the host network, HostPath volumes); the refusal names each field.

A project's logs, exec and port-forward are subresources (`projects/log` with `get`, `projects/exec` and
`projects/portforward` with `create`, `meta.SUBRESOURCES`) that only admin and roles grant, never a node's or a
controller's fixed rules; the agents ask through `Authorize` (`decide`), requests never name them.

Custom kinds: only `admin` writes ResourceDefinitions; `controller:*` identities also write objects of custom
kinds and their status; `node:*` identities may use only the verbs a definition lists in `nodeVerbs`. The
per-kind rules live in each kind's strategy (`controller_writes`, `node_allows`).

AdmissionPolicies: only `admin` writes them; every identity, nodes included, reads them (`kinds.admissionpolicy`).

With authentication off (no TLS client CA and no token file: a loopback development cluster) every caller is
`admin`. Every denial is PERMISSION_DENIED and logged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from caravanserai import meta
from caravanserai.apiserver.kinds import KindStrategy, KindTable, rbacdefaults
from caravanserai.apiserver.kinds.nodegraph import NO_GRAPH, NodeGraph
from caravanserai.apiserver.rbac import Decision, RoleIndex
from caravanserai.errors import Forbidden
from caravanserai.process.identity import LOCAL_ADMIN, Authenticator, Identity, load_token_file

log = structlog.get_logger(__name__)

READ_VERBS = frozenset({"get", "list", "watch"})
WRITE_VERBS = frozenset({"create", "update"})
"""Verbs that write a spec: a writer other than admin is also refused the fields its strategy keeps for admins."""


class Authorizer:
    """The table above, as code: the role rules here, the per-kind rules in each kind's strategy
    (`controller_writes`, `node_allows`). `check` raises Forbidden (and logs) or returns."""

    def __init__(
        self,
        kinds: KindTable,
        *,
        graph: NodeGraph = NO_GRAPH,
        terminating: Callable[[str], bool] = lambda _: False,
        roles: RoleIndex | None = None,
    ) -> None:
        self._kinds = kinds
        self._graph = graph
        self._terminating = terminating  # is this namespace being deleted?
        self.roles = roles or rbacdefaults.default_index()  # without role caches: a fresh cluster's policy

    def check(
        self,
        who: Identity,
        verb: str,
        resource: str,
        *,
        name: str = "",
        obj: Any = None,
        old: Any = None,
        field_selector: str = "",
        force: bool = False,
        namespace: str | None = None,
    ) -> None:
        """Return when `who` may do `verb` on `resource` (the object `name`/`obj`, `old` its stored state) in
        `namespace` (default: `obj`'s; "" for every namespace or a cluster-wide kind); Forbidden saying why."""
        if namespace is None:
            namespace = obj.metadata.namespace if obj is not None else ""
        target = f"{resource}/{name}" if name else resource
        decision = self.decide(
            who, verb, resource, name=name, obj=obj, old=old, field_selector=field_selector, force=force,
            namespace=namespace,
        )  # fmt: skip
        if not decision.allowed:
            log.warning("permission denied", user=who.user, verb=verb, target=target, namespace=namespace)
            raise Forbidden(f"{who.user} may not {verb} {target}" + (f": {decision.reason}" if decision.reason else ""))
        strategy = self._kinds.get(resource)
        if who.is_admin or obj is None or strategy is None:
            return
        self._no_escalation(who, verb, strategy, obj, target)
        if who.node is not None:
            restricted = strategy.node_restricted(who.node, verb, obj, old)
            if restricted:
                paths = [f.field for f in restricted]
                log.warning("permission denied", user=who.user, verb=verb, target=target, fields=paths)
                raise Forbidden(f"{who.user} may not {verb} {target}: " + "; ".join(str(f) for f in restricted))
        if verb not in WRITE_VERBS or collects(verb, obj, old):
            return
        fields = strategy.admin_only(obj)
        if fields:
            log.warning("permission denied", user=who.user, verb=verb, target=target, fields=[f.field for f in fields])
            raise Forbidden(f"{who.user} may not {verb} {target}: " + "; ".join(str(f) for f in fields))

    def decide(
        self,
        who: Identity,
        verb: str,
        resource: str,
        *,
        namespace: str,
        name: str = "",
        obj: Any = None,
        old: Any = None,
        field_selector: str = "",
        force: bool = False,
    ) -> Decision:
        """The answer of `check` without raising (also what `caractrl auth can-i` is told): for identities under
        roles, with the binding that allows it or what is missing; for the others, "" as the reason."""
        if resource in meta.SUBRESOURCES:
            return self._decide_subresource(who, verb, resource, namespace=namespace, name=name)
        strategy = self._kinds.get(resource)
        if not (who.is_admin or who.node is not None or who.is_controller):
            cluster_scoped = strategy is None or strategy.kind.cluster_scoped
            return self.roles.decide(who, verb, resource, namespace=namespace, name=name, cluster_scoped=cluster_scoped)
        allowed = self._allowed(who, verb, resource, name=name, obj=obj, old=old, field_selector=field_selector)
        if not allowed and who.controller is not None and not who.is_admin:
            allowed = strategy is not None and strategy.controller_allows(
                who.controller, verb, obj=obj, old=old, force=force
            )
        return Decision(allowed, "")

    def _decide_subresource(self, who: Identity, verb: str, resource: str, *, namespace: str, name: str) -> Decision:
        """A project's logs, exec or port-forward (`meta.SUBRESOURCES`, served by the agents): admin, and whoever a
        role grants it; never a node or a controller, whatever their fixed rules let them read."""
        if who.is_admin:
            return Decision(True, "")
        if who.node is not None or who.is_controller:
            return Decision(False, f"nodes and controllers are never allowed {resource}")
        base = self._kinds.get(resource.partition("/")[0])
        cluster_scoped = base is None or base.kind.cluster_scoped
        return self.roles.decide(who, verb, resource, namespace=namespace, name=name, cluster_scoped=cluster_scoped)

    def _no_escalation(self, who: Identity, verb: str, strategy: KindStrategy[Any], obj: Any, target: str) -> None:
        """Forbidden when `obj` (a role or a binding being written) grants what `who` does not hold where it
        grants it."""
        granted = strategy.granted(obj, self.roles) if verb in WRITE_VERBS else None
        if granted is None:
            return
        namespace, rules = granted
        missing = self.roles.covers(who, rules, namespace=namespace)
        if missing:
            where = f"in namespace {namespace}" if namespace else "across the cluster"
            log.warning("permission denied: escalation", user=who.user, verb=verb, target=target, missing=missing)
            raise Forbidden(f"{who.user} may not {verb} {target}: it grants what they do not hold {where}: "
                            + ", ".join(missing))  # fmt: skip

    def _allowed(self, who: Identity, verb: str, resource: str, **ctx: Any) -> bool:
        if who.is_admin:
            return True
        strategy = self._kinds.get(resource)
        if who.node is not None:
            if strategy is not None and strategy.node_reads_referenced and verb in READ_VERBS:
                obj = ctx.get("obj")
                key = meta.key_of(obj) if obj is not None else ctx.get("name", "")
                return verb != "get" or self._graph.allows(who.node, resource, key)
            return strategy is not None and strategy.node_allows(who.node, verb, **ctx)
        if who.is_controller:
            if verb in READ_VERBS or (strategy is not None and verb in strategy.controller_writes):
                return True
            return collects(verb, ctx.get("obj"), ctx.get("old")) or self._empties_namespace(
                verb, strategy, ctx.get("obj")
            )
        return False  # anyone else is judged by their roles (`decide`)

    def _empties_namespace(self, verb: str, strategy: KindStrategy[Any] | None, obj: Any) -> bool:
        """A delete of an object in a namespace being deleted (the namespace controller's work)."""
        if verb != "delete" or obj is None or strategy is None or strategy.kind.cluster_scoped:
            return False
        return self._terminating(obj.metadata.namespace)

    def visible(self, who: Identity, strategy: KindStrategy[Any]) -> Callable[[Any], bool] | None:
        """For lists and watches: which objects `who` may see, or None when every object the selectors pick is
        visible. A node sees only the referenced objects of kinds it reads that way, and only the projects it runs
        (`node_filters`: the kind's `node_sees`)."""
        node = who.node
        if node is None or who.is_admin:
            return None
        if strategy.node_filters:
            return lambda obj: strategy.node_sees(node, obj)
        if not strategy.node_reads_referenced:
            return None
        graph, resource = self._graph, strategy.plural
        return lambda obj: graph.allows(node, resource, meta.key_of(obj))


GC_FINALIZERS = frozenset({meta.FINALIZER_FOREGROUND, meta.FINALIZER_ORPHAN})


def collects(verb: str, obj: Any, old: Any) -> bool:
    """Is this write garbage collection (allowed to `controller:*` identities on every kind)? A delete of an object
    with owner references (a dependent), or an update that only drops owner references and the propagation
    finalizers (`foregroundDeletion`, `orphan`): nothing else of the object changes."""
    if verb == "delete":
        return obj is not None and bool(obj.metadata.owner_references)
    if verb != "update" or obj is None or old is None:
        return False
    refs, finalizers = list(obj.metadata.owner_references), list(obj.metadata.finalizers)
    if any(ref not in old.metadata.owner_references for ref in refs):
        return False
    if any(f not in old.metadata.finalizers for f in finalizers):
        return False
    if any(f not in finalizers and f not in GC_FINALIZERS for f in old.metadata.finalizers):
        return False
    before, after = meta.copy(old), meta.copy(obj)
    for message in (before, after):
        del message.metadata.owner_references[:]
        del message.metadata.finalizers[:]
    return bool(before == after)


__all__ = ["GC_FINALIZERS", "collects", "Authenticator", "Authorizer", "Identity", "LOCAL_ADMIN", "load_token_file"]
