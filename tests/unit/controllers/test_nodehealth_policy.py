"""Node health decisions and statuses, as tables."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.clock import seconds, timestamp
from caravanserai.controllers.nodehealth import conditions
from caravanserai.controllers.nodehealth.policy import (
    HealthAction as Action,
)
from caravanserai.controllers.nodehealth.policy import (
    HealthConfig,
    braked,
    heartbeat_deadline,
    is_ready,
    outage_start,
    plan_project,
    unhealthy_fraction,
)
from caravanserai.controllers.nodehealth.policy import (
    HealthStep as Step,
)
from caravanserai.testing.builders import lease, node, project

CONFIG = HealthConfig(heartbeat_timeout=90, grace_period=180, terminating_timeout=600)
T = 1_000_000.0


def make_node(created: float = T - 1000) -> v1.Node:
    n = node("n1")
    n.metadata.creation_timestamp.CopyFrom(timestamp(created))
    return n


def make_lease(renewed: float | None) -> v1.Lease:
    ls = lease("n1")
    if renewed is not None:
        ls.spec.renew_time.CopyFrom(timestamp(renewed))
    return ls


@pytest.mark.parametrize(
    ("renewed", "has_lease", "now", "ready"),
    [
        (T, True, T + 10, True),
        (T, True, T + 89.99, True),
        (T, True, T + 90, False),  # at the deadline, never before
        (T, True, T + 500, False),
        (None, True, T - 1000 + 89, True),  # a Lease never renewed: counted from the node's creation
        (None, False, T - 1000 + 89, True),  # no Lease yet: one timeout from creation for the first heartbeat
        (None, False, T - 1000 + 91, False),
    ],
)
def test_readiness_is_the_lease_age(renewed: float | None, has_lease: bool, now: float, ready: bool) -> None:
    deadline = heartbeat_deadline(make_node(), make_lease(renewed) if has_lease else None, CONFIG)
    assert is_ready(deadline, now) is ready


def not_ready_node(since: float | None) -> v1.Node:
    n = make_node()
    if since is not None:
        n.status.state = v1.NODE_NOT_READY
        meta.set_condition(n.status.conditions, v1.CONDITION_READY, v1.FALSE, reason="HeartbeatTimeout", now=since)
    return n


@pytest.mark.parametrize(("since", "expected"), [(None, T + 5), (T - 30, T - 30)])
def test_outage_start(since: float | None, expected: float) -> None:
    assert outage_start(not_ready_node(since), T + 5) == expected


def on_node(phase: str, *, stamp: float | None = None, deleted: float | None = None) -> v1.Project:
    p = project("p")
    p.status.phase = phase
    p.status.node_ref = "n1" if phase != v1.PENDING else ""
    if stamp is not None:
        meta.set_condition(p.status.conditions, v1.CONDITION_NOT_READY_AT, v1.TRUE, reason="NodeNotReady", now=stamp)
    if deleted is not None:
        p.metadata.deletion_timestamp.CopyFrom(timestamp(deleted))
    return p


OUTAGE = T


@pytest.mark.parametrize(
    ("proj", "node_ready", "step"),
    [
        (on_node(v1.SCHEDULED), False, Step(Action.TO_PENDING, OUTAGE)),  # at once
        (on_node(v1.RUNNING), False, Step(Action.STAMP_NOT_READY_AT, OUTAGE)),
        (on_node(v1.RUNNING, stamp=OUTAGE), False, Step(Action.TO_PENDING, OUTAGE + 180)),  # after the grace
        (on_node(v1.RUNNING, stamp=OUTAGE + 3), False, Step(Action.TO_PENDING, OUTAGE + 183)),
        (on_node(v1.RUNNING, stamp=OUTAGE - 3600), False, Step(Action.STAMP_NOT_READY_AT, OUTAGE)),  # stale stamp
        (on_node(v1.TERMINATING, deleted=OUTAGE - 50), False, Step(Action.FORCE_TERMINATED, OUTAGE + 600)),
        (on_node(v1.TERMINATING, deleted=OUTAGE + 50), False, Step(Action.FORCE_TERMINATED, OUTAGE + 650)),
        (on_node(v1.FAILED), False, Step(Action.NONE)),  # never rescheduled automatically
        (on_node(v1.FAILED, stamp=OUTAGE), False, Step(Action.NONE)),
        (on_node(v1.TERMINATED), False, Step(Action.NONE)),
        (on_node(v1.PENDING), False, Step(Action.NONE)),
        (on_node(v1.RUNNING), True, Step(Action.NONE)),
        (on_node(v1.RUNNING, stamp=OUTAGE), True, Step(Action.CLEAR_NOT_READY_AT)),  # the node came back first
        (on_node(v1.SCHEDULED), True, Step(Action.NONE)),
    ],
)
def test_plan_project(proj: v1.Project, node_ready: bool, step: Step) -> None:
    assert plan_project(proj, node_ready=node_ready, outage=OUTAGE, config=CONFIG) == step


def tolerating(seconds_: int | None, stamp: float | None = None) -> v1.Project:
    p = on_node(v1.RUNNING, stamp=stamp)
    t = p.spec.tolerations.add(key="node.caravanserai.io/not-ready", operator="Exists", effect="NoExecute")
    if seconds_ is not None:
        t.toleration_seconds = seconds_
    return p


@pytest.mark.parametrize(
    ("proj", "step"),
    [
        (tolerating(2), Step(Action.STAMP_NOT_READY_AT, OUTAGE)),
        (tolerating(2, stamp=OUTAGE), Step(Action.TO_PENDING, OUTAGE + 2)),  # its own grace, not 180 s
        (tolerating(600, stamp=OUTAGE), Step(Action.TO_PENDING, OUTAGE + 600)),  # longer is allowed too
        (tolerating(None, stamp=OUTAGE), Step(Action.NONE)),  # tolerated forever: stays
    ],
)
def test_a_toleration_of_the_not_ready_taint_sets_the_projects_grace(proj: v1.Project, step: Step) -> None:
    assert plan_project(proj, node_ready=False, outage=OUTAGE, config=CONFIG) == step


@pytest.mark.parametrize(
    ("deadlines", "fraction", "stop"),
    [
        ([], 0.0, False),
        ([T + 1], 0.0, False),
        ([T - 1], 1.0, True),  # a single silent node is a total outage: held
        ([T - 1, T + 1], 0.5, False),
        ([T - 1, T - 1, T + 1, T + 1, T + 1], 0.4, False),
        ([T - 1, T - 1, T - 1, T + 1, T + 1], 0.6, True),
        ([T - 1] * 11 + [T + 1] * 9, 0.55, False),  # exactly 55 %: not more than the threshold
        ([T - 1] * 56 + [T + 1] * 44, 0.56, True),
        ([T, T + 1], 0.5, False),  # at its deadline a node counts as NotReady
    ],
)
def test_unhealthy_fraction_and_brake(deadlines: list[float], fraction: float, stop: bool) -> None:
    measured = unhealthy_fraction(deadlines, T)
    assert measured == pytest.approx(fraction)
    assert braked(measured, CONFIG) is stop


def test_node_marked_not_ready_then_ready_again() -> None:
    n = make_node()
    n.status.state = v1.NODE_READY
    meta.set_condition(n.status.conditions, v1.CONDITION_READY, v1.TRUE, reason="AgentReady", now=T - 100)
    assert conditions.node_marked(n, ready=True, now=T, heartbeat_timeout=90) is None
    down = conditions.node_marked(n, ready=False, now=T, heartbeat_timeout=90)
    assert down is not None and down.status.state == v1.NODE_NOT_READY
    cond = meta.get_condition(down.status.conditions, v1.CONDITION_READY)
    assert cond is not None and (cond.status, cond.reason) == (v1.FALSE, "HeartbeatTimeout")
    assert cond.message == "No heartbeat (Lease renewal) for 90s" and seconds(cond.last_transition_time) == T
    assert n.status.state == v1.NODE_READY  # the cached object is untouched
    assert conditions.node_marked(down, ready=False, now=T + 5, heartbeat_timeout=90) is None
    up = conditions.node_marked(down, ready=True, now=T + 9, heartbeat_timeout=90)
    assert up is not None and up.status.state == v1.NODE_READY
    cond = meta.get_condition(up.status.conditions, v1.CONDITION_READY)
    assert cond is not None and (cond.status, cond.reason) == (v1.TRUE, "HeartbeatResumed")


def test_a_node_never_marked_down_becomes_ready_as_agent_ready() -> None:
    n = make_node()
    n.status.state = v1.NODE_NOT_READY  # as the apiserver creates nodes
    up = conditions.node_marked(n, ready=True, now=T, heartbeat_timeout=90)
    assert up is not None
    cond = meta.get_condition(up.status.conditions, v1.CONDITION_READY)
    assert cond is not None and cond.reason == "AgentReady"


def test_project_statuses() -> None:
    running = on_node(v1.RUNNING)
    stamped = conditions.project_stamped(running, node="n1", outage=T - 7, grace_period=180)
    cond = meta.get_condition(stamped.status.conditions, v1.CONDITION_NOT_READY_AT)
    assert cond is not None and (cond.status, cond.reason) == (v1.TRUE, "NodeNotReady")
    assert seconds(cond.last_transition_time) == T - 7  # the start of the grace clock
    restamped = conditions.project_stamped(stamped, node="n1", outage=T + 500, grace_period=180)
    cond = meta.get_condition(restamped.status.conditions, v1.CONDITION_NOT_READY_AT)
    assert cond is not None and seconds(cond.last_transition_time) == T + 500
    assert conditions.project_cleared(running) is None
    cleared = conditions.project_cleared(stamped)
    assert cleared is not None and meta.get_condition(cleared.status.conditions, v1.CONDITION_NOT_READY_AT) is None

    evicted = conditions.project_evicted(stamped, node="n1", now=T)
    assert (evicted.status.phase, evicted.status.node_ref) == (v1.PENDING, "")
    assert meta.get_condition(evicted.status.conditions, v1.CONDITION_NOT_READY_AT) is None
    phase = meta.get_condition(evicted.status.conditions, v1.CONDITION_PHASE)
    assert phase is not None and phase.reason == "NodeNotReady"

    terminating = on_node(v1.TERMINATING, deleted=T)
    done = conditions.project_terminated(terminating, node="n1", now=T + 600, terminating_timeout=600)
    phase = meta.get_condition(done.status.conditions, v1.CONDITION_PHASE)
    assert done.status.phase == v1.TERMINATED and phase is not None and phase.reason == "TerminationTimeout"
