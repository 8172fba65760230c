"""The fused node-local filters (`nodegate.py`) and the search that runs them: the same verdicts as the filters one
by one, and decisions equal to a plain search that runs the unprepared filter chain and `total_score` per node."""

from __future__ import annotations

import dataclasses
import random

from caravanserai import v1
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler.algorithm import Decision, Policy, nodes_to_find, schedule
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import (
    FILTERS,
    FilterContext,
    Rejection,
    first_rejection,
    node_ready,
    node_schedulable,
    ports_free,
    resources_fit,
    taints_tolerated,
)
from caravanserai.controllers.scheduler.nodegate import BASICS, BASICS_WITH_PORTS, fuse, fused_basics
from caravanserai.controllers.scheduler.nominated import NominatedRoom, Nominee
from caravanserai.controllers.scheduler.ports import HostPort, PortIndex
from caravanserai.controllers.scheduler.scores import BINPACK, SPREAD, tie_break_key, total_score
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, TaintInfo, TolerationInfo, project_info
from caravanserai.controllers.scheduler.topology import Placed, TopologyIndex
from caravanserai.project.affinity import (
    HOSTNAME_KEY,
    SCHEDULE_ANYWAY,
    ZONE_KEY,
    Placement,
    ProjectSelector,
    ProjectTerm,
    SpreadConstraint,
)
from caravanserai.testing import builders

NOW = 1_000_000.0
GI = 1024**3
ZONES = ("a", "b", "c")


def random_node(rng: random.Random, name: str) -> NodeInfo:
    nominated = NominatedRoom()
    if rng.random() < 0.15:
        nominated.add(Nominee("vip", rng.choice((0, 5, 10)), {"cpu": rng.choice((500, 2000))}, (HostPort(80),)))
    ports = PortIndex()
    if rng.random() < 0.2:
        ports.add("holder", (HostPort(80),))
    taints = rng.choice(((), (), (), (TaintInfo("spot", effect="PreferNoSchedule"),), (TaintInfo("gpu"),)))
    labels = {ZONE_KEY: rng.choice(ZONES)} if rng.random() < 0.9 else {}
    return NodeInfo(
        name,
        labels=labels,
        unschedulable=rng.random() < 0.1,
        taints=taints,
        allocatable=rng.choice(({"cpu": 4000, "memory": 8 * GI}, {"cpu": 1000}, {"cpu": 8000, "memory": GI, "gpu": 1})),
        requested=rng.choice(({}, {"cpu": 1000}, {"cpu": 3500, "memory": 4 * GI}, {"memory": GI})),
        renew_time=rng.choice((NOW - 5, NOW - 5, NOW - 5, NOW - 200, None)),
        download=rng.choice((None, None, 5e7)),
        ports=ports,
        nominated=nominated,
    )


def random_project(rng: random.Random, name: str) -> ProjectInfo:
    requests = rng.choice(({"cpu": 500, "memory": GI}, {"cpu": 2000}, {"memory": 2 * GI}, {"gpu": 1, "cpu": 100}, {}))
    app = rng.choice(("web", "db"))
    term = ProjectTerm(ProjectSelector((("app", app),)), rng.choice((ZONE_KEY, HOSTNAME_KEY)))
    zoned = ProjectTerm(ProjectSelector((("app", app),)), ZONE_KEY)
    placement = rng.choice(
        (
            Placement(),
            Placement(),
            Placement(anti_preferred=((100, term),)),
            Placement(anti_required=(term,)),
            Placement(spread=(SpreadConstraint(1, ZONE_KEY, "DoNotSchedule", term.selector),)),
            Placement(spread=(SpreadConstraint(1, ZONE_KEY, SCHEDULE_ANYWAY, term.selector),)),
            # one key read by both the checks and the preferences: judged once per zone (`nodememo._by_domain`)
            Placement(
                anti_preferred=((100, zoned),),
                spread=(
                    SpreadConstraint(1, ZONE_KEY, "DoNotSchedule", zoned.selector),
                    SpreadConstraint(2, ZONE_KEY, SCHEDULE_ANYWAY, zoned.selector),
                ),
            ),
            Placement(anti_preferred=((30, zoned), (70, term))),
        )
    )
    return ProjectInfo(
        name,
        requests=requests,
        tolerations=rng.choice(((), (TolerationInfo("gpu", operator="Exists"),))),
        priority=rng.choice((0, 5, 10)),
        host_ports=rng.choice(((), (), (HostPort(80),))),
        labels={"app": app},
        placement=placement,
        leaving=rng.choice(("", "", "n003")),
    )


