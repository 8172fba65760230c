"""Scheduler scores and the choice among feasible nodes, as tables."""

from __future__ import annotations

import pytest

from caravanserai.controllers.scheduler.algorithm import Policy, schedule
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.scores import (
    ASSUMED_IMAGE_BYTES,
    BINPACK,
    SPREAD,
    Weights,
    estimated_pull_seconds,
    least_allocated,
    most_allocated,
    prefer_no_schedule,
    pull_speed,
    resource_score,
    scorer,
    tie_break_key,
    total_score,
)
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, TaintInfo, TolerationInfo

NOW = 1_000_000.0
CTX = FilterContext(now=NOW)
GI = 1024**3


def node(name: str = "n", **fields: object) -> NodeInfo:
    defaults: dict[str, object] = {"allocatable": {"cpu": 4000, "memory": 8 * GI}, "renew_time": NOW}
    defaults.update(fields)
    return NodeInfo(name, **defaults)  # type: ignore[arg-type]  # fields are NodeInfo fields, typed object here


def project(name: str = "p", **fields: object) -> ProjectInfo:
    return ProjectInfo(name, **fields)  # type: ignore[arg-type]  # fields are ProjectInfo fields, typed object here


@pytest.mark.parametrize(
    ("requests", "allocatable", "requested", "least", "most"),
    [
        ({}, {"cpu": 4000, "memory": 8 * GI}, {}, 100.0, 0.0),
        ({"cpu": 1000}, {"cpu": 4000, "memory": 8 * GI}, {}, 87.5, 12.5),  # cpu 75 % free, memory 100 %
        ({"cpu": 2000, "memory": 4 * GI}, {"cpu": 4000, "memory": 8 * GI}, {}, 50.0, 50.0),
        ({"cpu": 1000}, {"cpu": 4000, "memory": 8 * GI}, {"cpu": 3000, "memory": 8 * GI}, 0.0, 100.0),
        ({}, {"cpu": 4000}, {}, 50.0, 0.0),  # a node without memory scores 0 for it
        ({}, {}, {}, 0.0, 0.0),
        ({"cpu": 1000}, {"cpu": 1000, "memory": GI}, {"cpu": 1000}, 50.0, 50.0),  # overcommitted: clamped
    ],
)
def test_resource_scores(
    requests: dict[str, int], allocatable: dict[str, int], requested: dict[str, int], least: float, most: float
) -> None:
    n = node(allocatable=allocatable, requested=requested)
    assert least_allocated(project(requests=requests), n) == pytest.approx(least)
    assert most_allocated(project(requests=requests), n) == pytest.approx(most)


@pytest.mark.parametrize(("strategy", "function"), [(SPREAD, least_allocated), (BINPACK, most_allocated)])
def test_resource_score_by_strategy(strategy: str, function: object) -> None:
    assert resource_score(strategy) is function


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        resource_score("random")


MB = 1024 * 1024


@pytest.mark.parametrize(
    ("download", "images", "seconds", "score"),
    [
        (None, 1, None, 50.0),  # unmeasured: as a node pulling in the reference time
        (0.0, 1, None, 50.0),
        (ASSUMED_IMAGE_BYTES / 10, 1, 10.0, 50.0),
        (ASSUMED_IMAGE_BYTES / 10, 2, 20.0, 100 / 3),  # two distinct images take twice as long
        (ASSUMED_IMAGE_BYTES / 1, 1, 1.0, 1000 / 11),
        (ASSUMED_IMAGE_BYTES / 90, 1, 90.0, 10.0),
    ],
)
def test_pull_speed(download: float | None, images: int, seconds: float | None, score: float) -> None:
    p = project(images=frozenset(f"img{i}" for i in range(images)))
    n = node(download=download)
    assert estimated_pull_seconds(p, n) == (None if seconds is None else pytest.approx(seconds))
    assert pull_speed(p, n) == pytest.approx(score)


SPOT = TaintInfo("spot", "", "PreferNoSchedule")
SLOW = TaintInfo("slow", "yes", "PreferNoSchedule")
HARD = TaintInfo("dedicated", "gpu", "NoSchedule")


