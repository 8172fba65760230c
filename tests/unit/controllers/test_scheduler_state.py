"""The scheduler's cluster state (incremental sums, assumed ledger), priority ordering, backoff and statuses."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler import conditions
from caravanserai.controllers.scheduler.active import ActiveProjects, RetryBackoff
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.resources import parse_resources, project_requests
from caravanserai.controllers.scheduler.snapshot import node_rates, project_info
from caravanserai.testing.builders import lease, node, node_status, project

GI = 1024**3


def bound(name: str, node_name: str, phase: str = v1.RUNNING, *, rv: str = "1", **requests: str) -> v1.Project:
    p = project(name, requests=requests or {"cpu": "500m", "memory": "1Gi"})
    p.metadata.resource_version = rv
    p.metadata.generation = 1
    p.status.phase = phase
    p.status.node_ref = node_name if phase != v1.PENDING else ""
    return p


def test_project_requests_sum_every_service() -> None:
    p = project("p", services=3, requests={"cpu": "250m", "memory": "512Mi", "gpu": "1"})
    assert project_requests(p) == {"cpu": 750, "memory": 3 * 512 * 1024**2, "gpu": 3}
    assert project_requests(project("q")) == {}
    assert parse_resources({"cpu": "2", "memory": "8Gi", "disk": "1.5", "bad": "lots"}) == {
        "cpu": 2000,
        "memory": 8 * GI,
        "disk": 2,
        "bad": 2**63,  # unparsable: larger than any node
    }


def test_node_rates() -> None:
    n = node("n")
    assert node_rates(n) == (None, None, {})
    n.status.network.throughput.download = "12.5M"
    n.status.network.throughput.upload = "2M"
    n.status.network.restore_rates.update({"repo": "250M", "broken": "fast", "zero": "0"})
    assert node_rates(n) == (12.5e6, 2e6, {"repo": 250e6})
    n.status.network.throughput.download = "garbage"
    n.status.network.throughput.upload = "-1"
    assert node_rates(n)[:2] == (None, None)


def with_images(n: v1.Node, *images: tuple[list[str], int]) -> v1.Node:
    del n.status.images[:]
    for names, size in images:
        n.status.images.add(names=names, size_bytes=size)
    return n


def test_node_images_are_indexed_once_per_node_change() -> None:
    state = ClusterState()
    a = with_images(node_status(node("a")), (["nginx:1.27", "nginx@sha256:aa"], 70), (["docker.io/library/redis"], 40))
    state.upsert_node(a)
    state.upsert_node(with_images(node_status(node("b")), (["nginx:1.27"], 70), (["app:2"], 0)))
    info = state.node("a")
    assert info is not None and info.images == {"nginx:1.27", "nginx@sha256:aa", "redis:latest"}
    assert state.image_sizes == {"nginx:1.27": 70, "nginx@sha256:aa": 70, "redis:latest": 40, "app:2": 0}
    names = info.images
    state.upsert_node(meta.copy(a))  # the same images: the node keeps its very set
    assert state.node("a").images is names  # type: ignore[union-attr]  # the node was upserted above
    state.upsert_node(with_images(meta.copy(a), (["nginx:1.27"], 70)))  # a dropped redis: nobody holds it now
    assert state.image_sizes == {"nginx:1.27": 70, "app:2": 0}
    state.delete_node("b")
    assert state.image_sizes == {"nginx:1.27": 70}  # a still holds nginx
    state.delete_node("a")
    assert state.image_sizes == {}
    p = project("p", image="nginx:1.27")
    state.upsert_node(a)
    assert project_info(p, state.image_sizes).needs.images == (("nginx:1.27", 70),)
    assert project_info(p).needs.images[0][1] == 200 * 1024**2  # no sizes known: the assumed size


def test_bound_projects_are_counted_incrementally() -> None:
    state = ClusterState()
    state.upsert_node(node_status(node("n1")))
    a = bound("a", "n1")
    assert not state.observe_project(None, a).freed
    assert state.requested("n1") == {"cpu": 500, "memory": GI}
    b = bound("b", "n1", v1.SCHEDULED, cpu="1")
    state.observe_project(None, b)
    assert state.node("n1").requested == {"cpu": 1500, "memory": GI}  # type: ignore[union-attr]  # the node was just upserted
    # Running → Terminating keeps counting; Terminating → Terminated frees
    term = meta.copy(a)
    term.status.phase = v1.TERMINATING
    assert not state.observe_project(a, term).freed
    gone = meta.copy(term)
    gone.status.phase = v1.TERMINATED
    assert state.observe_project(term, gone).freed_on == {"n1"}
    assert state.requested("n1") == {"cpu": 1000}
    # deletion frees; a project on a node the informer has not shown yet still counts there
    assert state.forget_project(b).freed
    state.observe_project(None, bound("c", "later"))
    assert state.requested("n1") == {} and state.requested("later") == {"cpu": 500, "memory": GI}
    state.upsert_node(node_status(node("later")))
    assert state.node("later").requested == {"cpu": 500, "memory": GI}  # type: ignore[union-attr]  # the node was just upserted


def test_a_spec_change_of_a_bound_project_is_recounted() -> None:
    state = ClusterState()
    old = bound("a", "n1", cpu="2")
    state.observe_project(None, old)
    new = meta.copy(old)
    new.spec.services[0].resources.requests["cpu"] = "1"
    new.metadata.generation = 2
    assert state.observe_project(old, new).freed
    assert state.requested("n1") == {"cpu": 1000}


def test_assumption_counts_until_the_informer_moves_past_its_version() -> None:
    state = ClusterState()
    pending = bound("p", "", v1.PENDING, rv="7", cpu="1")
    state.observe_project(None, pending)
    assumption = state.assume(project_info(pending), "n1")
    assert state.is_assumed("p") and state.requested("n1") == {"cpu": 1000}
    with pytest.raises(ValueError, match="already assumed"):
        state.assume(project_info(pending), "n2")
    # the informer shows the bind: counted once, as bound
    scheduled = bound("p", "n1", v1.SCHEDULED, rv="8", cpu="1")
    change = state.observe_project(pending, scheduled)
    assert not change.retry and not state.is_assumed("p")
    assert state.requested("n1") == {"cpu": 1000}
    assert not state.forget(assumption)  # already ended: nothing changes
    assert state.requested("n1") == {"cpu": 1000}


def test_assumption_survives_older_notifications_and_ends_on_a_newer_pending_version() -> None:
    state = ClusterState()
    v5 = bound("p", "", v1.PENDING, rv="5", cpu="1")
    v6 = bound("p", "", v1.PENDING, rv="6", cpu="1")
    v7 = bound("p", "", v1.PENDING, rv="7", cpu="1")
    state.observe_project(None, v5)
    state.assume(project_info(v6), "n1")  # decided on the cache's v6 before the handlers heard of it
    assert not state.observe_project(v5, v6).retry  # catching up to the decision's version
    assert state.is_assumed("p")
    change = state.observe_project(v6, v7)  # someone else wrote first: our bind cannot land
    assert change.retry and not state.is_assumed("p") and state.requested("n1") == {}


def test_assumption_expiry_and_forget() -> None:
    state = ClusterState()
    p = bound("p", "", v1.PENDING, cpu="1")
    a = state.assume(project_info(p), "n1")
    state.expire_later(a, now=100.0, ttl=30.0)
    assert state.expired(129.0) == [] and state.is_assumed("p")
    assert state.expired(130.0) == ["p"] and state.requested("n1") == {}
    b = state.assume(project_info(p), "n2")
    assert state.forget(b) and state.requested("n2") == {}
    c = state.assume(project_info(p), "n3")
    state.forget_project(p)  # deleted while assumed
    assert not state.is_assumed("p") and state.requested("n3") == {}
    assert not state.forget(c)


def test_node_changes_that_matter_for_placement() -> None:
    state = ClusterState()
    n = node_status(node("n1", labels={"zone": "a"}))
    assert state.upsert_node(n)  # new
    same = meta.copy(n)
    same.status.network.throughput.download = "10M"
    meta.set_condition(same.status.conditions, v1.CONDITION_READY, v1.TRUE, reason="x", now=1.0)
    same.status.images.add(names=["app:1"], size_bytes=5)
    same.status.network.restore_rates["repo"] = "1M"
    assert not state.upsert_node(same)  # throughput, images and conditions only score: nothing to wake
    assert state.node("n1").download == 10e6  # type: ignore[union-attr]  # the node was upserted above
    assert state.node("n1").images == {"app:1"}  # type: ignore[union-attr]  # the node was upserted above
    assert state.node("n1").restore_rates == {"repo": 1e6}  # type: ignore[union-attr]  # the node was upserted above
    for change in ("labels", "taint", "cordon", "allocatable"):
        changed = meta.copy(same)
        if change == "labels":
            changed.metadata.labels["zone"] = "b"
        elif change == "taint":
            changed.spec.taints.add(key="k", effect="NoSchedule")
        elif change == "cordon":
            changed.spec.unschedulable = True
        else:
            changed.status.allocatable["cpu"] = "8"
        assert state.upsert_node(changed), change
        state.upsert_node(same)
    assert [i.name for i in state.nodes()] == ["n1"]
    state.upsert_node(node_status(node("a0")))
    assert [i.name for i in state.nodes()] == ["a0", "n1"]
    state.delete_node("n1")
    assert [i.name for i in state.nodes()] == ["a0"]


def test_lease_renew_time_reaches_the_node_whenever_it_arrives() -> None:
    state = ClusterState()
    ls = lease("n1")
    ls.spec.renew_time.CopyFrom(timestamp(500.0))
    assert state.set_lease(ls) is None
    state.upsert_node(node_status(node("n1")))
    assert state.node("n1").renew_time == 500.0  # type: ignore[union-attr]  # the node was just upserted
    ls.spec.renew_time.CopyFrom(timestamp(510.0))
    assert state.set_lease(ls) == 500.0
    state.delete_lease("n1")
    assert state.node("n1").renew_time is None  # type: ignore[union-attr]  # the node was upserted above


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        ([("a", 0, 1.0), ("b", 0, 2.0), ("c", 0, 0.5)], ["c", "a", "b"]),  # equal priority: oldest first
        ([("low", 0, 1.0), ("high", 10, 9.0), ("mid", 5, 5.0)], ["high", "mid", "low"]),
        ([("a", 0, 1.0), ("b", 0, 1.0)], ["a", "b"]),  # then by name
        ([("a", 0, 1.0), ("b", 1, 1.0), ("a", 5, 1.0)], ["a", "b"]),  # re-added with a new priority
        ([("a", -5, 1.0), ("b", 0, 2.0)], ["b", "a"]),  # negative priorities sort last
    ],
)
def test_active_projects_pop_by_priority(adds: list[tuple[str, int, float]], expected: list[str]) -> None:
    active = ActiveProjects()
    for name, priority, created in adds:
        active.add(name, priority=priority, created=created)
    assert len(active) == len(expected)
    assert [active.pop() for _ in expected] == expected
    assert active.pop() is None and active.peek() is None


def test_active_projects_add_discard_and_compaction() -> None:
    active = ActiveProjects()
    assert active.add("a", priority=0, created=1.0)
    assert not active.add("a", priority=0, created=1.0)  # already waiting
    active.discard("a")
    assert "a" not in active and active.pop() is None
    for i in range(500):
        active.add("x", priority=i, created=1.0)  # many re-orders leave stale entries
    assert len(active) == 1 and len(active._heap) <= 130
    assert active.peek() == "x" and active.pop() == "x"


def test_retry_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = RetryBackoff(initial=1.0, maximum=30.0)
    assert [backoff.next_delay("p") for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]  # re-checked at least every 30 s
    assert backoff.failures("p") == 7 and backoff.next_delay("q") == 1
    backoff.reset("p")
    assert backoff.next_delay("p") == 1


@pytest.mark.parametrize(
    ("now", "due"), [(100.0, False), (103.98, False), (103.995, True), (104.0, True), (200.0, True)]
)
def test_retry_backoff_knows_when_a_project_is_due(now: float, due: bool) -> None:
    backoff = RetryBackoff(initial=1.0, maximum=30.0)
    assert backoff.due("p", now=0.0)  # never failed
    backoff.next_delay("p", now=99.0)
    backoff.next_delay("p", now=102.0)  # second failure: 2 s
    assert backoff.due("p", now=now) is due
    backoff.reset("p")
    assert backoff.due("p", now=100.0)


def test_bound_and_unschedulable_statuses() -> None:
    p = project("p")
    meta.set_phase(p, v1.PENDING, reason="Created", message="accepted", now=1.0)
    out = conditions.bound(p, "n1", now=2.0)
    assert (out.status.phase, out.status.node_ref) == (v1.SCHEDULED, "n1")
    scheduled = meta.get_condition(out.status.conditions, v1.CONDITION_SCHEDULED)
    phase = meta.get_condition(out.status.conditions, v1.CONDITION_PHASE)
    assert scheduled is not None and phase is not None
    assert (scheduled.status, scheduled.reason, scheduled.message) == (v1.TRUE, "Scheduled", "Bound to node n1")
    assert (phase.reason, phase.message) == ("Scheduled", "Bound to node n1")
    assert p.status.phase == v1.PENDING  # the input is never changed
    assert not out.status.HasField("placement")

    placement = v1.PlacementEstimates(chosen=v1.NodeEstimate(node="n1", score=300.0))
    again = meta.copy(out)
    again.status.phase = v1.PENDING
    again.status.placement.runner_up.node = "stale"  # an earlier binding's estimates are replaced whole
    estimated = conditions.bound(again, "n1", now=5.0, placement=placement)
    assert estimated.status.placement == placement
    assert not conditions.bound(again, "n1", now=5.0).status.HasField("placement")

    verdict = conditions.unschedulable(p, "0/1 nodes are available: 1 NotReady.", now=3.0)
    assert verdict is not None and verdict.status.phase == v1.PENDING
    cond = meta.get_condition(verdict.status.conditions, v1.CONDITION_SCHEDULED)
    assert cond is not None and (cond.status, cond.reason) == (v1.FALSE, "Unschedulable")
    assert conditions.unschedulable(verdict, "0/1 nodes are available: 1 NotReady.", now=4.0) is None
    assert conditions.unschedulable(verdict, "0/2 nodes are available: 2 NotReady.", now=4.0) is not None
