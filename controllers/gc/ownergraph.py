"""The ownership graph of one sweep, and what the owner collector does to each object, as pure functions.

`OwnerGraph` indexes listed objects of every kind by uid and by the uids their `metadata.ownerReferences` name.
`plan_owner` and `plan_dependent` decide, from the graph alone, what an object needs (Kubernetes' garbage
collector rules):

* an owner marked for deletion with the `orphan` finalizer → its dependents lose their reference to it, then the
  finalizer goes (Orphan propagation);
* an owner marked for deletion with the `foregroundDeletion` finalizer → its dependents not yet deleting are
  deleted; once none with blockOwnerDeletion is left, the finalizer goes (Foreground propagation);
* a dependent none of whose owners is in the graph (no object with the referenced uid) → deleted (Background
  propagation, and owners deleted long ago). The caller confirms this with live reads: the graph is made of lists
  taken one kind after another, not one snapshot.

An owner recreated under the same name has a new uid, so the dependents of the old one are collected.

Namespaces (Kubernetes' rules): a namespaced dependent's owner is in the dependent's namespace or cluster-wide; an
object of a namespaced kind elsewhere (another namespace) with the referenced uid is not its owner. A cluster-wide
dependent (today every custom kind's objects) may name an owner of a namespaced kind, e.g. a Project: that owner is
the object of that kind with the referenced name and uid in whichever namespace it is (custom kinds cannot be
namespaced yet, and their objects owned by projects are collected with them as before namespaces; Kubernetes
leaves such references unresolved).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from caravanserai import meta


@dataclass(frozen=True, slots=True)
class Node:
    """One listed object and its kind."""

    kind: meta.Kind
    obj: Any

    @property
    def uid(self) -> str:
        return str(self.obj.metadata.uid)

    @property
    def name(self) -> str:
        return str(self.obj.metadata.name)

    @property
    def namespace(self) -> str:
        """The object's namespace ("" for a cluster-wide object)."""
        return meta.namespace_of(self.obj)

    @property
    def key(self) -> str:
        """The object's key (`meta.key_of`)."""
        return meta.key_of(self.obj)

    @property
    def deleting(self) -> bool:
        return bool(self.obj.metadata.HasField("deletion_timestamp"))

    def __str__(self) -> str:
        return f"{self.kind.kind.lower()}/{self.key}"


@dataclass(slots=True)
class OwnerGraph:
    """Objects by uid, and each owner uid's dependents."""

    nodes: list[Node] = field(default_factory=list)
    by_uid: dict[str, Node] = field(default_factory=dict)
    dependents: dict[str, list[Node]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> OwnerGraph:
        graph = cls()
        for node in nodes:
            graph.nodes.append(node)
            graph.by_uid[node.uid] = node
            for ref in node.obj.metadata.owner_references:
                graph.dependents.setdefault(ref.uid, []).append(node)
        for owner_uid, dependents in graph.dependents.items():
            owner = graph.by_uid.get(owner_uid)
            if owner is not None:
                dependents[:] = [d for d in dependents if may_own(owner, d)]
        return graph

    def owns(self, ref: Any, dependent: Node) -> bool:
        """Whether the reference `ref` of `dependent` names an object of the graph that may own it (`may_own`)."""
        owner = self.by_uid.get(ref.uid)
        return owner is not None and may_own(owner, dependent)


def may_own(owner: Node, dependent: Node) -> bool:
    """Whether `owner` may be an owner of `dependent`: a cluster-wide owner, or one of a cluster-wide dependent
    (module docstring), or one in the namespaced dependent's namespace."""
    if owner.kind.cluster_scoped or dependent.kind.cluster_scoped:
        return True
    return owner.namespace == dependent.namespace


class Action(enum.Enum):
    KEEP = "keep"
    ORPHAN = "orphan"  # remove the references to this owner from its dependents, then its orphan finalizer
    FOREGROUND = "foreground"  # delete its dependents; its finalizer once no blocking dependent is left
    DELETE = "delete"  # a dependent whose owners are all gone


def plan_owner(node: Node) -> Action:
    """What an owner marked for deletion needs: ORPHAN, FOREGROUND or KEEP (orphan goes first when both are set)."""
    if not node.deleting:
        return Action.KEEP
    finalizers = node.obj.metadata.finalizers
    if meta.FINALIZER_ORPHAN in finalizers:
        return Action.ORPHAN
    if meta.FINALIZER_FOREGROUND in finalizers:
        return Action.FOREGROUND
    return Action.KEEP


def plan_dependent(node: Node, graph: OwnerGraph) -> Action:
    """DELETE when `node` has owner references and none names an object of the graph that may own it (`may_own`);
    KEEP otherwise (also when it is already being deleted)."""
    refs = node.obj.metadata.owner_references
    if not refs or node.deleting:
        return Action.KEEP
    return Action.KEEP if any(graph.owns(ref, node) for ref in refs) else Action.DELETE


def blocking(owner_uid: str, dependents: Iterable[Node]) -> list[Node]:
    """The dependents whose reference to `owner_uid` has blockOwnerDeletion: a Foreground deletion waits for them."""
    return [
        node
        for node in dependents
        if any(ref.uid == owner_uid and ref.block_owner_deletion for ref in node.obj.metadata.owner_references)
    ]


__all__ = ["Action", "Node", "OwnerGraph", "blocking", "may_own", "plan_dependent", "plan_owner"]
