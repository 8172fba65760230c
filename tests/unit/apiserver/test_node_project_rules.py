"""The node rules of issue #27 point 5: a node reads the projects it runs (bound to it, or handed over from it while
the hand-off lasts) and every Route, writes no Route; its lists and watches of projects carry only its own."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.errors import Forbidden
from caravanserai.process.identity import Identity

NODE = Identity("node:n1")
KINDS = builtin_kinds()


def placed(name: str, node: str, *, previous: str = "", deadline: int = 0) -> v1.Project:
    p = v1.Project(metadata=v1.ObjectMeta(name=name, namespace="default"))
    p.status.node_ref, p.status.previous_node_ref = node, previous
    if deadline:
        p.status.handoff_deadline.seconds = deadline
    return p


MINE = placed("mine", "n1")
HANDED_OVER = placed("leaving", "n2", previous="n1", deadline=1000)  # its old copy still runs on n1
MOVED_AWAY = placed("moved", "n2", previous="n1")  # finish_move: no deadline, nothing runs on n1
THEIRS = placed("theirs", "n2")
UNBOUND = placed("pending", "")


@pytest.mark.parametrize("project", [MINE, HANDED_OVER], ids=lambda p: p.metadata.name)
def test_a_node_gets_the_projects_it_runs(project: v1.Project) -> None:
    Authorizer(KINDS).check(NODE, "get", "projects", name=project.metadata.name, obj=project)


@pytest.mark.parametrize("project", [MOVED_AWAY, THEIRS, UNBOUND], ids=lambda p: p.metadata.name)
def test_a_node_gets_no_other_project(project: v1.Project) -> None:
    with pytest.raises(Forbidden, match="node:n1 may not get projects/"):
        Authorizer(KINDS).check(NODE, "get", "projects", name=project.metadata.name, obj=project)


@pytest.mark.parametrize("verb", ["list", "watch"])
def test_a_nodes_lists_and_watches_carry_only_its_projects(verb: str) -> None:
    authz = Authorizer(KINDS)
    authz.check(NODE, verb, "projects")  # allowed, and filtered:
    visible = authz.visible(NODE, KINDS.require("projects"))
    assert visible is not None
    projects = [MINE, HANDED_OVER, MOVED_AWAY, THEIRS, UNBOUND]
    assert [p.metadata.name for p in projects if visible(p)] == ["mine", "leaving"]
    assert authz.visible(Identity("admin"), KINDS.require("projects")) is None
    assert authz.visible(Identity("controller:manager"), KINDS.require("projects")) is None


def test_every_node_reads_every_route_and_writes_none() -> None:
    authz = Authorizer(KINDS)
    route = v1.Route(metadata=v1.ObjectMeta(name="theirs", namespace="default"), spec=v1.RouteSpec(project="theirs"))
    route.spec.node.node = "n2"
    for verb in ("get", "list", "watch"):
        authz.check(NODE, verb, "routes", name="theirs", obj=route if verb == "get" else None)
    assert authz.visible(NODE, KINDS.require("routes")) is None  # any node's ingress answers for any host
    for verb in ("create", "update", "delete"):
        with pytest.raises(Forbidden):
            authz.check(NODE, verb, "routes", name="theirs", obj=route, old=route)
        authz.check(Identity("controller:manager"), verb, "routes", name="theirs", obj=route, old=route)


def test_a_node_still_writes_the_status_of_its_projects_only() -> None:
    authz = Authorizer(KINDS)
    authz.check(NODE, "update_status", "projects", name="mine", obj=MINE, old=MINE)
    with pytest.raises(Forbidden):
        authz.check(NODE, "update_status", "projects", name="leaving", obj=HANDED_OVER, old=HANDED_OVER)
