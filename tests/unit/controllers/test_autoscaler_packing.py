"""The scale-up packing: first-fit decreasing over every node opened in a pass, judged by the scheduler's filters
(host ports and host paths included); the cluster view kept from informer events; and the authorizer's narrow
exception for the autoscaler's Node writes."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.controllers.autoscaler import simulation
from caravanserai.controllers.autoscaler.settings import settings_of, template_node
from caravanserai.controllers.autoscaler.view import ClusterView
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.ports import HostPort
from caravanserai.controllers.scheduler.snapshot import ProjectInfo
from caravanserai.errors import Forbidden
from caravanserai.process.identity import Identity
from caravanserai.project.lifecycle import REASON_UNSCHEDULABLE
from caravanserai.testing.builders import lease, node, node_status, project

CTX = FilterContext(now=1000.0)
GI = 1024**3


def group(name: str = "g", *, cpu: str = "4", memory: str = "16Gi", max_size: int = 100) -> v1.NodeGroup:
    g = meta.with_type_meta(v1.NodeGroup())
    g.metadata.name = name
    g.spec.max_size = max_size
    g.spec.template.allocatable.update({"cpu": cpu, "memory": memory})
    g.spec.provider.exec.create.append("true")
    g.spec.provider.exec.delete.append("true")
    return g


def proj(name: str, cpu: int, memory: int = GI, **kwargs: object) -> ProjectInfo:
    return ProjectInfo(name, requests={"cpu": cpu, "memory": memory}, **kwargs)  # type: ignore[arg-type]  # rows pass optional fields by name


def nodes_asked(projects: list[ProjectInfo], g: v1.NodeGroup | None = None) -> tuple[int, int]:
    """(nodes asked for, projects placed) for one group."""
    settings = [settings_of(g or group())]
    rejections = simulation.template_rejections(projects, settings, CTX)
    (option,) = simulation.options(projects, settings, {settings[0].name: 100}, rejections, CTX)
    return option.nodes, len(option.projects)


@pytest.mark.parametrize(
    ("cpus", "nodes"),
    [
        ([1000] * 10, 3),  # 4 to a node: 4 + 4 + 2
        ([2000] * 10, 5),
        ([3000] * 4 + [1000] * 4, 4),  # each big one leaves room for exactly one small one
        ([3000] * 4 + [1000] * 5, 5),
        ([2000, 2000, 3000, 1000, 3000, 1000], 3),  # first-fit decreasing: 3+1, 3+1, 2+2
        ([2500] * 3 + [1500] * 3, 3),  # pairs of 2.5 + 1.5 fill three nodes exactly
        ([500] * 7 + [3500] * 2, 3),  # the small ones fill the big ones' gaps first-fit: 3.5+.5, 3.5+.5, 5×.5
        ([4000] * 3 + [1000] * 20, 8),
    ],
)
def test_projects_that_fit_on_k_new_nodes_ask_for_exactly_k(cpus: list[int], nodes: int) -> None:
    projects = [proj(f"p{i:02d}", cpu) for i, cpu in enumerate(cpus)]
    assert math.ceil(sum(cpus) / 4000) == nodes  # each row fills its nodes: K is the least possible
    assert nodes_asked(projects) == (nodes, len(projects))


def test_memory_bound_shapes_and_mixed_shapes_pack_over_every_opened_node() -> None:
    projects = [proj(f"a{i}", 500, 4 * GI) for i in range(6)] + [proj(f"b{i}", 1000, 2 * GI) for i in range(6)]
    # memory decides: 16 Gi nodes take four a (16 Gi) or a's leftovers take b's: 6×4 + 6×2 = 36 Gi → 3 nodes
    assert nodes_asked(projects) == (3, 12)


def test_host_port_clashes_force_separate_nodes() -> None:
    web = (HostPort(80),)
    clashing = [proj(f"web{i}", 500, host_ports=web) for i in range(3)]
    assert nodes_asked(clashing) == (3, 3)  # resources alone would put all three on one node
    other = [proj("dns", 500, host_ports=(HostPort(53, "UDP"),))]
    assert nodes_asked(clashing + other) == (3, 4)  # a different port shares a node
    plain = [proj(f"p{i}", 500) for i in range(3)]
    assert nodes_asked(clashing + plain) == (3, 6)


def test_upcoming_nodes_judge_host_paths_and_ports_with_the_filters() -> None:
    settings = settings_of(group())
    young = template_node(settings, "g-young", now=CTX.now)
    young.allowed_host_paths = ("/srv/data",)
    refused = proj("logs", 500, host_paths=("/var/log",))
    allowed = proj("data", 500, host_paths=("/srv/data/x",))
    assert simulation.absorb([refused, allowed], [young], CTX) == {"data"}
    a, b = (proj(n, 500, host_ports=(HostPort(8080),)) for n in "ab")
    upcoming = [template_node(settings, "g-one", now=CTX.now)]
    assert len(simulation.absorb([a, b], upcoming, CTX)) == 1


def test_absorb_over_many_identical_upcoming_nodes_counts_each() -> None:
    settings = settings_of(group())
    upcoming = [template_node(settings, f"g-{i}", now=CTX.now) for i in range(3)]
    projects = [proj(f"p{i}", 1000) for i in range(13)]
    assert len(simulation.absorb(projects, upcoming, CTX)) == 12  # 3 nodes × 4


def test_room_bounds_the_nodes_of_repeated_fresh_nodes() -> None:
    settings = [settings_of(group(max_size=2))]
    projects = [proj(f"p{i}", 1000) for i in range(20)]
    rejections = simulation.template_rejections(projects, settings, CTX)
    (option,) = simulation.options(projects, settings, {"g": 2}, rejections, CTX)
    assert (option.nodes, len(option.projects)) == (2, 8)


def _pending(name: str, cpu: str) -> v1.Project:
    p = project(name, requests={"cpu": cpu})
    p.status.phase = v1.PENDING
    p.metadata.resource_version = "1"
    meta.set_condition(p.status.conditions, v1.CONDITION_SCHEDULED, v1.FALSE, reason=REASON_UNSCHEDULABLE, now=1.0)
    return p


def test_the_view_follows_events_without_rebuilding() -> None:
    view = ClusterView()
    n = node("n1", labels={v1.LABEL_NODE_GROUP: "g"})
    node_status(n, cpu="4", memory="8Gi")
    n.metadata.resource_version = "1"
    held = lease("n1")
    view.load([n], [held], [])
    waiting = _pending("p", "2")
    view.project_changed(waiting)
    cluster = view.snapshot()
    assert [p.name for p in cluster.pending] == ["p"] and cluster.group_nodes("g") == ["n1"]
    bound = meta.copy(waiting)
    bound.status.phase, bound.status.node_ref, bound.metadata.resource_version = v1.RUNNING, "n1", "2"
    view.project_changed(bound)  # while a pass holds `cluster`: its snapshot stays as it was
    assert [p.name for p in cluster.pending] == ["p"] and cluster.nodes["n1"].requested == {}
    assert cluster.bound_to("n1") == []
    cluster = view.snapshot()
    assert cluster.pending == [] and cluster.nodes["n1"].requested == {"cpu": 2000}
    assert [p.metadata.name for p in cluster.bound_to("n1")] == ["p"]
    relabelled = meta.copy(n)
    relabelled.metadata.resource_version = "2"
    view.node_changed(relabelled)
    assert view.snapshot().nodes["n1"].requested == {"cpu": 2000}  # a node update keeps what is bound there
    view.project_deleted(bound)
    assert view.snapshot().nodes["n1"].requested == {}
    view.node_deleted(relabelled)
    assert view.snapshot().group_nodes("g") == []


# ---- the autoscaler's exception in the authorizer (kinds.node.autoscaler_allows) ---------------------------------

AUTOSCALER = Identity("controller:autoscaler")


def _stored(name: str, labels: dict[str, str] | None = None) -> v1.Node:
    n = node(name, labels=labels or {})
    n.metadata.resource_version, n.metadata.generation = "5", 1
    return n


def _update(who: Identity, old: v1.Node, change: Callable[[v1.Node], None]) -> bool:
    new = meta.copy(old)
    change(new)
    merged = builtin_kinds().get("nodes").prepare_update(old, new)  # type: ignore[union-attr]  # a builtin kind
    try:
        Authorizer(builtin_kinds()).check(who, "update", "nodes", name=old.metadata.name, obj=merged, old=old)
    except Forbidden:
        return False
    return True


def _join(n: v1.Node) -> None:
    n.metadata.labels.update({v1.LABEL_NODE_GROUP: "gpu", "example.com/accelerator": "a100"})
    n.spec.taints.add(key="dedicated", value="gpu", effect="NoSchedule")


def _cordon(n: v1.Node) -> None:
    n.spec.unschedulable = True


@pytest.mark.parametrize(
    ("labels", "change", "allowed"),
    [
        ({}, _join, True),  # registration into a group: group label, template labels and taints
        ({"zone": "a"}, lambda n: n.metadata.labels.update({"zone": "b", v1.LABEL_NODE_GROUP: "gpu"}), False),
        ({}, lambda n: n.metadata.labels.update({"x": "y"}), False),  # labels without joining a group
        ({}, _cordon, False),  # not a group's node
        ({v1.LABEL_NODE_GROUP: "gpu"}, _cordon, True),
        ({v1.LABEL_NODE_GROUP: "gpu"}, lambda n: n.metadata.labels.update({v1.LABEL_NODE_GROUP: "cpu"}), False),
        ({v1.LABEL_NODE_GROUP: "gpu"}, lambda n: n.metadata.labels.pop(v1.LABEL_NODE_GROUP), False),
        ({v1.LABEL_NODE_GROUP: "gpu"}, lambda n: n.spec.taints.add(key="k", effect="NoSchedule"), False),
        ({v1.LABEL_NODE_GROUP: "gpu"}, lambda n: n.metadata.labels.update({"x": "y"}), False),
    ],
)
def test_the_autoscaler_may_join_and_cordon_group_nodes_only(
    labels: dict[str, str], change: Callable[[v1.Node], None], allowed: bool
) -> None:
    assert _update(AUTOSCALER, _stored("n", labels), change) is allowed
    assert _update(Identity("controller:scheduler"), _stored("n", labels), change) is False


@pytest.mark.parametrize(
    ("who", "labels", "force", "allowed"),
    [
        ("controller:autoscaler", {v1.LABEL_NODE_GROUP: "gpu"}, False, True),
        ("controller:autoscaler", {v1.LABEL_NODE_GROUP: "gpu"}, True, False),  # never forced
        ("controller:autoscaler", {}, False, False),  # not a group's node
        ("controller:gc", {v1.LABEL_NODE_GROUP: "gpu"}, False, False),
    ],
)
def test_the_autoscaler_deletes_group_nodes_unforced(
    who: str, labels: dict[str, str], force: bool, allowed: bool
) -> None:
    try:
        Authorizer(builtin_kinds()).check(
            Identity(who), "delete", "nodes", name="n", obj=_stored("n", labels), force=force
        )
    except Forbidden:
        assert not allowed
    else:
        assert allowed
