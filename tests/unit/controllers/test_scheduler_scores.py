"""Scheduler scores and the choice among feasible nodes, as tables."""

from __future__ import annotations

import pytest

from caravanserai.controllers.scheduler.algorithm import Policy, schedule
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.scores import (
    BINPACK,
    MIN_RPO_SCORE,
    SPREAD,
    Weights,
    least_allocated,
    most_allocated,
    prefer_no_schedule,
    resource_score,
    rpo,
    scorer,
    start_delay,
    tie_break_key,
    total_score,
)
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, TaintInfo, TolerationInfo
from caravanserai.project.movecost import ASSUMED_DOWNLOAD_RATE, ASSUMED_IMAGE_BYTES, MoveNeeds, VolumeNeeds

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
IMAGE = ("app:latest", 100 * MB)
DATA = VolumeNeeds("data", "repo", node="old", restore_bytes=GI, rpo_bytes=50 * MB, every=60.0)


def needs(images: tuple[tuple[str, int], ...] = (IMAGE,), volumes: tuple[VolumeNeeds, ...] = ()) -> MoveNeeds:
    everies = [v.every for v in volumes if v.every is not None]
    return MoveNeeds(
        images=images,
        volumes=volumes,
        repositories=tuple(sorted({v.repository for v in volumes})),
        rpo_bytes=sum(v.rpo_bytes for v in volumes),
        shortest_every=min(everies) if everies else None,
    )


@pytest.mark.parametrize(
    ("images", "volumes", "fields", "seconds"),
    [
        ((IMAGE,), (), {"download": 10 * MB}, 10.0),  # 100 MiB to pull at 10 MiB/s
        ((IMAGE,), (), {"download": 10 * MB, "images": frozenset({"app:latest"})}, 0.0),  # nothing to fetch
        ((IMAGE, ("db:1", 100 * MB)), (), {"download": 10 * MB}, 20.0),  # two images take twice as long
        ((IMAGE,), (), {}, 100 * MB / ASSUMED_DOWNLOAD_RATE),  # unmeasured: the assumed rate
        ((IMAGE,), (DATA,), {"download": 10 * MB}, (100 * MB + GI) / (10 * MB)),  # plus the restore
        ((IMAGE,), (DATA,), {"name": "old", "download": 10 * MB}, 10.0),  # the data is already there
        ((IMAGE,), (DATA,), {"download": 10 * MB, "restore_rates": {"repo": 100 * MB}}, (100 * MB + GI) / (100 * MB)),
        ((IMAGE,), (DATA,), {"download": 10 * MB, "restore_rates": {"other": 100 * MB}}, (100 * MB + GI) / (10 * MB)),
    ],
)
def test_start_delay(
    images: tuple[tuple[str, int], ...], volumes: tuple[VolumeNeeds, ...], fields: dict[str, object], seconds: float
) -> None:
    p = project(needs=needs(images, volumes))
    expected = 100 * 10 / (10 + seconds)
    assert start_delay(p, node(**fields)) == pytest.approx(expected)
    assert scorer(p, weights=Weights(resources=0, taints=0, pull=1, rpo=0))(node(**fields)) == pytest.approx(expected)


def test_start_delay_prefers_faster_starts_and_never_reaches_zero() -> None:
    p = project(needs=needs((IMAGE,), (DATA,)))
    slow, fast = start_delay(p, node(download=1e6)), start_delay(p, node(download=1e9))
    assert 0 < slow < fast < 100
    assert start_delay(p, node(name="old", images=frozenset({"app:latest"}))) == 100.0  # nothing to fetch
    assert start_delay(project(), node()) == 100.0  # a project without images or volumes starts at once


@pytest.mark.parametrize(
    ("upload", "every", "score"),
    [
        (None, 60.0, 100.0),  # unknown upload rate: feasible
        (50 * MB, 60.0, 100.0),  # 1 s per backup against 60 s
        (50 * MB / 60, 60.0, 100.0),  # exactly every
        (50 * MB / 120, 60.0, 50.0),  # twice as long as every
        (50 * MB / 600, 60.0, 10.0),
        (1.0, 60.0, MIN_RPO_SCORE),  # hopeless: never 0
        (1.0, None, 100.0),  # no readable every: nothing to miss
    ],
)
def test_rpo_score(upload: float | None, every: float | None, score: float) -> None:
    volume = VolumeNeeds("data", "repo", rpo_bytes=50 * MB, every=every)
    assert rpo(project(needs=needs((), (volume,))), node(upload=upload)) == pytest.approx(score)