def topology(rng: random.Random, nodes: list[NodeInfo]) -> TopologyIndex:
    index = TopologyIndex()
    for node in nodes:
        index.set_node(node.name, node.labels)
    for i in range(rng.randint(0, 12)):
        term = ProjectTerm(ProjectSelector((("app", "web"),)), HOSTNAME_KEY)
        anti = (term,) if rng.random() < 0.2 else ()
        index.place(f"placed-{i}", Placed(rng.choice(nodes).name, {"app": rng.choice(("web", "db"))}, anti))
    return index


def test_the_fused_check_returns_what_the_run_returns() -> None:
    rng = random.Random(7)
    ctx = FilterContext(now=NOW)
    for i in range(3000):
        p, n = random_project(rng, f"p{i}"), random_node(rng, f"n{i}")
        ports = bool(p.host_ports)
        run = BASICS_WITH_PORTS if ports else BASICS
        expected: Rejection | None = next((r for check in run if (r := check(p, n, ctx)) is not None), None)
        assert fused_basics(p, ctx, ports=ports)(p, n, ctx) is expected


def test_only_an_exact_run_is_fused() -> None:
    p, ctx = ProjectInfo("p"), FilterContext(now=NOW)
    assert len(fuse(p, BASICS, ctx)) == 1
    assert len(fuse(p, (node_ready, *BASICS_WITH_PORTS), ctx)) == 2
    reordered = (resources_fit, taints_tolerated, node_ready, node_schedulable)
    assert fuse(p, reordered, ctx) == reordered
    apart = (taints_tolerated, resources_fit, ports_free, node_schedulable, node_ready)
    assert fuse(p, apart, ctx) == apart


def plain_search(
    project: ProjectInfo, nodes: list[NodeInfo], ctx: FilterContext, start: int, policy: Policy
) -> Decision:
    """The decision as the algorithm's docstring states it, with nothing prepared, fused or reordered: every filter of
    `FILTERS` unprepared in order and `total_score` on each node."""
    wanted = nodes_to_find(len(nodes), policy.percentage_of_nodes_to_score)
    order = nodes[start:] + nodes[:start]
    rejections: dict[Rejection, int] = {}
    feasible: list[tuple[float, NodeInfo]] = []
    visited = 0
    for node in order:
        visited += 1
        rejection = first_rejection(project, node, ctx, FILTERS)
        if rejection is not None:
            rejections[rejection] = rejections.get(rejection, 0) + 1
            continue
        score = total_score(project, node, strategy=policy.strategy, weights=policy.weights, topology=ctx.topology)
        feasible.append((score, node))
        if len(feasible) >= wanted:
            break
    if not feasible:
        return Decision(None, visited=visited)
    top = max(score for score, _ in feasible)
    best = min((n for s, n in feasible if s == top), key=lambda n: tie_break_key(project.name, n.name))
    others = [(s, n) for s, n in feasible if n is not best]
    if others and best.name == project.leaving:
        second = max(s for s, _ in others)
        moved = min((n for s, n in others if s == second), key=lambda n: tie_break_key(project.name, n.name))
        return Decision(moved.name, second, visited, len(feasible), runner_up=best.name, runner_up_score=top)
    if not others:
        return Decision(best.name, top, visited, len(feasible))
    second = max(s for s, _ in others)  # the runner-up is one of the others with this score
    return Decision(best.name, top, visited, len(feasible), runner_up="", runner_up_score=second)


