"""Cohort arithmetic: what fits (own borrowing limit, the cohort's total), the weighted dominant resource share, and
the fewest lower-priority borrowed projects to reclaim."""

from __future__ import annotations

import math

import pytest

from caravanserai import v1
from caravanserai.project import cohorts
from caravanserai.project.cohorts import Candidate, Member


def m(namespace: str, hard: int, used: int, *, limit: int | None = None, weight: float = 1.0) -> Member:
    """A member limiting cpu (millicores) only."""
    borrowing = {} if limit is None else {"cpu": limit}
    return Member(f"{namespace}/q", namespace, {"cpu": hard}, {"cpu": used}, borrowing, weight)


def test_growth_fits_within_the_cohort_and_the_borrowing_limit() -> None:
    a, b = m("a", 4000, 4000, limit=2000), m("b", 4000, 1000)
    assert cohorts.shortfall(a, [a, b], {"cpu": 2000}, "research") == []  # borrows 2 of b's 3 unused
    assert cohorts.shortfall(a, [a, b], {"cpu": 2500}, "research") == ["4 of 4 cpu used (may borrow 2), asks 2500m"]
    unlimited = m("a", 4000, 4000)  # no borrowing limit: up to what the cohort has free
    assert cohorts.shortfall(unlimited, [unlimited, b], {"cpu": 3000}, "research") == []
    assert cohorts.shortfall(unlimited, [unlimited, b], {"cpu": 3001}, "research") == [
        "cohort research: 5 of 8 cpu used, asks 3001m"
    ]
    assert cohorts.shortfall(a, [a, b], {"cpu": -1000, "memory": 5}, "research") == []  # only growth counts


def test_a_lender_within_its_own_hard_limit_still_waits_when_others_borrowed_its_share() -> None:
    lender, borrower = m("a", 4000, 0), m("b", 4000, 8000)
    assert cohorts.shortfall(lender, [lender, borrower], {"cpu": 1000}, "c") == ["cohort c: 8 of 8 cpu used, asks 1"]
    assert cohorts.fits_nominal(lender, {"cpu": 1000}) and not cohorts.fits_nominal(borrower, {"cpu": 1})


def test_member_reads_a_quota_and_its_weight() -> None:
    q = v1.ResourceQuota(metadata=v1.ObjectMeta(name="team", namespace="a"))
    q.spec.hard.update({"cpu": "4", "memory": "1Gi"})
    q.spec.borrowing_limit["cpu"] = "500m"
    q.spec.weight = "2.5"
    q.status.used.update({"cpu": "4500m", "projects": "3"})
    member = cohorts.member(q)
    assert (member.key, member.hard, member.used) == ("a/team", {"cpu": 4000, "memory": 1 << 30}, {"cpu": 4500})
    assert (member.borrowing_limit, member.weight, cohorts.borrowed(member)) == ({"cpu": 500}, 2.5, {"cpu": 500})
    assert cohorts.member(q, {"cpu": 1}).used == {"cpu": 1}
    assert cohorts.parse_weight("") == 1.0
    for bad in ("-1", "nan", "inf", "heavy"):
        with pytest.raises(ValueError, match="must be"):
            cohorts.parse_weight(bad)


def test_share_is_the_dominant_borrowed_fraction_divided_by_the_weight() -> None:
    a = Member("a/q", "a", {"cpu": 4000, "memory": 100}, {"cpu": 5000, "memory": 150}, {}, 1.0)
    b = Member("b/q", "b", {"cpu": 4000, "memory": 100}, {"cpu": 0, "memory": 0}, {}, 2.0)
    assert cohorts.share(a, [a, b]) == pytest.approx(0.25)  # memory: 50 of 200 beats cpu: 1 of 8
    assert cohorts.share(b, [a, b]) == 0.0
    assert cohorts.share(b, [a, b], {"cpu": 6000}) == pytest.approx(2000 / 8000 / 2.0)  # weight 2 halves it
    zero = Member("z/q", "z", {"cpu": 1000}, {"cpu": 1500}, {}, 0.0)
    assert cohorts.share(zero, [zero, b]) == math.inf


def _c(key: str, namespace: str, priority: int, created: float, cpu: int) -> Candidate:
    return Candidate(key, namespace, priority, created, {"cpu": cpu})


def test_victims_are_the_fewest_lowest_priority_newest_borrowed_projects() -> None:
    lender, borrower = m("a", 4000, 0), m("b", 4000, 8000)
    running = [
        _c("b/old", "b", 0, 1.0, 2000),
        _c("b/new", "b", 0, 2.0, 2000),
        _c("b/important", "b", 5, 3.0, 2000),
        _c("b/big", "b", 1, 4.0, 4000),
    ]
    taken = cohorts.victims(lender, 3, {"cpu": 2000}, [lender, borrower], running)
    assert [c.key for c in taken or []] == ["b/new"]  # lowest priority, newest first; one is enough
    taken = cohorts.victims(lender, 3, {"cpu": 4000}, [lender, borrower], running)
    assert sorted(c.key for c in taken or []) == ["b/new", "b/old"]
    # Without "old": "new" is taken first, then "big"; "big" alone is enough, so "new" is put back.
    taken = cohorts.victims(lender, 3, {"cpu": 4000}, [lender, borrower], running[1:])
    assert [c.key for c in taken or []] == ["b/big"]
    assert cohorts.victims(lender, 0, {"cpu": 2000}, [lender, borrower], running) is None  # nothing lower
    assert cohorts.victims(lender, 3, {"cpu": 5000}, [lender, borrower], running) is None  # would borrow itself


def test_victims_come_only_from_namespaces_that_borrow() -> None:
    a, b, c = m("a", 4000, 0), m("b", 4000, 4000), m("c", 4000, 8000)  # b is at its own share, c borrows 4
    running = [_c("b/x", "b", 0, 9.0, 4000), _c("c/y", "c", 0, 1.0, 4000)]
    taken = cohorts.victims(a, 1, {"cpu": 4000}, [a, b, c], running)
    assert [t.key for t in taken or []] == ["c/y"]
    assert cohorts.victims(a, 1, {"cpu": 1000}, [a, m("b", 4000, 1000)], []) == []  # room already
