"""The garbage collector's decision per project, as a table."""

from __future__ import annotations

import pytest

from caravanserai import meta, v1
from caravanserai.clock import timestamp
from caravanserai.controllers.gc.policy import GCConfig, Verdict, is_candidate, plan, terminated_at
from caravanserai.controllers.gc.policy import GCStep as Step
from caravanserai.testing.builders import project

T = 1_000_000.0
CONFIG = GCConfig(terminated_delay=5.0)


def make(phase: str, *, node: str = "n1", expire: float | None = None, finished: float | None = None) -> v1.Project:
    p = project("p")
    p.status.phase = phase
    p.status.node_ref = node if phase not in (v1.PENDING, v1.TERMINATED) else ""
    if expire is not None:
        p.spec.expire_at.CopyFrom(timestamp(expire))
    if finished is not None:
        meta.set_phase(p, phase, reason="Terminated", message="done", now=finished)
    return p


@pytest.mark.parametrize(
    ("proj", "node_exists", "step"),
    [
        (make(v1.TERMINATED, finished=T), True, Step(Verdict.DELETE_TERMINATED, T + 5)),
        (make(v1.TERMINATED, finished=T, expire=T - 100), True, Step(Verdict.DELETE_TERMINATED, T + 5)),
        (make(v1.RUNNING), True, Step(Verdict.KEEP)),
        (make(v1.RUNNING), False, Step(Verdict.UNBIND_ORPHAN)),
        (make(v1.SCHEDULED), False, Step(Verdict.UNBIND_ORPHAN)),
        (make(v1.TERMINATING), False, Step(Verdict.FINISH_ORPHAN)),
        (make(v1.FAILED), False, Step(Verdict.KEEP)),  # left for its owner
        (make(v1.PENDING), False, Step(Verdict.KEEP)),  # not bound: never an orphan
        (make(v1.RUNNING, expire=T + 60), True, Step(Verdict.EXPIRE, T + 60)),
        (make(v1.PENDING, expire=T - 1), True, Step(Verdict.EXPIRE, T - 1)),
        (make(v1.FAILED, expire=T), True, Step(Verdict.EXPIRE, T)),
        (make(v1.TERMINATING, expire=T - 1), True, Step(Verdict.KEEP)),  # already being deleted
        (make(v1.RUNNING, expire=T - 1), False, Step(Verdict.UNBIND_ORPHAN)),  # rescue first, expire next
    ],
)
def test_plan(proj: v1.Project, node_exists: bool, step: Step) -> None:
    assert plan(proj, node_exists=node_exists, config=CONFIG) == step


def test_terminated_at_falls_back_to_the_deletion_request() -> None:
    p = make(v1.TERMINATED)
    p.metadata.deletion_timestamp.CopyFrom(timestamp(T - 30))
    assert terminated_at(p) == T - 30
    assert terminated_at(make(v1.TERMINATED, finished=T)) == T


@pytest.mark.parametrize(
    ("proj", "node_known", "candidate"),
    [
        (make(v1.TERMINATED), True, True),
        (make(v1.RUNNING, expire=T), True, True),
        (make(v1.RUNNING), True, False),
        (make(v1.RUNNING), False, True),
        (make(v1.FAILED), False, False),
        (make(v1.PENDING), False, False),
    ],
)
def test_is_candidate(proj: v1.Project, node_known: bool, candidate: bool) -> None:
    assert is_candidate(proj, node_known=node_known) is candidate
