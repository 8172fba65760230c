"""Scheduler filters, the decision over a node sample and the Unschedulable message, as tables."""

from __future__ import annotations

import pytest

from caravanserai.controllers.scheduler.algorithm import Diagnosis, Policy, nodes_to_find, schedule
from caravanserai.controllers.scheduler.filters import (
    FILTERS,
    FilterContext,
    Rejection,
    checks_for,
    first_rejection,
    node_ready,
    node_schedulable,
    node_selector_matches,
    resources_fit,
    taints_tolerated,
)
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, TaintInfo, TolerationInfo

NOW = 1_000_000.0
CTX = FilterContext(now=NOW, heartbeat_timeout=90.0)
GI = 1024**3


def node(name: str = "n1", **fields: object) -> NodeInfo:
    defaults: dict[str, object] = {
        "allocatable": {"cpu": 4000, "memory": 8 * GI},
        "renew_time": NOW - 5,
    }
    defaults.update(fields)
    return NodeInfo(name, **defaults)  # type: ignore[arg-type]  # fields are NodeInfo fields, typed object here


def project(**fields: object) -> ProjectInfo:
    return ProjectInfo("p", **fields)  # type: ignore[arg-type]  # fields are ProjectInfo fields, typed object here


@pytest.mark.parametrize(
    ("renew_time", "passes"),
    [
        (NOW - 5, True),
        (NOW - 89.999, True),
        (NOW - 90, False),  # exactly at the deadline: NotReady
        (NOW - 600, False),
        (NOW + 3, True),  # a clock slightly ahead on the node
        (None, False),  # never renewed / no Lease
    ],
)
def test_node_ready_is_lease_age_on_the_clock(renew_time: float | None, passes: bool) -> None:
    result = node_ready(project(), node(renew_time=renew_time), CTX)
    assert (result is None) == passes
    if not passes:
        assert result == Rejection("NotReady", False, 0)


@pytest.mark.parametrize(("unschedulable", "passes"), [(False, True), (True, False)])
def test_node_schedulable(unschedulable: bool, passes: bool) -> None:
    result = node_schedulable(project(), node(unschedulable=unschedulable), CTX)
    assert (result is None) == passes
    if result is not None:
        assert (result.reason, result.infeasible) == ("unschedulable", False)


@pytest.mark.parametrize(
    ("requests", "allocatable", "requested", "expected"),
    [
        ({}, {}, {}, None),
        ({"cpu": 1000}, {"cpu": 4000}, {"cpu": 3000}, None),  # exactly fills the node
        ({"cpu": 1001}, {"cpu": 4000}, {"cpu": 3000}, ("insufficient cpu", False)),
        ({"cpu": 5000}, {"cpu": 4000}, {}, ("insufficient cpu", True)),  # bigger than the node: never fits
        ({"memory": 2 * GI}, {"cpu": 4000, "memory": GI}, {}, ("insufficient memory", True)),
        ({"gpu": 1}, {"cpu": 4000, "memory": GI}, {}, ("insufficient gpu", True)),  # the node has no gpu at all
        ({"gpu": 2}, {"gpu": 2}, {"gpu": 1}, ("insufficient gpu", False)),
        ({"gpu": 1}, {"gpu": 2}, {"gpu": 1}, None),
        # cpu only full now, memory never: infeasible wins whatever the order
        (
            {"cpu": 1000, "memory": 16 * GI},
            {"cpu": 1000, "memory": 8 * GI},
            {"cpu": 500},
            ("insufficient memory", True),
        ),
        # several short now: cpu is reported first
        (
            {"cpu": 2000, "memory": 2 * GI},
            {"cpu": 2000, "memory": 2 * GI},
            {"cpu": 1, "memory": 1},
            ("insufficient cpu", False),
        ),
        # another project overcommitted the node (allocatable shrank): nothing fits now
        ({"cpu": 1}, {"cpu": 1000}, {"cpu": 1500}, ("insufficient cpu", False)),
    ],
)
def test_resources_fit(
    requests: dict[str, int], allocatable: dict[str, int], requested: dict[str, int], expected: tuple[str, bool] | None
) -> None:
    result = resources_fit(project(requests=requests), node(allocatable=allocatable, requested=requested), CTX)
    assert (None if result is None else (result.reason, result.infeasible)) == expected


