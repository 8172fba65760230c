"""Placement rules as tables: node affinity operators, the topology index (incremental counts, the what-if view),
the project affinity, anti-affinity and spread filters and scores, and the Unschedulable reasons they add."""

from __future__ import annotations

import pytest

from caravanserai import v1
from caravanserai.controllers.scheduler.algorithm import Diagnosis, Policy, schedule
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.explain import node_scores
from caravanserai.controllers.scheduler.filters import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    NODE_AFFINITY_MISMATCH,
    FilterContext,
    node_affinity_matches,
    prepare_affinity,
    prepare_anti_affinity,
    prepare_spread,
    topology_labels_present,
)
from caravanserai.controllers.scheduler.placementscores import node_affinity, prepare_project_affinity
from caravanserai.controllers.scheduler.placementscores import prepare_spread as prepare_spread_score
from caravanserai.controllers.scheduler.scores import scorer, total_score
from caravanserai.controllers.scheduler.snapshot import NodeInfo, ProjectInfo, project_info
from caravanserai.controllers.scheduler.topology import Placed, TopologyIndex, least_loaded
from caravanserai.project.affinity import (
    DO_NOT_SCHEDULE,
    HOSTNAME_KEY,
    SCHEDULE_ANYWAY,
    ZONE_KEY,
    NodeTerm,
    Placement,
    ProjectSelector,
    ProjectTerm,
    Requirement,
    SpreadConstraint,
    placement_of,
)
from caravanserai.testing.builders import project as project_message

NOW = 1_000_000.0
GI = 1024**3
APP_DB = ProjectSelector((("app", "db"),))
WEB = ProjectSelector((("app", "web"),))


def node(name: str, zone: str | None = None, **labels: str) -> NodeInfo:
    all_labels = dict(labels) | ({ZONE_KEY: zone} if zone else {})
    return NodeInfo(name, labels=all_labels, allocatable={"cpu": 4000, "memory": 8 * GI}, renew_time=NOW)


def project(name: str = "p", labels: dict[str, str] | None = None, **rules: object) -> ProjectInfo:
    return ProjectInfo(name, labels=labels or {}, placement=Placement(**rules))  # type: ignore[arg-type]  # rules are Placement fields, typed object here


@pytest.mark.parametrize(
    ("operator", "values", "labels", "matches"),
    [
        ("In", ("ssd", "nvme"), {"disk": "ssd"}, True),
        ("In", ("ssd",), {"disk": "hdd"}, False),
        ("In", ("ssd",), {}, False),
        ("NotIn", ("hdd",), {"disk": "ssd"}, True),
        ("NotIn", ("hdd",), {}, True),  # absent: not in
        ("NotIn", ("hdd",), {"disk": "hdd"}, False),
        ("Exists", (), {"disk": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"disk": "x"}, False),
        ("Gt", ("4",), {"disk": "8"}, True),
        ("Gt", ("8",), {"disk": "8"}, False),
        ("Gt", ("4",), {"disk": "fast"}, False),  # not an integer: never matches
        ("Gt", ("4",), {}, False),
        ("Lt", ("4",), {"disk": "-1"}, True),
        ("Lt", ("4",), {"disk": "4"}, False),
    ],
)
def test_node_requirement_operators(
    operator: str, values: tuple[str, ...], labels: dict[str, str], matches: bool
) -> None:
    assert Requirement("disk", operator, values).matches(labels) is matches


def test_required_node_terms_are_an_or_of_ands_and_infeasible() -> None:
    ssd = NodeTerm((Requirement("disk", "In", ("ssd",)), Requirement("gen", "Gt", ("2",))))
    gpu = NodeTerm((Requirement("gpu", "Exists"),))
    p = project(node_required=(ssd, gpu))
    ctx = FilterContext(now=NOW)
    assert node_affinity_matches(p, node("a", disk="ssd", gen="3"), ctx) is None
    assert node_affinity_matches(p, node("b", gpu="1"), ctx) is None
    refused = node_affinity_matches(p, node("c", disk="ssd", gen="2"), ctx)
    assert refused is not None and (refused.reason, refused.infeasible) == (NODE_AFFINITY_MISMATCH, True)
    assert not NodeTerm(()).matches({"x": "y"})  # an empty term matches no node