def test_decisions_equal_a_plain_search_of_the_unprepared_filters() -> None:
    rng = random.Random(11)
    outcomes = {"bound": 0, "unschedulable": 0, "ruled": 0}
    for round_ in range(150):
        nodes = [random_node(rng, f"n{i:03d}") for i in range(rng.choice((5, 40, 130)))]
        ctx = FilterContext(now=NOW, topology=topology(rng, nodes))
        policy = Policy(strategy=rng.choice((SPREAD, BINPACK)), percentage_of_nodes_to_score=rng.choice((0, 5, 30)))
        for j in range(4):
            p = random_project(rng, f"p{round_}-{j}")
            start = rng.randrange(len(nodes))
            got, want = schedule(p, nodes, ctx, start=start, policy=policy), plain_search(p, nodes, ctx, start, policy)
            assert (got.node, got.visited, got.feasible) == (want.node, want.visited, want.feasible)
            outcomes["ruled"] += p.placement.inter_project
            outcomes["bound" if want.node else "unschedulable"] += 1
            if want.node is None:
                assert got.diagnosis is not None
                rejections: dict[Rejection, int] = {}
                for node in nodes:
                    rejection = first_rejection(p, node, ctx, FILTERS)
                    assert rejection is not None
                    rejections[rejection] = rejections.get(rejection, 0) + 1
                assert got.diagnosis.rejections == rejections
                continue
            assert (got.score, got.runner_up_score) == (want.score, want.runner_up_score)
            if want.runner_up is None:
                assert got.runner_up is None
            else:
                assert got.runner_up not in (None, got.node)
                assert want.runner_up in ("", got.runner_up)
    assert min(outcomes.values()) > 50, outcomes  # every kind of outcome is exercised


def test_remembered_verdicts_follow_every_change_of_the_cluster_state() -> None:
    """Decisions on a `ClusterState`'s records (remembered between decisions, `nodememo.py`) equal the plain search
    while the state changes at random in between: bindings counted, assumed, forgotten and unbound, nodes resized,
    tainted, cordoned and relabelled, Leases lapsing, room kept for nominees."""
    rng = random.Random(21)
    state = ClusterState()
    names = [f"n{i:02d}" for i in range(30)]

    def upsert(name: str) -> None:
        spec = builders.node(name, labels={ZONE_KEY: rng.choice(ZONES)}, unschedulable=rng.random() < 0.1)
        if rng.random() < 0.15:
            spec.spec.taints.add(key="gpu", effect=rng.choice(("NoSchedule", "PreferNoSchedule")))
        state.upsert_node(builders.node_status(spec, cpu=rng.choice(("2", "4")), memory=rng.choice(("4Gi", "8Gi"))))

    def renew(name: str, age: float) -> None:
        renewed = builders.lease(name)
        renewed.spec.renew_time.CopyFrom(timestamp(NOW - age))
        state.set_lease(renewed)

    for name in names:
        upsert(name)
        renew(name, 5)
    bound: dict[str, v1.Project] = {}
    assumed = []
    kinds = [({"cpu": "500m", "memory": "1Gi"}, ""), ({"cpu": "1"}, ""), ({"cpu": "250m"}, "gpu")]
    policy = Policy(percentage_of_nodes_to_score=30)
    decisions = 0
    for step in range(600):
        action = rng.random()
        if action < 0.3:
            p = builders.project(f"b{step}", requests=rng.choice(kinds)[0])
            p.metadata.resource_version, p.metadata.generation = "1", 1
            p.status.phase, p.status.node_ref = v1.RUNNING, rng.choice(names)
            state.observe_project(None, p)
            bound[p.metadata.name] = p
        elif action < 0.4 and bound:
            state.forget_project(bound.pop(rng.choice(sorted(bound))))
        elif action < 0.45 and assumed:
            state.forget(assumed.pop(rng.randrange(len(assumed))))
        elif action < 0.5:
            upsert(rng.choice(names))
        elif action < 0.55:
            renew(rng.choice(names), rng.choice((5, 5, 500)))
        elif action < 0.6:
            state.nominate(Nominee(f"vip{step}", rng.choice((0, 10)), {"cpu": 1000}), rng.choice(names))
        elif action < 0.65:
            state.unnominate(f"vip{rng.randrange(step + 1)}")
        requests, toleration = rng.choice(kinds)
        info = project_info(builders.project(f"p{step}", requests=requests))
        if toleration:
            info = dataclasses.replace(info, tolerations=(TolerationInfo(toleration, operator="Exists"),))
        ctx = FilterContext(now=NOW, topology=state.topology)
        start = rng.randrange(len(names))
        got, want = (
            schedule(info, state.nodes(), ctx, start=start, policy=policy),
            plain_search(info, state.nodes(), ctx, start, policy),
        )
        assert (got.node, got.visited, got.feasible, got.score) == (want.node, want.visited, want.feasible, want.score)
        decisions += 1
        if got.node is not None and rng.random() < 0.7:
            assumed.append(state.assume(info, got.node))
    remembered = sum(len(n.memo) for n in state.nodes())
    assert decisions == 600 and remembered > 0  # the memo was in use
