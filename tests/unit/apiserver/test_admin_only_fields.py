"""Privileged containers, devices, the host network and HostPath volumes are for admins only: the rule lives in the
project strategy (`admin_only`), so any writer of project specs that is not an admin — today none exists, so a
stand-in role that may create and update projects plays it — is refused with every field path and who may."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.apiserver.kinds.project import KIND, ProjectStrategy
from caravanserai.errors import Forbidden
from caravanserai.process.identity import LOCAL_ADMIN, Identity
from caravanserai.testing import builders

WRITER = Identity("controller:team-deployer")
"""A writer of project specs that is not an admin (the stand-in for a later team role)."""


class TeamWritesProjects(ProjectStrategy):
    """The project strategy with one more role allowed to write specs, as a later issue's team roles will."""

    controller_writes = frozenset({"create", "update", "update_status", "delete"})


def authorizer() -> Authorizer:
    kinds = builtin_kinds()
    kinds.add(TeamWritesProjects(KIND))
    return Authorizer(kinds)


def reaching_the_host() -> v1.Project:
    project = builders.project("edge")
    project.spec.volumes.add(name="site", type=v1.VOLUME_HOST_PATH, host_path="/srv/site")
    web = project.spec.services[0]
    web.privileged = True
    web.devices.add(host_path="/dev/fuse")
    proxy = project.spec.services.add(name="proxy", image="proxy:1", network_mode=v1.NETWORK_MODE_HOST)
    proxy.ports.add(container_port=80, host_port=80)
    return project


@pytest.mark.parametrize("verb", ["create", "update"])
def test_a_writer_who_is_not_admin_is_refused_every_field_that_reaches_the_host(verb: str) -> None:
    project = reaching_the_host()
    old = builders.project("edge") if verb == "update" else None
    with pytest.raises(Forbidden) as info:
        authorizer().check(WRITER, verb, "projects", name="edge", obj=project, old=old)
    assert str(info.value) == (
        f"controller:team-deployer may not {verb} projects/edge: "
        "spec.services[0].privileged: only an admin may run a privileged container; "
        "spec.services[0].devices[0]: only an admin may give a container a node's device; "
        "spec.services[1].networkMode: only an admin may use the node's network (host); "
        "spec.volumes[0].type: only an admin may mount a host path (HostPath)"
    )


def test_the_same_writer_may_write_a_project_that_stays_in_its_containers() -> None:
    project = builders.project("edge")
    project.spec.services[0].cap_add.append("NET_ADMIN")
    project.spec.services[0].tmpfs.add(mount_path="/tmp")
    authorizer().check(WRITER, "create", "projects", name="edge", obj=project)


def test_an_admin_may_write_every_field_and_status_writes_are_not_checked() -> None:
    table = authorizer()
    table.check(LOCAL_ADMIN, "create", "projects", name="edge", obj=reaching_the_host())
    table.check(Identity("bob", frozenset({"admin"})), "update", "projects", name="edge", obj=reaching_the_host())
    table.check(WRITER, "update_status", "projects", name="edge", obj=reaching_the_host(), old=reaching_the_host())


def test_other_users_still_may_not_write_projects_at_all() -> None:
    with pytest.raises(Forbidden, match=r"^alice may not create projects/edge: no role bound to alice"):
        Authorizer(builtin_kinds()).check(
            Identity("alice"), "create", "projects", name="edge", obj=builders.project("edge")
        )