def test_preferred_node_affinity_score_is_the_matched_share_of_weights() -> None:
    p = project(
        node_preferred=(
            (30, NodeTerm((Requirement("disk", "In", ("ssd",)),))),
            (10, NodeTerm((Requirement("gpu", "Exists"),))),
        )
    )
    assert node_affinity(p, node("a", disk="ssd")) == 75.0
    assert node_affinity(p, node("b", gpu="1", disk="ssd")) == 100.0
    assert node_affinity(p, node("c")) == 0.0
    assert node_affinity(project(), node("c")) == 0.0


def indexed(*placed: tuple[str, str, dict[str, str]], nodes: list[NodeInfo]) -> TopologyIndex:
    index = TopologyIndex()
    for n in nodes:
        index.set_node(n.name, n.labels)
    for name, where, labels in placed:
        index.place(name, Placed(where, labels))
    return index


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")]


def test_the_index_counts_incrementally_and_follows_node_label_changes() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), nodes=NODES)
    zone = ProjectTerm(APP_DB, ZONE_KEY)
    host = ProjectTerm(APP_DB, HOSTNAME_KEY)
    assert index.domain_counts(zone) == {"a": 1} and index.domain_counts(host) == {"a1": 1}
    index.place("db-1", Placed("b1", {"app": "db"}))
    index.place("web", Placed("b1", {"app": "web"}))
    assert index.domain_counts(zone) == {"a": 1, "b": 1} and index.matching(APP_DB) == 2
    index.place("db-0", None)
    assert index.domain_counts(zone) == {"b": 1}
    index.set_node("b1", {ZONE_KEY: "c"})  # relabelled: its projects move to the new zone
    assert index.domain_counts(zone) == {"c": 1}
    assert set(index.domains(ZONE_KEY)) == {"a", "c"}


def test_the_what_if_view_subtracts_projects_without_changing_the_index() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), ("db-1", "a2", {"app": "db"}), nodes=NODES)
    index.place("guard", Placed("b1", {"app": "guard"}, anti_required=(ProjectTerm(WEB, ZONE_KEY),)))
    zone = ProjectTerm(APP_DB, ZONE_KEY)
    view = index.without(["db-0", "guard"])
    assert view.domain_counts(zone) == {"a": 1} and view.matching(APP_DB) == 1
    assert view.anti_affinity_against({"app": "web"}) == []
    assert index.domain_counts(zone) == {"a": 2}  # the index itself is unchanged
    assert index.anti_affinity_against({"app": "web"}) == [(ZONE_KEY, {"b": 1})]


def test_required_anti_affinity_refuses_the_domain_and_is_symmetric() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), nodes=NODES)
    ctx = FilterContext(now=NOW, topology=index)
    p = project(labels={"app": "web"}, anti_required=(ProjectTerm(APP_DB, ZONE_KEY),))
    check = prepare_anti_affinity(p, ctx)
    assert check is not None
    refused = check(p, NODES[1], ctx)  # a2: same zone as db-0
    assert refused is not None and (refused.reason, refused.infeasible) == (ANTI_AFFINITY_MISMATCH, False)
    assert check(p, NODES[2], ctx) is None
    assert check(p, node("nozone"), ctx) is None  # no zone label: no such domain
    # A placed project's required anti-affinity keeps matching projects out of its domain.
    index.place("loner", Placed("b1", {"app": "loner"}, anti_required=(ProjectTerm(WEB, HOSTNAME_KEY),)))
    plain = project(labels={"app": "web"})
    symmetric = prepare_anti_affinity(plain, ctx)
    assert symmetric is not None and symmetric(plain, NODES[2], ctx) is not None
    assert symmetric(plain, NODES[3], ctx) is None
    assert prepare_anti_affinity(project(labels={"app": "other"}), ctx) is None  # nothing can refuse it


def test_required_affinity_needs_a_match_in_the_domain_except_for_the_first_of_a_group() -> None:
    index = indexed(("cache", "b1", {"app": "cache"}), nodes=NODES)
    ctx = FilterContext(now=NOW, topology=index)
    near_cache = project(affinity_required=(ProjectTerm(ProjectSelector((("app", "cache"),)), ZONE_KEY),))
    check = prepare_affinity(near_cache, ctx)
    assert check is not None
    assert check(near_cache, NODES[2], ctx) is None
    refused = check(near_cache, NODES[0], ctx)
    assert refused is not None and (refused.reason, refused.infeasible) == (AFFINITY_MISMATCH, False)
    first = project(labels={"app": "db"}, affinity_required=(ProjectTerm(APP_DB, ZONE_KEY),))
    first_check = prepare_affinity(first, ctx)
    assert first_check is not None and first_check(first, NODES[0], ctx) is None
    assert first_check(first, node("nozone"), ctx) is not None  # still needs the topology label
    # Kubernetes' rule is for all terms at once: with the cache term matched somewhere, the db term (no db placed
    # yet) is required as written, so no node qualifies; without the cache term, the first db goes anywhere.
    both = project(
        labels={"app": "db"},
        affinity_required=(ProjectTerm(APP_DB, ZONE_KEY), ProjectTerm(ProjectSelector((("app", "cache"),)), ZONE_KEY)),
    )
    both_check = prepare_affinity(both, ctx)
    assert both_check is not None and all(both_check(both, n, ctx) is not None for n in NODES)


