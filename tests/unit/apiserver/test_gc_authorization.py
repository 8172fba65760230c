"""`auth.collects`: the writes a `controller:*` identity may make on any kind as the garbage collector."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.apiserver.auth import collects


def owned(*finalizers: str) -> v1.Config:
    obj = v1.Config()
    obj.metadata.name, obj.metadata.uid = "c", "u-c"
    obj.metadata.owner_references.add(kind="Project", name="a", uid="u-a")
    obj.metadata.owner_references.add(kind="Project", name="b", uid="u-b")
    obj.metadata.finalizers.extend(finalizers)
    obj.spec.data["k"] = "v"
    return obj


def test_deleting_a_dependent_is_collection_deleting_anything_else_is_not() -> None:
    assert collects("delete", owned(), None)
    assert not collects("delete", v1.Config(), None)
    assert not collects("create", owned(), None)


def test_an_update_may_only_drop_references_and_propagation_finalizers() -> None:
    old = owned(meta.FINALIZER_ORPHAN, "example.com/keep")
    released = meta.copy(old)
    meta.remove_owner(released, "u-a")
    released.metadata.finalizers.remove(meta.FINALIZER_ORPHAN)
    assert collects("update", released, old)
    other_finalizer = meta.copy(old)
    other_finalizer.metadata.finalizers.remove("example.com/keep")
    assert not collects("update", other_finalizer, old)
    added = meta.copy(old)
    added.metadata.owner_references.add(kind="Project", name="c", uid="u-x")
    assert not collects("update", added, old)
    changed = meta.copy(released)
    changed.spec.data["k"] = "w"
    assert not collects("update", changed, old)
    labelled = meta.copy(released)
    labelled.metadata.labels["a"] = "b"
    assert not collects("update", labelled, old)