def test_rpo_score_of_a_project_that_uploads_nothing_is_full() -> None:
    assert rpo(project(), node(upload=1.0)) == 100.0
    assert rpo(project(needs=needs((), (VolumeNeeds("data", "repo", every=60.0),))), node(upload=1.0)) == 100.0


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
    volume = VolumeNeeds("data", "repo", rpo_bytes=100 * MB, every=10.0)
    p = project(requests={"cpu": 2000, "memory": 4 * GI}, needs=needs(((IMAGE[0], 100 * MB),), (volume,)))
    n = node(taints=(SPOT,), download=10 * MB, upload=5 * MB)  # pulls in 10 s (50), uploads in 20 s (50)
    weights = Weights(resources=2, taints=3, pull=1, rpo=4)
    assert total_score(p, n, weights=weights) == pytest.approx(2 * 50 + 3 * 50 + 1 * 50 + 4 * 50)
    only_resources = Weights(resources=1, taints=0, pull=0, rpo=0)
    assert total_score(p, n, strategy=BINPACK, weights=only_resources) == pytest.approx(50)
    assert Weights() == Weights(resources=2, taints=3, pull=1, rpo=1)  # the defaults


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [(SPREAD, "empty"), (BINPACK, "busy")],
)
def test_strategy_decides_between_an_empty_and_a_busy_node(strategy: str, expected: str) -> None:
    nodes = [node("busy", requested={"cpu": 2000, "memory": 4 * GI}), node("empty")]
    decision = schedule(project(requests={"cpu": 1000}), nodes, CTX, policy=Policy(strategy=strategy))
    assert decision.node == expected


def test_throughput_is_advisory_only() -> None:
    p = project(requests={"cpu": 500}, needs=needs())
    fast = node("fast", download=1e9, requested={"cpu": 3000, "memory": 6 * GI})
    slow = node("slow", download=1e6)
    # the fast node is busier; spreading outweighs pull speed
    assert schedule(p, [fast, slow], CTX).node == "slow"
    # all else equal, the faster download wins
    assert schedule(project(needs=needs()), [node("a", download=1e6), node("b", download=1e9)], CTX).node == "b"
    # an unmeasured node is never excluded
    assert schedule(project(needs=needs()), [node("only", download=None)], CTX).node == "only"


def test_a_large_restore_outweighs_a_little_spread_and_a_slow_upload_never_excludes() -> None:
    p = project(requests={"cpu": 500}, needs=needs((IMAGE,), (DATA,)))
    busier_but_fast = node("fast", download=1e9, requested={"cpu": 1000})
    idle_but_slow = node("slow", download=10e6)
    decision = schedule(p, [busier_but_fast, idle_but_slow], CTX)
    assert (decision.node, decision.runner_up) == ("fast", "slow")
    assert decision.score > decision.runner_up_score
    lagging = node("lagging", upload=1e3)  # cannot upload 50 MiB per minute: scored down, still the only choice
    assert schedule(p, [lagging], CTX).node == "lagging"
    keeping_up = node("keeping-up", upload=1e9)
    assert schedule(p, [lagging, keeping_up], CTX).node == "keeping-up"


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
        node(images=frozenset({"a:1"}), download=3e7, upload=1e3),
        node(images=frozenset({"a:1", "b:2"}), upload=1e9),
        node("old", restore_rates={"repo": 2e8}, download=1e6),
        node(restore_rates={"elsewhere": 2e8}, upload=2e5),
    ]
    volumes = (DATA, VolumeNeeds("logs", "repo", node="n", restore_bytes=MB, rpo_bytes=MB, every=300.0))
    projects = [
        project(requests={"cpu": 700, "memory": GI}, needs=needs((("a:1", 3 * MB), ("b:2", ASSUMED_IMAGE_BYTES)))),
        project(requests={"cpu": 700, "memory": GI}, needs=needs((("a:1", 3 * MB),), volumes)),
        project(requests={"memory": GI}),
    ]
    weights = Weights(resources=1.5, taints=2.0, pull=0.5, rpo=0.7)
    for p in projects:
        score = scorer(p, strategy=strategy, weights=weights)
        for n in nodes:
            assert score(n) == total_score(p, n, strategy=strategy, weights=weights)


def test_the_scorer_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        scorer(project(), strategy="random")


def test_the_runner_up_is_the_best_of_the_others() -> None:
    p = project(requests={"cpu": 1000})
    nodes = [node("busy", requested={"cpu": 3000}), node("empty"), node("half", requested={"cpu": 2000})]
    for start in range(3):
        decision = schedule(p, nodes, CTX, start=start)
        assert (decision.node, decision.runner_up) == ("empty", "half")
        assert decision.score > decision.runner_up_score > 0
    alone = schedule(p, [node("only")], CTX)
    assert (alone.node, alone.runner_up, alone.runner_up_score) == ("only", None, 0.0)


def test_among_equal_nodes_the_runner_up_is_another_of_them() -> None:
    nodes = [node(f"n{i}") for i in range(6)]
    for j in range(10):
        decision = schedule(project(f"p{j}"), nodes, CTX)
        assert decision.runner_up is not None and decision.runner_up != decision.node
        assert decision.runner_up_score == decision.score
