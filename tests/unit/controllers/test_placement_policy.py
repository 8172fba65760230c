"""Placement upkeep decisions as a table: what happens to one project on its node, and when."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.controllers.placement.policy import CONDITION_TAINTED_AT, plan
from caravanserai.controllers.placement.policy import PlacementAction as Action
from caravanserai.project import lifecycle
from caravanserai.testing.builders import node as make_node
from caravanserai.testing.builders import node_status, project

NOW = 1000.0


def bound(phase: str = v1.RUNNING, *, generation: int = 1, scheduled: int = 1, observed: int = 1) -> v1.Project:
    p = project("p", requests={"cpu": "1"})
    p.metadata.generation = generation
    meta.set_phase(p, phase, reason="R", message="m", now=NOW - 100)
    p.status.node_ref = "n1"
    p.status.scheduled_generation = scheduled
    p.status.observed_generation = observed
    return p


def node(*taints: tuple[str, str], labels: dict[str, str] | None = None, cpu: str = "4") -> v1.Node:
    n = node_status(make_node("n1", labels=labels), cpu=cpu)
    for key, effect in taints:
        n.spec.taints.add(key=key, effect=effect)
    return n


def tolerate(p: v1.Project, key: str, seconds: int | None = None) -> v1.Project:
    t = p.spec.tolerations.add(key=key, operator="Exists", effect="NoExecute")
    if seconds is not None:
        t.toleration_seconds = seconds
    return p


@pytest.mark.parametrize(
    ("proj", "n", "action", "due", "reason"),
    [
        (bound(), node(), Action.NONE, None, ""),
        (bound(v1.FAILED, generation=2, observed=1), node(), Action.TO_PENDING, NOW, lifecycle.REASON_SPEC_CHANGED),
        (bound(v1.SUCCEEDED, generation=2, observed=1), node(), Action.TO_PENDING, NOW, lifecycle.REASON_SPEC_CHANGED),
        (bound(v1.FAILED, generation=2, observed=2), node(), Action.NONE, None, ""),
        (bound(v1.FAILED, generation=1, observed=0), node(), Action.NONE, None, ""),
        (bound(), node(("maint", "NoExecute")), Action.TO_PENDING, NOW, lifecycle.REASON_TAINT_EVICTION),
        (bound(v1.SCHEDULED), node(("maint", "NoExecute")), Action.TO_PENDING, NOW, lifecycle.REASON_TAINT_EVICTION),
        (bound(), node(("maint", "NoSchedule")), Action.NONE, None, ""),
        (tolerate(bound(), "maint"), node(("maint", "NoExecute")), Action.NONE, None, ""),
        (
            tolerate(bound(), "maint", 30),
            node(("maint", "NoExecute")),
            Action.STAMP_TAINTED,
            NOW,
            lifecycle.REASON_TAINT_EVICTION,
        ),
        (
            tolerate(bound(), "other", 30),
            node(("maint", "NoExecute")),
            Action.TO_PENDING,
            NOW,
            lifecycle.REASON_TAINT_EVICTION,
        ),
        (bound(v1.FAILED), node(("maint", "NoExecute")), Action.NONE, None, ""),
        (bound(generation=2, scheduled=1), node(), Action.CONFIRM, NOW, ""),
        (
            bound(generation=2, scheduled=1),
            node(cpu="500m"),
            Action.TO_PENDING,
            NOW,
            lifecycle.REASON_NODE_NO_LONGER_ELIGIBLE,
        ),
        (bound(generation=1, scheduled=1), node(cpu="500m"), Action.NONE, None, ""),
        (
            bound(generation=2, scheduled=1),
            node(("gpu", "NoSchedule")),
            Action.TO_PENDING,
            NOW,
            lifecycle.REASON_NODE_NO_LONGER_ELIGIBLE,
        ),
    ],
)
def test_plan(proj: v1.Project, n: v1.Node, action: Action, due: float | None, reason: str) -> None:
    step = plan(proj, n, others_requested={}, now=NOW)
    assert step.action is action
    if due is not None:
        assert (step.due, step.reason) == (due, reason)
    assert step.handoff == (reason == lifecycle.REASON_TAINT_EVICTION and action is Action.TO_PENDING)


def test_node_selector_change_makes_the_node_ineligible_and_others_count_against_resources() -> None:
    p = bound(generation=2, scheduled=1)
    p.spec.node_selector["zone"] = "b"
    assert plan(p, node(labels={"zone": "a"}), others_requested={}, now=NOW).action is Action.TO_PENDING
    p.spec.node_selector["zone"] = "a"
    assert plan(p, node(labels={"zone": "a"}), others_requested={}, now=NOW).action is Action.CONFIRM
    full = plan(p, node(labels={"zone": "a"}), others_requested={"cpu": 3500}, now=NOW)
    assert (full.action, full.reason) == (Action.TO_PENDING, lifecycle.REASON_NODE_NO_LONGER_ELIGIBLE)


def test_a_host_path_the_node_does_not_allow_makes_it_ineligible() -> None:
    p = bound(generation=2, scheduled=1)
    p.spec.volumes.add(name="site", type=v1.VOLUME_HOST_PATH, host_path="/etc/site")
    n = node()
    assert plan(p, n, others_requested={}, now=NOW).action is Action.CONFIRM  # no allow-list: any path
    n.status.allowed_host_paths.append("/srv")
    moved = plan(p, n, others_requested={}, now=NOW)
    assert (moved.action, moved.reason) == (Action.TO_PENDING, lifecycle.REASON_NODE_NO_LONGER_ELIGIBLE)
    assert "didn't allow host path /etc/site" in moved.message


def test_a_stamped_taint_is_due_after_its_toleration_seconds_and_cleared_when_gone() -> None:
    p = tolerate(bound(), "maint", 30)
    meta.set_condition(p.status.conditions, CONDITION_TAINTED_AT, v1.TRUE, reason="TaintEviction", now=NOW - 10)
    step = plan(p, node(("maint", "NoExecute")), others_requested={}, now=NOW)
    assert (step.action, step.due, step.handoff) == (Action.TO_PENDING, NOW + 20, True)
    assert plan(p, node(), others_requested={}, now=NOW).action is Action.CLEAR_TAINTED


def test_a_project_being_deleted_is_never_moved() -> None:
    p = bound(v1.FAILED, generation=2, observed=1)
    p.metadata.deletion_timestamp.FromSeconds(int(NOW))
    assert plan(p, node(("maint", "NoExecute")), others_requested={}, now=NOW).action is Action.NONE
