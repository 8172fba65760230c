"""The autoscaler's pure logic: the scale-up simulation (with the scheduler's filters), the expanders, scale-down
safety, and the NodeGroup validation rules."""

from __future__ import annotations

import random

import pytest

from caravanserai import meta, v1
from caravanserai.apiserver.auth import Authorizer
from caravanserai.apiserver.kinds import builtin_kinds
from caravanserai.apiserver.kinds import nodegroup as rules
from caravanserai.controllers.autoscaler import expanders, simulation
from caravanserai.controllers.autoscaler.scaledown import fit_elsewhere, not_evictable, utilization
from caravanserai.controllers.autoscaler.settings import settings_of, template_node
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, TolerationInfo
from caravanserai.errors import Forbidden, Invalid
from caravanserai.process.identity import Identity

CTX = FilterContext(now=1000.0)
GI = 1024**3


def group(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    extra: dict[str, str] | None = None,
    max_size: int = 10,
    taints: tuple[tuple[str, str], ...] = (),
    priority: int = 0,
) -> v1.NodeGroup:
    g = meta.with_type_meta(v1.NodeGroup())
    g.metadata.name = name
    g.spec.min_size, g.spec.max_size, g.spec.priority = 0, max_size, priority
    g.spec.template.allocatable.update({"cpu": cpu, "memory": memory, **(extra or {})})
    for key, effect in taints:
        g.spec.template.taints.add(key=key, effect=effect)
    g.spec.provider.exec.create.append("true")
    g.spec.provider.exec.delete.append("true")
    return g


def proj(name: str, cpu: int = 1000, memory: int = GI, **kwargs: object) -> ProjectInfo:
    return ProjectInfo(name, requests={"cpu": cpu, "memory": memory}, **kwargs)  # type: ignore[arg-type]  # test rows pass the optional fields by name


def plan(projects: list[ProjectInfo], groups: list[v1.NodeGroup], rooms: dict[str, int] | None = None):  # type: ignore[no-untyped-def]  # a table helper
    settings = [settings_of(g) for g in groups]
    rejections = simulation.template_rejections(projects, settings, CTX)
    hopeless = simulation.infeasible(rejections, settings)
    room = rooms or {g.metadata.name: g.spec.max_size for g in groups}
    fit = [p for p in projects if p.name not in hopeless]
    return simulation.options(fit, settings, room, rejections, CTX), hopeless


def test_ten_projects_that_fit_two_per_node_ask_for_five_and_five_per_node_for_two() -> None:
    projects = [proj(f"p{i}", cpu=2000) for i in range(10)]
    (option,), _ = plan(projects, [group("small")])
    assert (option.nodes, len(option.projects)) == (5, 10)
    (option,), _ = plan([proj(f"p{i}", cpu=800) for i in range(10)], [group("small")])
    assert option.nodes == 2


def test_max_size_bounds_the_batch_and_the_projects_counted() -> None:
    (option,), _ = plan([proj(f"p{i}", cpu=4000) for i in range(5)], [group("g", max_size=3)])
    assert option.nodes == 3 and len(option.projects) == 3
    options, _ = plan([proj("p")], [group("g")], rooms={"g": 0})
    assert options == []


def test_projects_no_template_fits_are_infeasible_with_each_groups_reason() -> None:
    projects = [proj("huge", cpu=64000), ProjectInfo("gpu", requests={"gpu": 1})]
    options, hopeless = plan(projects, [group("cpu"), group("tainted", taints=(("dedicated", "NoSchedule"),))])
    assert options == []
    assert hopeless == {
        "huge": "cpu: insufficient cpu; tainted: untolerated taint dedicated",
        "gpu": "cpu: insufficient gpu; tainted: untolerated taint dedicated",
    }


def test_template_filters_are_the_schedulers_selector_taints_and_extended_resources() -> None:
    tolerant = ProjectInfo("t", requests={"gpu": 1}, tolerations=(TolerationInfo("dedicated", "Exists"),))
    selector = ProjectInfo("s", node_selector={v1.LABEL_NODE_GROUP: "plain"})
    untolerant = ProjectInfo("u", node_selector={v1.LABEL_NODE_GROUP: "gpu"})
    gpu = group("gpu", extra={"gpu": "2"}, taints=(("dedicated", "NoSchedule"),))
    options, hopeless = plan([tolerant, selector, untolerant], [gpu, group("plain")])
    assert hopeless == {"u": "gpu: untolerated taint dedicated; plain: node selector mismatch"}
    assert {o.group: o.projects for o in options} == {"gpu": ("t",), "plain": ("s",)}


def test_upcoming_nodes_absorb_projects_before_new_ones_are_asked_for() -> None:
    settings = settings_of(group("g"))
    upcoming = [template_node(settings, "g-aaaaa", now=CTX.now)]
    absorbed = simulation.absorb([proj("a", cpu=3000), proj("b", cpu=3000)], upcoming, CTX)
    assert absorbed == {"a"}


