"""Preemption and disruption budgets: replicas whose eviction would break their ProjectSet's budget are no
candidates (`preemption/budgets.py`), so `choose` prefers other victims."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.controllers.scheduler.preemption.budgets import Budgets
from caravanserai.controllers.scheduler.preemption.index import BoundProjects
from caravanserai.informer.indexer import Indexer
from caravanserai.project.replicas import SET_INDEX, set_index
from caravanserai.testing.clock import FakeClock

NOW = 1000.0


def replica(name: str, node: str, owner: str = "web") -> v1.Project:
    p = v1.Project()
    p.metadata.name = name
    p.metadata.creation_timestamp.CopyFrom(timestamp(1.0))
    p.metadata.owner_references.add(api_version=v1.API_VERSION, kind="ProjectSet", name=owner, uid="u", controller=True)
    p.spec.services.add(name="main", image="x")
    p.status.phase, p.status.node_ref = v1.RUNNING, node
    p.status.services.add(name="main", ready=True)
    meta.set_condition(p.status.conditions, v1.CONDITION_READY, v1.TRUE, now=1.0)
    return p


def budgeted(name: str, replicas: int, max_unavailable: str) -> v1.ProjectSet:
    s = v1.ProjectSet()
    s.metadata.name = name
    s.spec.replicas = replicas
    s.spec.disruption_budget.max_unavailable = max_unavailable
    return s


def guard(projects: list[v1.Project], sets: list[v1.ProjectSet]) -> frozenset[str]:
    project_cache: Indexer[v1.Project] = Indexer({SET_INDEX: set_index})
    set_cache: Indexer[v1.ProjectSet] = Indexer()
    bound = BoundProjects()
    for p in projects:
        project_cache.upsert(p.metadata.name, p)
        bound.observe(p)
    for s in sets:
        set_cache.upsert(s.metadata.name, s)
    return Budgets(set_cache, project_cache, clock=FakeClock(start=NOW)).guard(bound).protected


def test_replicas_are_protected_when_their_budget_has_no_room_on_the_node() -> None:
    projects = [replica("web-a", "n1"), replica("web-b", "n1"), replica("web-c", "n2"), replica("api-a", "n1", "api")]
    # 3 available, maxUnavailable 1: one disruption allowed, but two replicas on n1 → both protected there
    assert guard(projects, [budgeted("web", 3, "1")]) == {"web-a", "web-b"}
    # maxUnavailable 2: two allowed, two on n1 → none protected; api has no budget
    assert guard(projects, [budgeted("web", 3, "2")]) == frozenset()
    assert guard(projects, []) == frozenset()
    # one replica already down: none may go
    sick = replica("web-c", "n2")
    sick.status.phase = v1.SCHEDULED
    assert guard([*projects[:2], sick], [budgeted("web", 3, "1")]) == {"web-a", "web-b"}  # web-c costs nothing