@pytest.mark.parametrize(
    ("taints", "tolerations", "score"),
    [
        ((), (), 100.0),
        ((SPOT,), (), 50.0),
        ((SPOT, SLOW), (), 100 / 3),
        ((SPOT, SLOW), (TolerationInfo("spot", "Exists"),), 50.0),
        ((HARD,), (), 100.0),  # hard taints are the filter's business, not the score's
    ],
)
def test_prefer_no_schedule(
    taints: tuple[TaintInfo, ...], tolerations: tuple[TolerationInfo, ...], score: float
) -> None:
    assert prefer_no_schedule(project(tolerations=tolerations), node(taints=taints)) == pytest.approx(score)


def test_total_score_weighs_every_score() -> None:
    p = project(requests={"cpu": 2000, "memory": 4 * GI})
    n = node(taints=(SPOT,), download=None)
    weights = Weights(resources=2, taints=3, pull=1)
    assert total_score(p, n, weights=weights) == pytest.approx(2 * 50 + 3 * 50 + 1 * 50)
    assert total_score(p, n, strategy=BINPACK, weights=Weights(resources=1, taints=0, pull=0)) == pytest.approx(50)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [(SPREAD, "empty"), (BINPACK, "busy")],
)
def test_strategy_decides_between_an_empty_and_a_busy_node(strategy: str, expected: str) -> None:
    nodes = [node("busy", requested={"cpu": 2000, "memory": 4 * GI}), node("empty")]
    decision = schedule(project(requests={"cpu": 1000}), nodes, CTX, policy=Policy(strategy=strategy))
    assert decision.node == expected


def test_throughput_is_advisory_only() -> None:
    fast = node("fast", download=1e9, requested={"cpu": 3000, "memory": 6 * GI})
    slow = node("slow", download=1e6)
    # the fast node is busier; spreading outweighs pull speed
    assert schedule(project(requests={"cpu": 500}), [fast, slow], CTX).node == "slow"
    # all else equal, the faster download wins
    assert schedule(project(), [node("a", download=1e6), node("b", download=1e9)], CTX).node == "b"
    # an unmeasured node is never excluded
    assert schedule(project(), [node("only", download=None)], CTX).node == "only"


def test_prefer_no_schedule_lowers_but_never_excludes() -> None:
    assert schedule(project(), [node("a", taints=(SPOT,)), node("b")], CTX).node == "b"
    assert schedule(project(), [node("a", taints=(SPOT,))], CTX).node == "a"


def test_tie_break_is_deterministic_and_spreads_projects() -> None:
    nodes = [node(f"n{i}") for i in range(8)]
    chosen = {schedule(project(f"p{j}"), nodes, CTX).node for j in range(40)}
    assert len(chosen) > 1  # equal nodes: different projects land on different nodes
    for j in range(5):
        first = schedule(project(f"p{j}"), nodes, CTX).node
        assert all(schedule(project(f"p{j}"), nodes, CTX, start=s).node == first for s in range(8))
    assert tie_break_key("p", "a") == tie_break_key("p", "a")
    assert tie_break_key("p", "a") != tie_break_key("q", "a")


@pytest.mark.parametrize("strategy", [SPREAD, BINPACK])
def test_the_per_decision_scorer_equals_total_score(strategy: str) -> None:
    """`scorer` is `total_score` with the project fixed: exactly the same value for every kind of node."""
    nodes = [
        node(),
        node(requested={"cpu": 1500, "memory": 3 * GI}),
        node(allocatable={"cpu": 4000}),
        node(allocatable={}),
        node(taints=(TaintInfo("spot", effect="PreferNoSchedule"), TaintInfo("gpu", effect="NoSchedule"))),
        node(download=50e6),
        node(download=0.0),
        node(requested={"cpu": 9000}, download=1e9, taints=(TaintInfo("x", effect="PreferNoSchedule"),)),
    ]
    p = project(requests={"cpu": 700, "memory": GI}, images=frozenset({"a", "b"}))
    weights = Weights(resources=1.5, taints=2.0, pull=0.5)
    score = scorer(p, strategy=strategy, weights=weights)
    for n in nodes:
        assert score(n) == total_score(p, n, strategy=strategy, weights=weights)


def test_the_scorer_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        scorer(project(), strategy="random")
