"""The owner-reference helpers of `caravanserai.meta`."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1


def _stored(name: str, uid: str) -> v1.Project:
    project = v1.Project()
    project.metadata.name = name
    project.metadata.uid = uid
    return project


def test_owner_reference_names_kind_name_and_uid() -> None:
    ref = meta.owner_reference(_stored("web", "u-1"), controller=True)
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == (v1.API_VERSION, "Project", "web", "u-1")
    assert ref.controller and ref.block_owner_deletion


def test_owner_reference_requires_a_stored_owner() -> None:
    with pytest.raises(ValueError, match="no uid"):
        meta.owner_reference(_stored("web", ""))


def test_set_owner_replaces_the_same_uid_and_keeps_one_controller() -> None:
    dependent = _stored("child", "u-c")
    owner = _stored("web", "u-1")
    meta.set_owner(dependent, owner)
    meta.set_owner(dependent, owner, controller=True)
    assert len(dependent.metadata.owner_references) == 1
    assert meta.controller_of(dependent) == meta.owner_reference(owner, controller=True)
    with pytest.raises(ValueError, match="already controlled by Project 'web'"):
        meta.set_owner(dependent, _stored("other", "u-2"), controller=True)


def test_is_owned_by_compares_uids_not_names() -> None:
    dependent = _stored("child", "u-c")
    meta.set_owner(dependent, _stored("web", "u-1"))
    assert meta.is_owned_by(dependent, _stored("web", "u-1"))
    assert not meta.is_owned_by(dependent, _stored("web", "u-2"))  # recreated with the same name


def test_remove_owner_drops_only_that_uid() -> None:
    dependent = _stored("child", "u-c")
    meta.set_owner(dependent, _stored("a", "u-1"))
    meta.set_owner(dependent, _stored("b", "u-2"))
    assert meta.remove_owner(dependent, "u-1")
    assert not meta.remove_owner(dependent, "u-1")
    assert [ref.name for ref in dependent.metadata.owner_references] == ["b"]
