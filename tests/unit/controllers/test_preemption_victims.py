"""Victim selection: the node and the smallest set of lower-priority projects whose eviction lets the preemptor
pass every filter; minimality checked against a brute force over every subset on small random clusters."""

from __future__ import annotations

import itertools
import random

import pytest

from caravanserai import v1
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import FILTERS, FilterContext, checks_for
from caravanserai.controllers.scheduler.nominated import Nominee
from caravanserai.controllers.scheduler.preemption import victims as victims_module
from caravanserai.controllers.scheduler.preemption.index import BoundProjects
from caravanserai.controllers.scheduler.preemption.victims import choose, victim_key
from caravanserai.controllers.scheduler.preemption.whatif import passes, whatif_checks
from caravanserai.controllers.scheduler.snapshot import ProjectInfo, project_info
from caravanserai.testing.builders import lease, node, node_status, project

NOW = 1_000_000.0
CTX = FilterContext(now=NOW)


class Cluster:
    """A ClusterState and the preemption index fed by the same project objects, as the informer feeds them."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.bound = BoundProjects()

    def node(self, name: str, *, cpu: str = "4", memory: str = "8Gi", unschedulable: bool = False) -> None:
        self.state.upsert_node(node_status(node(name, unschedulable=unschedulable), cpu=cpu, memory=memory))
        renewed = lease(name)
        renewed.spec.renew_time.CopyFrom(timestamp(NOW))
        self.state.set_lease(renewed)

    def run(
        self,
        name: str,
        on: str,
        *,
        cpu: str,
        memory: str = "64Mi",
        priority: int = 0,
        created: float = 0.0,
        port: int = 0,
        phase: str = v1.RUNNING,
    ) -> v1.Project:
        p = project(name, requests={"cpu": cpu, "memory": memory}, priority=priority)
        if port:
            p.spec.services[0].ports.add(container_port=80, host_port=port)
        p.metadata.creation_timestamp.CopyFrom(timestamp(created))
        p.metadata.generation, p.metadata.resource_version = 1, "1"
        p.status.phase, p.status.node_ref = phase, on
        self.state.observe_project(None, p)
        self.bound.observe(p)
        return p

    def choose(self, preemptor: ProjectInfo) -> tuple[str, list[str]] | None:
        choice = choose(preemptor, self.state.nodes(), self.bound, CTX, checks_for(preemptor))
        if choice is None or not choice.node:
            return None
        return (choice.node, sorted(v.name for v in choice.victims))


def preemptor(cpu: str, *, priority: int = 10, memory: str = "64Mi", port: int = 0) -> ProjectInfo:
    p = project("urgent", requests={"cpu": cpu, "memory": memory}, priority=priority)
    if port:
        p.spec.services[0].ports.add(container_port=80, host_port=port)
    return project_info(p)


def test_one_victim_is_preferred_to_two_of_lower_priority() -> None:
    c = Cluster()
    c.node("a", cpu="2")
    c.node("b", cpu="2")
    c.run("a-low1", "a", cpu="1", priority=0)
    c.run("a-low2", "a", cpu="1", priority=0)
    c.run("b-mid", "b", cpu="2", priority=5)
    assert c.choose(preemptor("2")) == ("b", ["b-mid"])


def test_lowest_priority_then_newest_is_evicted() -> None:
    c = Cluster()
    c.node("a", cpu="3")
    c.run("old-low", "a", cpu="1", priority=1, created=100)
    c.run("new-low", "a", cpu="1", priority=1, created=200)
    c.run("lowest", "a", cpu="1", priority=0, created=50)
    assert c.choose(preemptor("1")) == ("a", ["lowest"])
    c2 = Cluster()
    c2.node("a", cpu="2")
    c2.run("old-low", "a", cpu="1", priority=1, created=100)
    c2.run("new-low", "a", cpu="1", priority=1, created=200)
    assert c2.choose(preemptor("1")) == ("a", ["new-low"])


def test_equal_or_higher_priority_is_never_a_victim() -> None:
    c = Cluster()
    c.node("a", cpu="2")
    c.run("peer", "a", cpu="1", priority=10)
    c.run("boss", "a", cpu="1", priority=20)
    assert c.choose(preemptor("1", priority=10)) is None


def test_nothing_when_even_evicting_everything_lower_would_not_fit() -> None:
    c = Cluster()
    c.node("a", cpu="2")
    c.run("low", "a", cpu="1", priority=0)
    c.run("peer", "a", cpu="1", priority=10)
    assert c.choose(preemptor("2", priority=10)) is None  # 1 cpu of lower priority is all there is to free


def test_nodes_eviction_cannot_fix_are_skipped() -> None:
    c = Cluster()
    c.node("cordoned", cpu="2", unschedulable=True)
    c.node("small", cpu="1")
    c.run("c-low", "cordoned", cpu="2")
    c.run("s-low", "small", cpu="1")
    assert c.choose(preemptor("2")) is None  # cordoned: unavailable for good; small: infeasible


def test_projects_already_leaving_are_not_chosen_again() -> None:
    c = Cluster()
    c.node("a", cpu="2")
    c.run("going", "a", cpu="1", priority=0)
    c.run("staying", "a", cpu="1", priority=1)
    c.bound.mark_leaving("going")
    assert c.choose(preemptor("1")) == ("a", ["staying"])
    assert c.bound.leaving_below("a", 10) == ["going"]


def test_a_host_port_held_by_a_lower_priority_project_is_freed_by_evicting_it() -> None:
    c = Cluster()
    c.node("a", cpu="4")
    c.run("holder", "a", cpu="100m", port=8080, priority=3)
    c.run("other", "a", cpu="100m", priority=0)
    assert c.choose(preemptor("100m", port=8080)) == ("a", ["holder"])


def test_room_nominated_for_a_higher_priority_project_is_not_taken() -> None:
    c = Cluster()
    c.node("a", cpu="2")
    c.node("b", cpu="2")
    c.run("a-low", "a", cpu="2", priority=0)
    c.run("b-low", "b", cpu="2", priority=1)
    c.state.nominate(Nominee("vip", 50, {"cpu": 2000}), "a")  # "a" is being freed for vip
    assert c.choose(preemptor("2")) == ("b", ["b-low"])


def brute_force(c: Cluster, info: ProjectInfo) -> tuple[tuple[object, ...], str] | None:
    """The least (victim_key, node) over every subset of every node's lower-priority evictable projects."""
    checks = checks_for(info)
    best: tuple[tuple[object, ...], str] | None = None
    for node_info in c.state.nodes():
        candidates = [x for x in c.bound.on(node_info.name) if x.evictable and x.priority < info.priority]
        for size in range(1, len(candidates) + 1):
            for victims in itertools.combinations(candidates, size):
                if passes(info, node_info, victims, CTX, checks):
                    found = (victim_key(victims), node_info.name)
                    best = found if best is None or found < best else best
    return best


