"""The owner collector's pure decisions (`controllers.gc.ownergraph`)."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.controllers.gc.ownergraph import Action, Node, OwnerGraph, blocking, plan_dependent, plan_owner

PROJECTS = meta.KINDS["projects"]


def node(
    name: str, uid: str, *owners: tuple[str, bool], finalizers: tuple[str, ...] = (), deleting: bool = False
) -> Node:
    obj = v1.Project()
    obj.metadata.name, obj.metadata.uid = name, uid
    for owner_uid, block in owners:
        obj.metadata.owner_references.add(
            kind="Project", name=f"of-{owner_uid}", uid=owner_uid, block_owner_deletion=block
        )
    obj.metadata.finalizers.extend(finalizers)
    if deleting:
        obj.metadata.deletion_timestamp.CopyFrom(timestamp(1.0))
    return Node(PROJECTS, obj)


def test_a_dependent_is_deleted_only_when_no_owner_is_in_the_graph() -> None:
    owner = node("owner", "u-1")
    alive = node("a", "u-a", ("u-1", True))
    orphaned = node("b", "u-b", ("u-gone", True))
    mixed = node("c", "u-c", ("u-gone", True), ("u-1", False))
    free = node("d", "u-d")
    graph = OwnerGraph.of([owner, alive, orphaned, mixed, free])
    assert [plan_dependent(n, graph) for n in (alive, orphaned, mixed, free)] == [
        Action.KEEP,
        Action.DELETE,
        Action.KEEP,
        Action.KEEP,
    ]
    assert plan_dependent(node("e", "u-e", ("u-gone", True), deleting=True), graph) is Action.KEEP


def test_owners_marked_for_deletion_with_a_propagation_finalizer() -> None:
    assert plan_owner(node("o", "u", finalizers=(meta.FINALIZER_FOREGROUND,), deleting=True)) is Action.FOREGROUND
    both = (meta.FINALIZER_FOREGROUND, meta.FINALIZER_ORPHAN)
    assert plan_owner(node("o", "u", finalizers=both, deleting=True)) is Action.ORPHAN
    assert plan_owner(node("o", "u", finalizers=(meta.FINALIZER_ORPHAN,))) is Action.KEEP  # not being deleted
    assert plan_owner(node("o", "u", finalizers=("example.com/x",), deleting=True)) is Action.KEEP


def test_only_dependents_with_block_owner_deletion_block() -> None:
    blocker, other = node("a", "u-a", ("u-1", True)), node("b", "u-b", ("u-1", False))
    graph = OwnerGraph.of([blocker, other])
    assert graph.dependents["u-1"] == [blocker, other]
    assert blocking("u-1", graph.dependents["u-1"]) == [blocker]
