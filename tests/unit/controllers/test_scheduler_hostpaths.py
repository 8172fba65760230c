"""The HostPaths filter: a node whose agent has --allowed-host-paths takes only projects whose HostPath volumes
are under one of them (a node without the flag takes any); the Unschedulable message counts the refusing nodes
and names the path."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.controllers.scheduler.algorithm import schedule
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import FilterContext, checks_for, host_paths_allowed
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, project_info
from caravanserai.testing import builders

NOW = 1_000_000.0
CTX = FilterContext(now=NOW, heartbeat_timeout=90.0)


def node(name: str, allowed: tuple[str, ...] = ()) -> NodeInfo:
    return NodeInfo(name, allocatable={"cpu": 4000, "memory": 2**33}, renew_time=NOW - 5, allowed_host_paths=allowed)


@pytest.mark.parametrize(
    ("paths", "allowed", "refused"),
    [
        ((), ("/srv",), None),
        (("/srv/site",), (), None),
        (("/srv/site",), ("/srv",), None),
        (("/srv/site", "/data/db"), ("/data", "/srv"), None),
        (("/srv/site", "/etc/passwd"), ("/srv",), "node(s) didn't allow host path /etc/passwd"),
        (("/srvx",), ("/srv",), "node(s) didn't allow host path /srvx"),
    ],
)
def test_host_paths_allowed(paths: tuple[str, ...], allowed: tuple[str, ...], refused: str | None) -> None:
    rejection = host_paths_allowed(ProjectInfo("p", host_paths=paths), node("n", allowed), CTX)
    assert (rejection.reason if rejection else None) == refused
    assert rejection is None or rejection.infeasible  # a node's flags do not change while it runs


def test_a_project_with_host_paths_goes_only_where_they_are_allowed_and_is_told_why_not() -> None:
    assert host_paths_allowed not in checks_for(project_info(builders.project("plain")))  # no HostPath: all fit
    proxy = builders.project("proxy")
    proxy.spec.volumes.add(name="conf", type=v1.VOLUME_HOST_PATH, host_path="/srv/proxy")
    info = project_info(proxy)
    assert info.host_paths == ("/srv/proxy",)
    nodes = [node("a", ("/data",)), node("b", ("/home", "/opt")), node("c", ("/srv",))]
    assert schedule(info, nodes, CTX).node == "c"
    decision = schedule(info, nodes[:2], CTX)
    assert decision.node is None and decision.diagnosis is not None
    assert decision.diagnosis.message() == (
        "0/2 nodes are available: 2 node(s) didn't allow host path /srv/proxy."
        " No node can ever fit this project (infeasible)."
    )


def test_a_changed_allow_list_wakes_the_scheduler() -> None:
    cache = ClusterState()
    n = v1.Node()
    n.metadata.name = "a"
    assert cache.upsert_node(n)
    assert not cache.upsert_node(n)
    n.status.allowed_host_paths.append("/srv")
    assert cache.upsert_node(n)