@pytest.mark.parametrize(
    ("placed_zones", "max_skew", "allowed"),
    [
        ([], 1, {"a1", "a2", "b1", "c1"}),
        (["a"], 1, {"b1", "c1"}),  # a would reach 2 against 0
        (["a", "b"], 1, {"c1"}),
        (["a", "b", "c"], 1, {"a1", "a2", "b1", "c1"}),
        (["a", "a"], 2, {"b1", "c1"}),
        (["a"], 2, {"a1", "a2", "b1", "c1"}),
    ],
)
def test_spread_do_not_schedule_keeps_skew_within_max_skew(
    placed_zones: list[str], max_skew: int, allowed: set[str]
) -> None:
    zone_node = {"a": "a1", "b": "b1", "c": "c1"}
    index = indexed(*((f"web-{i}", zone_node[z], {"app": "web"}) for i, z in enumerate(placed_zones)), nodes=NODES)
    ctx = FilterContext(now=NOW, topology=index)
    p = project(labels={"app": "web"}, spread=(SpreadConstraint(max_skew, ZONE_KEY, DO_NOT_SCHEDULE, WEB),))
    check = prepare_spread(p, ctx)  # None when it refuses no domain
    verdicts = {n.name: None if check is None else check(p, n, ctx) for n in NODES}
    assert {name for name, verdict in verdicts.items() if verdict is None} == allowed
    assert (check is None) == (allowed == {n.name for n in NODES})
    refused = [verdict for name, verdict in verdicts.items() if name not in allowed]
    assert all(r is not None and r.reason == f"node(s) would exceed maxSkew {max_skew} in zone" for r in refused)
    missing = topology_labels_present(p, node("nozone"), ctx)
    assert missing is not None and missing.infeasible


def test_spread_schedule_anyway_is_a_score_not_a_filter() -> None:
    index = indexed(("web-0", "a1", {"app": "web"}), ("web-1", "a2", {"app": "web"}), nodes=NODES)
    ctx = FilterContext(now=NOW, topology=index)
    p = project(labels={"app": "web"}, spread=(SpreadConstraint(1, ZONE_KEY, SCHEDULE_ANYWAY, WEB),))
    assert prepare_spread(p, ctx) is None
    score = prepare_spread_score(p, index)
    assert score is not None
    assert score(NODES[2]) == 100.0 and score(NODES[0]) == pytest.approx(100 / 3) and score(node("nozone")) == 0.0


def test_preferred_anti_affinity_and_affinity_scores() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), ("db-1", "a2", {"app": "db"}), nodes=NODES)
    apart = project(anti_preferred=((50, ProjectTerm(APP_DB, ZONE_KEY)),))
    score = prepare_project_affinity(apart, index)
    assert score is not None and score(NODES[2]) == 100.0 and score(NODES[0]) == pytest.approx(100 / 3)
    near = project(affinity_preferred=((50, ProjectTerm(APP_DB, ZONE_KEY)),))
    near_score = prepare_project_affinity(near, index)
    assert near_score is not None and near_score(NODES[0]) == pytest.approx(200 / 3) and near_score(NODES[2]) == 0.0
    assert prepare_project_affinity(project(), index) is None


def test_least_loaded_counts_empty_domains() -> None:
    assert least_loaded({"a": 2}, {"a", "b"}) == 0
    assert least_loaded({"a": 2, "b": 1}, {"a", "b"}) == 1
    assert least_loaded({}, set()) == 0


def test_scorer_equals_total_score_and_the_explanation_sums_to_it() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), nodes=NODES)
    p = project(
        labels={"app": "db"},
        node_preferred=((10, NodeTerm((Requirement(ZONE_KEY, "In", ("b",)),))),),
        anti_preferred=((50, ProjectTerm(APP_DB, ZONE_KEY)),),
        spread=(SpreadConstraint(1, HOSTNAME_KEY, SCHEDULE_ANYWAY, APP_DB),),
    )
    score_of = scorer(p, topology=index)
    for n in NODES:
        assert score_of(n) == total_score(p, n, topology=index)
        explained = node_scores(p, n, Policy(), index)
        assert explained.total == pytest.approx(score_of(n))
        assert [s.plugin for s in explained.plugins][-3:] == ["node-affinity", "project-affinity", "spread"]