@pytest.mark.parametrize(
    ("selector", "labels", "passes"),
    [
        ({}, {}, True),
        ({}, {"zone": "a"}, True),
        ({"zone": "a"}, {"zone": "a", "disk": "ssd"}, True),
        ({"zone": "a"}, {"zone": "b"}, False),
        ({"zone": "a"}, {}, False),
        ({"zone": "a", "disk": "ssd"}, {"zone": "a"}, False),
        ({"zone": ""}, {}, False),  # an empty value must be present as a label
        ({"zone": ""}, {"zone": ""}, True),
    ],
)
def test_node_selector(selector: dict[str, str], labels: dict[str, str], passes: bool) -> None:
    result = node_selector_matches(project(node_selector=selector), node(labels=labels), CTX)
    assert (result is None) == passes
    if result is not None:
        assert (result.reason, result.infeasible) == ("node selector mismatch", True)


GPU = TaintInfo("dedicated", "gpu", "NoSchedule")
GPU_EXEC = TaintInfo("dedicated", "gpu", "NoExecute")
SOFT = TaintInfo("spot", "", "PreferNoSchedule")


@pytest.mark.parametrize(
    ("taints", "tolerations", "passes"),
    [
        ((), (), True),
        ((GPU,), (), False),
        ((GPU_EXEC,), (), False),
        ((SOFT,), (), True),  # PreferNoSchedule never filters
        ((GPU,), (TolerationInfo("dedicated", "Equal", "gpu", "NoSchedule"),), True),
        ((GPU,), (TolerationInfo("dedicated", "Equal", "gpu"),), True),  # empty effect matches every effect
        ((GPU,), (TolerationInfo("dedicated", "Equal", "cpu"),), False),  # wrong value
        ((GPU,), (TolerationInfo("dedicated", "Exists"),), True),
        ((GPU,), (TolerationInfo("other", "Exists"),), False),
        ((GPU,), (TolerationInfo("", "Exists"),), True),  # tolerates everything
        ((GPU,), (TolerationInfo("dedicated", "Exists", effect="NoExecute"),), False),  # effect differs
        ((GPU, GPU_EXEC), (TolerationInfo("dedicated", "Exists", effect="NoSchedule"),), False),
        ((GPU, GPU_EXEC), (TolerationInfo("dedicated", "Exists"),), True),
    ],
)
def test_taints_tolerated(taints: tuple[TaintInfo, ...], tolerations: tuple[TolerationInfo, ...], passes: bool) -> None:
    result = taints_tolerated(project(tolerations=tolerations), node(taints=taints), CTX)
    assert (result is None) == passes
    if result is not None:
        assert (result.reason, result.infeasible) == ("untolerated taint dedicated", True)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, None),
        ({"renew_time": None, "labels": {"zone": "b"}}, "node selector mismatch"),  # infeasible checks come first
        ({"renew_time": None, "unschedulable": True}, "NotReady"),
        ({"unschedulable": True, "requested": {"cpu": 4000}}, "insufficient cpu"),
        ({"unschedulable": True}, "unschedulable"),
    ],
)
def test_first_rejection_order(fields: dict[str, object], reason: str | None) -> None:
    p = project(node_selector={"zone": "a"}, requests={"cpu": 1000})
    base: dict[str, object] = {"labels": {"zone": "a"}, **fields}
    result = first_rejection(p, node(**base), CTX)
    assert (None if result is None else result.reason) == reason
    assert [f.name for f in FILTERS] == [
        "NodeSelector",
        "NodeAffinity",
        "TopologyLabels",
        "HostPaths",
        "TaintToleration",
        "NodeResourcesFit",
        "NodePorts",
        "NodeReady",
        "NodeUnschedulable",
        "ProjectAffinity",
        "ProjectAntiAffinity",
        "TopologySpread",
    ]