@pytest.mark.parametrize("walk", [0, 2, victims_module.SINGLE_WALK])
@pytest.mark.parametrize("seed", range(40))
def test_victims_are_minimal_against_a_brute_force(seed: int, walk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the cluster-wide walk over single victims cut short (0, 2) or not, the choice is the brute force's."""
    monkeypatch.setattr(victims_module, "SINGLE_WALK", walk)
    rng = random.Random(seed)
    c = Cluster()
    for n in range(rng.randint(2, 5)):
        name = f"n{n}"
        cpu = rng.choice((2000, 3000, 4000))
        c.node(name, cpu=f"{cpu}m", memory="4Gi", unschedulable=rng.random() < 0.1)
        used = 0
        for i in range(rng.randint(0, 6)):
            want = rng.choice((100, 250, 500, 750, 1000, 1500))
            if used + want > cpu:
                continue
            used += want
            c.run(
                f"{name}-p{i}",
                name,
                cpu=f"{want}m",
                memory=f"{rng.choice((64, 256, 1024))}Mi",
                priority=rng.randint(0, 6),
                created=rng.uniform(0, 1000),
                port=rng.choice((0, 0, 0, 8080)),
            )
    info = preemptor(
        f"{rng.choice((500, 1000, 1500, 2000, 2500))}m",
        priority=rng.randint(2, 7),
        memory=f"{rng.choice((64, 512, 2048))}Mi",
        port=rng.choice((0, 0, 8080)),
    )
    choice = choose(info, c.state.nodes(), c.bound, CTX, checks_for(info))
    expected = brute_force(c, info)
    if expected is None:
        assert choice is None or not choice.node
        return

    assert choice is not None and choice.exact
    assert (victim_key(choice.victims), choice.node) == expected


def test_the_cluster_wide_order_of_single_victims_follows_every_change() -> None:
    c = Cluster()
    for n in ("a", "b"):
        c.node(n, cpu="8")
    rng = random.Random(3)
    projects = [
        c.run(f"p{i}", rng.choice(("a", "b")), cpu="100m", priority=rng.randint(0, 3), created=rng.uniform(0, 9))
        for i in range(12)
    ]

    def expected(below: int) -> list[str]:
        records = [r for n in ("a", "b") for r in c.bound.evictable_on(n) if r.priority < below]
        return [r.name for r in sorted(records, key=lambda r: (r.priority, -r.created, r.name))]

    assert [r.name for r in c.bound.lowest(99)] == expected(99)
    c.bound.mark_leaving("p3")
    record = c.bound.get("p5")
    assert record is not None
    c.bound.mark_leaving("p5")
    c.bound.unmark(record)
    c.bound.forget("p7")
    moved = projects[8]
    moved.status.node_ref = "b" if moved.status.node_ref == "a" else "a"
    c.bound.observe(moved)
    gone = projects[9]
    gone.status.phase = v1.PENDING
    c.bound.observe(gone)
    assert [r.name for r in c.bound.lowest(99)] == expected(99) and "p3" not in expected(99)
    assert [r.name for r in c.bound.lowest(2)] == expected(2)


def test_a_required_anti_affinity_is_resolved_by_evicting_the_project_it_refuses() -> None:
    # Room is plenty on both nodes; what keeps the preemptor out is its required anti-affinity against app=db, which
    # only evicting the db project can lift: the what-if view subtracts the victims from the topology index too.
    c = Cluster()
    c.node("a", cpu="4")
    c.node("b", cpu="4")
    for name, on in (("db-a", "a"), ("db-b", "b")):
        p = c.run(name, on, cpu="1", priority=0, created=10.0 if on == "a" else 20.0)
        p.metadata.labels["app"] = "db"
        c.state.observe_project(None, p)
        c.bound.observe(p)
    spec = project("urgent", requests={"cpu": "1", "memory": "64Mi"}, priority=10)
    term = spec.spec.affinity.project_anti_affinity.required.add(topology_key="caravanserai.io/hostname")
    term.label_selector.match_labels["app"] = "db"
    info = project_info(spec)
    live = FilterContext(now=NOW, topology=c.state.topology)
    assert all(any(check(info, n, live) is not None for check in checks_for(info)) for n in c.state.nodes()), (
        "the anti-affinity refuses both nodes while the db projects run"
    )
    choice = choose(info, c.state.nodes(), c.bound, live, checks_for(info))
    assert choice is not None and choice.node
    # The newest of the equal candidates goes: db-b, created last.
    assert (choice.node, [v.name for v in choice.victims]) == ("b", ["db-b"])


def test_past_the_budget_a_node_falls_back_to_the_reprieve(monkeypatch: pytest.MonkeyPatch) -> None:
    # 8 candidates of 250m on a full 2-cpu node, the preemptor needs 1 cpu: at least 4 victims, C(8, 4) = 70 sets.
    # With a budget of 10 sets the exact search gives up and the reprieve answers: every candidate evicted, then
    # each kept back (highest priority, oldest first) while the preemptor still fits.
    monkeypatch.setattr(victims_module, "MAX_SETS_PER_NODE", 10)
    c = Cluster()
    c.node("a", cpu="2")
    for i in range(8):
        c.run(f"p{i}", "a", cpu="250m", priority=i % 3, created=float(i))
    choice = choose(preemptor("1"), c.state.nodes(), c.bound, CTX, checks_for(preemptor("1")))
    assert choice is not None and choice.node == "a" and not choice.exact
    # Kept back in the order p2, p5 (priority 2), p1, p4 (priority 1, oldest first) while 4 victims still free
    # 1 cpu; p7 and the priority-0 ones cannot be spared after that.
    assert sorted(v.name for v in choice.victims) == ["p0", "p3", "p6", "p7"]
    assert all(v.priority <= 1 for v in choice.victims)
    # No victim can be spared: without any one of them the preemptor would not fit.
    for spared in choice.victims:
        rest = [v for v in choice.victims if v is not spared]
        assert not passes(preemptor("1"), c.state.node("a"), rest, CTX, checks_for(preemptor("1")))  # type: ignore[arg-type]  # node "a" exists


def test_whatif_checks_are_prepared_once_only_when_no_removal_can_change_a_rule() -> None:
    c = Cluster()
    c.node("a", cpu="4")
    db = c.run("db", "a", cpu="1")
    db.metadata.labels["app"] = "db"
    db.spec.affinity.project_anti_affinity.required.add(
        topology_key="caravanserai.io/hostname"
    ).label_selector.match_labels["app"] = "web"
    db.metadata.generation = 2  # the spec is read once per generation
    c.state.observe_project(None, db)
    c.bound.observe(db)
    live = FilterContext(now=NOW, topology=c.state.topology)
    plain = preemptor("1")
    assert whatif_checks(plain, FILTERS, live) == checks_for(plain, FILTERS, live)
    web = project("web", requests={"cpu": "1", "memory": "64Mi"}, priority=10, labels={"app": "web"})
    refused = project_info(web)  # db's anti-affinity matches it: evicting db changes the verdict
    assert whatif_checks(refused, FILTERS, live) == checks_for(refused, FILTERS)
    choice = choose(refused, c.state.nodes(), c.bound, live, whatif_checks(refused, FILTERS, live))
    assert choice is not None and [v.name for v in choice.victims] == ["db"]