def test_expanders() -> None:
    a = simulation.GroupOption("a", 1, ("x",), waste=0.5, priority=1)
    b = simulation.GroupOption("b", 1, ("x",), waste=0.1, priority=0)
    c = simulation.GroupOption("c", 1, ("x", "y"), waste=0.1, priority=0)
    rng = random.Random(4)
    assert expanders.choose(expanders.LEAST_WASTE, [a, b, c], rng) == c  # equal waste: more projects
    assert expanders.choose(expanders.PRIORITY, [a, b, c], rng) == a
    picks = {expanders.choose(expanders.RANDOM, [a, b, c], rng).group for _ in range(50)}  # type: ignore[union-attr]  # options given: never None
    assert picks == {"a", "b", "c"}
    assert expanders.choose(expanders.LEAST_WASTE, [], rng) is None


def test_least_waste_prefers_the_template_the_projects_fill() -> None:
    options, _ = plan(
        [proj("p", cpu=2000, memory=4 * GI)],
        [group("big", cpu="16", memory="64Gi"), group("fit", cpu="2", memory="4Gi")],
    )
    assert expanders.choose(expanders.LEAST_WASTE, options, random.Random()).group == "fit"  # type: ignore[union-attr]  # options given


def test_utilization_and_fit_elsewhere() -> None:
    node = NodeInfo("n", allocatable={"cpu": 4000, "memory": 8 * GI}, requested={"cpu": 1000, "memory": 6 * GI})
    assert utilization(node) == 0.75  # memory, the larger share
    other = NodeInfo("o", allocatable={"cpu": 4000, "memory": 8 * GI}, requested={"cpu": 3500}, renew_time=CTX.now)
    assert fit_elsewhere([proj("p", cpu=500, memory=0)], "n", {"n": node, "o": other}, CTX) is None
    assert (
        fit_elsewhere([proj("p", cpu=400, memory=0), proj("q", cpu=400, memory=0)], "n", {"n": node, "o": other}, CTX)
        == "project q fits on no other node"
    )
    assert other.requested == {"cpu": 3500}  # the cluster's records are not changed by the check


def test_safe_to_evict_false_keeps_the_node() -> None:
    p = meta.with_type_meta(v1.Project())
    p.metadata.name = "db"
    assert not_evictable([p]) is None
    p.metadata.annotations[v1.ANNOTATION_SAFE_TO_EVICT] = "false"
    assert not_evictable([p]) == "project db is annotated caravanserai.io/safe-to-evict=false"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda g: setattr(g.spec, "min_size", 5) or setattr(g.spec, "max_size", 2), "spec.minSize"),
        (lambda g: setattr(g.spec, "max_size", 0), "spec.maxSize"),
        (lambda g: g.spec.ClearField("provider"), "spec.provider"),
        (lambda g: g.spec.provider.exec.ClearField("delete"), "spec.provider.exec.delete"),
        (lambda g: setattr(g.spec.scale_down, "utilization_threshold", 1.5), "spec.scaleDown.utilizationThreshold"),
        (lambda g: setattr(g.spec.scale_down, "idle_time", "soon"), "spec.scaleDown.idleTime"),
        (lambda g: setattr(g.spec.provider.exec, "timeout", "-1s"), "spec.provider.exec.timeout"),
        (lambda g: g.spec.template.allocatable.update({"cpu": "lots"}), 'spec.template.allocatable["cpu"]'),
        (lambda g: g.spec.template.taints.add(key="k", effect="Sometimes"), "spec.template.taints[0].effect"),
        (lambda g: g.spec.template.labels.update({v1.LABEL_NODE_GROUP: "other"}), "spec.template.labels"),
    ],
)
def test_validation_names_the_field(change, field) -> None:  # type: ignore[no-untyped-def]  # table rows
    g = group("g")
    rules.STRATEGY.validate(g)
    change(g)
    with pytest.raises(Invalid) as raised:
        rules.STRATEGY.validate(g)
    assert field in str(raised.value)


@pytest.mark.parametrize(
    ("user", "verb", "allowed"),
    [
        ("admin", "create", True),
        ("controller:autoscaler", "update_status", True),
        ("controller:autoscaler", "update", False),
        ("controller:autoscaler", "create", False),
        ("viewer", "get", True),
        ("viewer", "update_status", False),
        ("node:n1", "get", False),
    ],
)
def test_who_may_write_node_groups(user: str, verb: str, allowed: bool) -> None:
    authz = Authorizer(builtin_kinds())
    who = Identity(user, frozenset({"admin"}) if user == "admin" else frozenset())
    try:
        authz.check(who, verb, "nodegroups", name="g", obj=group("g"))
    except Forbidden:
        assert not allowed
    else:
        assert allowed