@pytest.mark.parametrize(
    ("total", "percentage", "expected"),
    [
        (0, 0, 0),
        (1, 0, 1),
        (99, 0, 99),  # fewer than 100: all
        (100, 0, 100),
        (200, 0, 100),  # 49 % of 200 = 98 → at least 100
        (1000, 0, 420),  # 50 - 8 = 42 %
        (5000, 0, 500),  # 50 - 40 = 10 %
        (6000, 0, 300),  # 50 - 48 = 2 % → floor 5 %
        (20000, 0, 1000),  # 5 %
        (1000, 30, 300),  # explicit percentage
        (1000, 5, 100),  # explicit, never below 100
        (1000, 100, 1000),
    ],
)
def test_nodes_to_find(total: int, percentage: int, expected: int) -> None:
    assert nodes_to_find(total, percentage) == expected


def test_schedule_picks_the_only_eligible_node() -> None:
    nodes = [
        node("a-notready", renew_time=NOW - 200),
        node("b-cordoned", unschedulable=True),
        node("c-wrong-zone", labels={"zone": "b"}),
        node("d-tainted", labels={"zone": "a"}, taints=(GPU,)),
        node("e-full", labels={"zone": "a"}, requested={"cpu": 3500}),
        node("f-ok", labels={"zone": "a"}),
    ]
    p = project(requests={"cpu": 1000}, node_selector={"zone": "a"})
    for start in range(len(nodes)):
        decision = schedule(p, nodes, CTX, start=start)
        assert decision.node == "f-ok"
        assert decision.feasible == 1


def test_a_moved_project_goes_to_another_node_and_back_only_when_no_other_fits() -> None:
    roomy, busy = node("roomy"), node("busy", requested={"cpu": 3000, "memory": 6 * GI})
    assert schedule(project(), [roomy, busy], CTX).node == "roomy"  # spread prefers the free node
    moved = schedule(project(leaving="roomy"), [roomy, busy], CTX)
    assert (moved.node, moved.runner_up) == ("busy", "roomy")
    assert schedule(project(leaving="roomy"), [roomy], CTX).node == "roomy"


def test_schedule_diagnosis_counts_every_node_once() -> None:
    nodes = [
        node("a", renew_time=None),
        node("b", renew_time=NOW - 91),
        node("c", unschedulable=True),
        node("d", requested={"memory": 8 * GI}),
        node("e", requested={"memory": 7 * GI}),
    ]
    decision = schedule(project(requests={"memory": 2 * GI}), nodes, CTX, start=3)
    assert decision.node is None and decision.visited == 5
    assert decision.diagnosis is not None
    assert (
        decision.diagnosis.message() == "0/5 nodes are available: 2 NotReady, 1 unschedulable, 2 insufficient memory."
    )


@pytest.mark.parametrize(
    ("rejections", "total", "message"),
    [
        ({}, 0, "0/0 nodes are available: no nodes are registered."),
        (
            {Rejection("node selector mismatch", True, 3): 2, Rejection("insufficient gpu", True, 2): 1},
            3,
            "0/3 nodes are available: 1 insufficient gpu, 2 node selector mismatch. "
            "No node can ever fit this project (infeasible).",
        ),
        (
            {Rejection("insufficient memory", True, 2): 1, Rejection("insufficient memory", False, 2): 2},
            3,
            "0/3 nodes are available: 3 insufficient memory. 1 of them can never fit it (infeasible); "
            "the others may free up.",
        ),
        (
            {Rejection("untolerated taint dedicated", True, 4): 1, Rejection("NotReady", False, 0): 1},
            2,
            "0/2 nodes are available: 1 NotReady, 1 untolerated taint dedicated. 1 of them can never fit it "
            "(infeasible); the others may free up.",
        ),
    ],
)
def test_unschedulable_message(rejections: dict[Rejection, int], total: int, message: str) -> None:
    assert Diagnosis(total, rejections).message() == message


