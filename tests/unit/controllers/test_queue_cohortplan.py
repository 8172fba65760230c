"""A cohort's pass as a plan: priority then age within a namespace, fair share between namespaces, reclaim of
lower-priority borrowed work, projects already being reclaimed counted as freed."""

from __future__ import annotations

from caravanserai import meta, v1
from caravanserai.controllers.queue.cohortplan import CohortPlan, Lane
from caravanserai.controllers.queue.reconciler import counted_use, queue_order
from caravanserai.project import lifecycle
from caravanserai.testing.builders import project


def quota(namespace: str, cpu: str, *, weight: str = "", cohort: str = "pool") -> v1.ResourceQuota:
    q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace=namespace))
    q.spec.hard["cpu"] = cpu
    q.spec.cohort = cohort
    q.spec.weight = weight
    return q


def proj(namespace: str, name: str, cpu: str, *, phase: str = v1.QUEUED, priority: int = 0, age: int = 0) -> v1.Project:
    p = project(name, requests={"cpu": cpu}, priority=priority, namespace=namespace)
    p.metadata.creation_timestamp.FromSeconds(1000 + age)
    meta.set_phase(p, phase, reason="Test", message="test", now=1.0)
    if phase not in lifecycle.UNBOUND:
        p.status.node_ref = "n1"
    return p


def lane(q: v1.ResourceQuota, projects: list[v1.Project]) -> Lane:
    admitted = [p for p in projects if p.status.phase != v1.QUEUED]
    return Lane(q.metadata.namespace, [q], counted_use(projects), queue_order(projects), admitted)


def admissions(plan: CohortPlan) -> list[str]:
    out = []
    while (p := plan.next_admission()) is not None:
        out.append(meta.key_of(p))
        plan.admitted(p)
    return out


def test_within_a_namespace_priority_then_age_and_smaller_work_passes_a_stuck_head() -> None:
    queued = [
        proj("a", "old", "1", age=1),
        proj("a", "new", "1", age=2),
        proj("a", "urgent", "3", priority=5, age=3),
        proj("a", "huge", "9", priority=9, age=0),
    ]
    busy = [proj("b", "busy", "1", phase=v1.RUNNING)]
    plan = CohortPlan("pool", [lane(quota("a", "4"), queued), lane(quota("b", "1"), busy)])
    assert admissions(plan) == ["a/urgent", "a/old"]  # 1 + 3 + 1 of 5; "huge" never fits, "new" no longer
    waiting = [(meta.key_of(p), missing) for p, missing in plan.lanes["a"].waiting]
    assert waiting == [
        ("a/huge", ["team: cohort pool: 1 of 5 cpu used, asks 9"]),
        ("a/new", ["team: cohort pool: 5 of 5 cpu used, asks 1"]),
    ]


def test_fair_share_admits_the_namespace_with_the_lower_weighted_share_first() -> None:
    a = [proj("a", f"a{i}", "1", age=i) for i in range(6)]
    b = [proj("b", f"b{i}", "1", age=10 + i) for i in range(6)]
    c = [proj("c", "c-running", "4", phase=v1.RUNNING)]  # c lends nothing, so a and b share 4 of theirs
    plan = CohortPlan(
        "pool", [lane(quota("a", "2"), a), lane(quota("b", "2", weight="3"), b), lane(quota("c", "4"), c)]
    )
    # Within their own quota (share 0) first, the older first; then the cohort is full.
    assert admissions(plan) == ["a/a0", "a/a1", "b/b0", "b/b1"]
    # c idle lends 4: shares after admission a: 1/8, 2/8; b (weight 3): 1/24, 2/24, 3/24 (= a's 1/8: the older
    # wins); so b borrows 3 of the 4.
    idle = CohortPlan(
        "pool", [lane(quota("a", "2"), a), lane(quota("b", "2", weight="3"), b), lane(quota("c", "4"), [])]
    )
    assert admissions(idle) == ["a/a0", "a/a1", "b/b0", "b/b1", "b/b2", "b/b3", "a/a2", "b/b4"]


def test_reclaim_picks_lower_priority_borrowed_work_for_a_lender_within_its_share() -> None:
    borrower = [
        proj("b", "own", "4", phase=v1.RUNNING, age=1),
        proj("b", "borrowed-old", "2", phase=v1.RUNNING, age=2),
        proj("b", "borrowed-new", "2", phase=v1.RUNNING, age=3),
    ]
    lender = [proj("a", "mine", "2", priority=1, age=9)]
    plan = CohortPlan("pool", [lane(quota("a", "4"), lender), lane(quota("b", "4"), borrower)])
    assert admissions(plan) == []
    [(preemptor, victims)] = plan.reclaims()
    assert meta.key_of(preemptor) == "a/mine" and [meta.key_of(v) for v in victims] == ["b/borrowed-new"]
    # Once it is on its way (a move asked for its final backups), it counts as freed: no second victim.
    moving = lifecycle.reclaim(_with_volume(borrower[2]), preemptor="a/mine", message="m", now=2.0, deadline=9.0)
    again = CohortPlan("pool", [lane(quota("a", "4"), lender), lane(quota("b", "4"), [*borrower[:2], moving])])
    assert admissions(again) == []  # it still holds its quota until its node has queued it
    assert again.reclaims() == []


def test_no_reclaim_for_equal_priority_or_for_a_lender_that_would_borrow_itself() -> None:
    borrower = [proj("b", n, "4", phase=v1.RUNNING, priority=1) for n in ("own", "extra")]
    plan = CohortPlan(
        "pool", [lane(quota("a", "4"), [proj("a", "same", "2", priority=1)]), lane(quota("b", "4"), borrower)]
    )
    assert admissions(plan) == [] and plan.reclaims() == []
    plan = CohortPlan(
        "pool", [lane(quota("a", "4"), [proj("a", "big", "5", priority=9)]), lane(quota("b", "4"), borrower)]
    )
    assert admissions(plan) == [] and plan.reclaims() == []


def _with_volume(p: v1.Project) -> v1.Project:
    out = meta.copy(p)
    out.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT).backup.repository = "repo"
    return out
