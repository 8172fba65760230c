"""`caractrl get quota`: each limit with its use, the cohort and what the namespace borrows from it."""

from __future__ import annotations

from caravanserai import v1
from caravanserai.cli.kinds.resourcequota import COLUMNS, quota_row
from caravanserai.cli.tables import RowContext


def test_a_quota_row_shows_its_cohort_and_what_it_borrows() -> None:
    q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace="team-a"))
    q.metadata.creation_timestamp.FromSeconds(100)
    q.spec.hard.update({"cpu": "4", "projects": "10"})
    q.spec.policy, q.spec.cohort = "Queue", "research"
    q.status.used.update({"cpu": "6", "projects": "3"})
    q.status.borrowed["cpu"] = "2"
    q.status.queued = 1
    row = dict(zip(COLUMNS, quota_row(q, RowContext(now=160.0), False), strict=True))
    assert row == {
        "NAME": "team",
        "POLICY": "Queue",
        "COHORT": "research",
        "USED": "cpu 6/4, projects 3/10",
        "BORROWED": "cpu 2",
        "QUEUED": "1",
        "AGE": "60s",
    }
    alone = v1.ResourceQuota(metadata=v1.ObjectMeta(name="solo"), spec=v1.ResourceQuotaSpec(hard={"cpu": "1"}))
    row = dict(zip(COLUMNS, quota_row(alone, RowContext(now=0.0), False), strict=True))
    assert (row["COHORT"], row["BORROWED"]) == ("<none>", "<none>")