def test_a_decision_reports_affinity_and_spread_reasons() -> None:
    index = indexed(("db-0", "a1", {"app": "db"}), ("db-1", "b1", {"app": "db"}), nodes=NODES)
    ctx = FilterContext(now=NOW, topology=index)
    p = project(labels={"app": "db"}, anti_required=(ProjectTerm(APP_DB, ZONE_KEY),),
                spread=(SpreadConstraint(1, ZONE_KEY, DO_NOT_SCHEDULE, APP_DB),))  # fmt: skip
    decision = schedule(p, NODES, ctx)
    assert decision.node == "c1"
    full = schedule(p, NODES[:3], ctx)
    assert full.diagnosis is not None
    assert full.diagnosis.message() == "0/3 nodes are available: 3 node(s) didn't match project anti-affinity."
    spread_only = project(labels={"app": "db"}, spread=(SpreadConstraint(1, ZONE_KEY, DO_NOT_SCHEDULE, APP_DB),))
    index.place("db-2", Placed("c1", {"app": "db"}))
    index.place("db-3", Placed("c1", {"app": "db"}))
    refused = schedule(spread_only, [NODES[3]], ctx)
    assert isinstance(refused.diagnosis, Diagnosis)
    assert refused.diagnosis.message() == "0/1 nodes are available: 1 node(s) would exceed maxSkew 1 in zone."


def test_the_cluster_state_files_bound_and_assumed_projects() -> None:
    state = ClusterState()
    for n in NODES:
        obj = v1.Node()
        obj.metadata.name = n.name
        obj.metadata.labels.update(n.labels)
        state.upsert_node(obj)
    bound = project_message("db-0", labels={"app": "db"})
    bound.spec.affinity.project_anti_affinity.required.add(topology_key=ZONE_KEY).label_selector.match_labels["app"] = (
        "db"
    )
    bound.metadata.resource_version = "1"
    moved = v1.Project()
    moved.CopyFrom(bound)
    moved.status.phase, moved.status.node_ref = v1.SCHEDULED, "a1"
    state.observe_project(None, moved)
    term = ProjectTerm(APP_DB, ZONE_KEY)
    assert state.topology.domain_counts(term) == {"a": 1}
    assert state.topology.anti_affinity_against({"app": "db"}) == [(ZONE_KEY, {"a": 1})]
    info = project_info(project_message("db-1", labels={"app": "db"}))
    assumption = state.assume(info, "b1")
    assert state.topology.domain_counts(term) == {"a": 1, "b": 1}
    state.forget(assumption)
    state.forget_project(moved)
    assert state.topology.domain_counts(term) == {} and len(state.topology) == 0
    assert placement_of(bound.spec).anti_required == (term,)


def test_domain_filters_run_first_yet_a_failure_is_counted_in_filter_order() -> None:
    # Zone a is full and over the skew; zone b is over the skew only. The search refuses by domain first, but the
    # Unschedulable message counts the node of zone a under resources, as the filter order says.
    index = TopologyIndex()
    full = NodeInfo("a1", labels={ZONE_KEY: "a"}, allocatable={"cpu": 1000}, requested={"cpu": 1000}, renew_time=NOW)
    nodes = [full, node("b1", "b"), node("c1", "c")]
    for n in nodes:
        index.set_node(n.name, n.labels)
    for i, on in enumerate(("a1", "a1", "b1", "b1")):
        index.place(f"web-{i}", Placed(on, {"app": "web"}))
    p = project(labels={"app": "web"}, spread=(SpreadConstraint(1, ZONE_KEY, DO_NOT_SCHEDULE, WEB),))
    p = ProjectInfo(p.name, requests={"cpu": 500}, labels=p.labels, placement=p.placement)
    decision = schedule(p, nodes[:2], FilterContext(now=NOW, topology=index))
    assert decision.node is None and decision.diagnosis is not None
    assert decision.diagnosis.message() == (
        "0/2 nodes are available: 1 insufficient cpu, 1 node(s) would exceed maxSkew 1 in zone."
    )
    assert schedule(p, nodes, FilterContext(now=NOW, topology=index)).node == "c1"
