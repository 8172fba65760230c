"""Counts and percentages as Kubernetes rounds them, template hashes, availability on an injected clock, and the
disruption budget rule (`caravanserai.project.replicas`, `caravanserai.project.disruption`)."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.project import disruption, replicas


@pytest.mark.parametrize(
    ("text", "total", "up", "expected"),
    [
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("25%", 4, True, 1),
        ("25%", 3, False, 0),
        ("100%", 7, False, 7),
        ("2", 10, True, 2),
        ("0", 10, False, 0),
        ("", 10, True, 0),
        ("1%", 1, True, 1),
    ],
)
def test_scaled_rounds_like_kubernetes(text: str, total: int, up: bool, expected: int) -> None:
    assert replicas.scaled(text, total, round_up=up) == expected


@pytest.mark.parametrize(
    ("surge", "unavailable", "count", "expected"),
    [
        ("", "", 10, (3, 2)),  # the defaults: 25% up, 25% down
        ("2", "0", 10, (2, 0)),
        ("0", "0%", 3, (0, 1)),  # both zero: one may be unavailable
        ("0%", "25%", 3, (0, 1)),  # 0 surge, 0.75 → 0 unavailable → 1
        ("50%", "50%", 5, (3, 2)),
    ],
)
def test_rolling_bounds(surge: str, unavailable: str, count: int, expected: tuple[int, int]) -> None:
    spec = v1.ProjectSetSpec(replicas=count)
    spec.strategy.rolling_update.max_surge = surge
    spec.strategy.rolling_update.max_unavailable = unavailable
    bounds = replicas.rolling_bounds(spec)
    assert (bounds.surge, bounds.unavailable) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [("3", None), ("25%", None), ("101%", "exceed"), ("-1", "count"), ("1.5", "count"), ("07", "count")],
)
def test_count_problem(text: str, problem: str | None) -> None:
    found = replicas.count_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found)


def _template(image: str, labels: dict[str, str]) -> v1.ProjectTemplate:
    template = v1.ProjectTemplate()
    for key, value in labels.items():
        template.labels[key] = value
    template.spec.services.add(name="main", image=image)
    return template


def test_template_hash_is_stable_and_changes_with_the_template() -> None:
    a = _template("web:1", {"app": "web", "tier": "front"})
    b = _template("web:1", {"tier": "front", "app": "web"})  # map order does not count
    assert replicas.template_hash(a) == replicas.template_hash(b)
    assert len(replicas.template_hash(a)) == 10
    assert replicas.template_hash(a) != replicas.template_hash(_template("web:2", {"app": "web", "tier": "front"}))


def replica(
    name: str = "web-1", *, ready_at: float | None = 100.0, phase: str = v1.RUNNING, owner: str = "web"
) -> v1.Project:
    p = v1.Project()
    p.metadata.name = name
    p.metadata.owner_references.add(api_version=v1.API_VERSION, kind="ProjectSet", name=owner, uid="u", controller=True)
    p.spec.services.add(name="main", image="x")
    p.status.phase = phase
    p.status.services.add(name="main", ready=ready_at is not None)
    if ready_at is not None:
        meta.set_condition(p.status.conditions, v1.CONDITION_READY, v1.TRUE, now=ready_at)
    return p


def test_availability_waits_for_min_ready_seconds_on_the_injected_clock() -> None:
    p = replica(ready_at=100.0)
    assert replicas.availability(p, min_ready_seconds=10, now=104.0) == replicas.Availability(False, 6.0)
    assert replicas.availability(p, min_ready_seconds=10, now=110.0).available
    assert replicas.availability(p, min_ready_seconds=0, now=100.0).available
    assert not replicas.availability(replica(ready_at=None), min_ready_seconds=0, now=200.0).available
    assert not replicas.availability(replica(phase=v1.SCHEDULED), min_ready_seconds=0, now=200.0).available
    gone = replica()
    gone.metadata.deletion_timestamp.CopyFrom(timestamp(150.0))
    assert not replicas.is_ready(gone)


def _set(budget: v1.DisruptionBudget | None, count: int = 4) -> v1.ProjectSet:
    s = v1.ProjectSet()
    s.metadata.name = "web"
    s.spec.replicas = count
    if budget is not None:
        s.spec.disruption_budget.CopyFrom(budget)
    return s


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (None, None),
        (v1.DisruptionBudget(min_available="3"), 3),
        (v1.DisruptionBudget(min_available="50%"), 2),
        (v1.DisruptionBudget(max_unavailable="1"), 3),
        (v1.DisruptionBudget(max_unavailable="30%"), 2),  # 1.2 rounds up to 2 unavailable
    ],
)
def test_minimum_available(budget: v1.DisruptionBudget | None, expected: int | None) -> None:
    assert disruption.minimum_available(_set(budget).spec) == expected


def test_may_disrupt_keeps_the_budget_counting_replicas_already_disrupted() -> None:
    sets = {"web": _set(v1.DisruptionBudget(max_unavailable="1"))}
    projects = [replica(f"web-{i}") for i in range(4)] + [replica("web-sick", ready_at=None)]
    assert disruption.disruptions_allowed(sets["web"], projects, now=200.0) == 1
    assert disruption.may_disrupt(projects[0], sets=sets, projects=projects, now=200.0).allowed
    refused = disruption.may_disrupt(projects[0], sets=sets, projects=projects, now=200.0, disrupting=["web-1"])
    assert not refused.allowed and "budget keeps 3" in refused.reason
    assert disruption.may_disrupt(projects[4], sets=sets, projects=projects, now=200.0, disrupting=["web-1"]).allowed
    other = replica("api-0", owner="api")
    assert disruption.may_disrupt(other, sets=sets, projects=projects, now=200.0, disrupting=["web-1"]).allowed
    assert disruption.may_disrupt(projects[0], sets={"web": _set(None)}, projects=projects, now=200.0).allowed