def test_sampling_stops_after_enough_feasible_nodes_and_rotates() -> None:
    nodes = [node(f"n{i:04d}") for i in range(1000)]
    decision = schedule(project(requests={"cpu": 100}), nodes, CTX, start=990)
    assert decision.feasible == 420 and decision.visited == 420
    # every node in the sample was eligible; the best of them was chosen from the rotated window
    window = {f"n{(990 + i) % 1000:04d}" for i in range(420)}
    assert decision.node in window


def test_sampling_skips_infeasible_nodes_without_counting_them() -> None:
    nodes = [node(f"n{i:04d}", unschedulable=(i % 2 == 0)) for i in range(1000)]
    decision = schedule(project(), nodes, CTX, policy=Policy(percentage_of_nodes_to_score=10))
    assert decision.feasible == 100 and decision.visited == 200


def test_sampling_finds_the_only_feasible_node_among_thousands() -> None:
    """However the search starts, a sample never stops before it has found a feasible node: with one among 5 000
    (the others full, cordoned, NotReady or of the wrong zone) it is chosen, and the search visits every node."""
    kinds: list[dict[str, object]] = [
        {"labels": {"zone": "a"}, "requested": {"cpu": 4000}},
        {"labels": {"zone": "a"}, "unschedulable": True},
        {"labels": {"zone": "a"}, "renew_time": NOW - 600},
        {"labels": {"zone": "b"}},
    ]
    nodes = [node(f"n{i:05d}", **kinds[i % 4]) for i in range(5000)]
    nodes[3217] = node("n03217", labels={"zone": "a"})
    p = project(requests={"cpu": 500}, node_selector={"zone": "a"})
    for start in (0, 3217, 3218, 4999):
        decision = schedule(p, nodes, CTX, start=start)
        assert decision.node == "n03217" and decision.feasible == 1 and decision.visited == 5000


def test_sampled_decisions_spread_projects_over_all_nodes() -> None:
    """Decisions that each look at a sample (5 % of 2 000 nodes) but start where the previous one stopped place a
    stream of equal projects over every node evenly, as a search of all nodes would."""
    nodes = [node(f"n{i:05d}", requested={}) for i in range(2000)]
    policy = Policy(percentage_of_nodes_to_score=5)
    start = 0
    for i in range(4000):
        decision = schedule(ProjectInfo(f"p{i}", requests={"cpu": 1000}), nodes, CTX, start=start, policy=policy)
        assert decision.node is not None and decision.visited == 100
        start += decision.visited
        chosen = nodes[int(decision.node[1:])]
        chosen.requested["cpu"] = chosen.requested.get("cpu", 0) + 1000
    assert {n.requested.get("cpu", 0) for n in nodes} == {2000}


def test_a_decision_runs_only_the_filters_that_can_refuse_the_project() -> None:
    """Without a nodeSelector the selector filter passes every node, so a decision leaves it out; with one it runs
    first, as in FILTERS. Placement filters run only for projects with such rules; prepared for a decision (with a
    context), anti-affinity is left out too when no placed project has required anti-affinity."""
    assert node_selector_matches not in checks_for(project())
    with_both = checks_for(project(node_selector={"zone": "a"}, host_paths=("/srv",)))
    rules_only = ("NodePorts", "NodeAffinity", "TopologyLabels", "ProjectAffinity", "TopologySpread")
    assert with_both == tuple(f.check for f in FILTERS if f.name not in rules_only)  # no host ports, no rules
    prepared = checks_for(project(node_selector={"zone": "a"}, host_paths=("/srv",)), ctx=CTX)
    assert prepared == tuple(f.check for f in FILTERS if f.name not in (*rules_only, "ProjectAntiAffinity"))
