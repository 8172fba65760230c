"""Cohorts of quotas: borrowing, fair sharing and reclaim, as arithmetic (Kueue's model, simplified). One reading for
the apiserver (which judges every admission against the quotas as stored) and the queue controller (which picks who
is admitted next and what to reclaim).

* **A member** is a ResourceQuota naming a cohort (`spec.cohort`): its namespace's use (`used`), its nominal
  limits (`hard`), how far beyond them it may borrow (`borrowing_limit`; a resource it does not name: no limit,
  as in Kueue) and its fair-sharing weight.
* **Fits** when, for every resource the member limits that a write grows: the namespace stays within
  hard + borrowing limit, and the cohort's total use stays within the sum of its members' hard limits. Only
  growth is judged (`quota.shortfall`'s rule).
* **Borrowed** is use beyond `hard`, per resource (never negative).
* **Share** (dominant resource share, weighted): the largest, over the member's resources, of what it borrows as
  a fraction of the cohort's total hard limit of that resource, divided by its weight. Lower goes first; a weight
  of 0 makes any borrowing infinitely expensive (it borrows only when no one else can be admitted).
* **Reclaim** (Kueue's reclaimWithinCohort with LowerPriority): a waiting project that fits its own namespace's
  hard limits but not the cohort (others borrowed what it lent) may evict projects of lower priority of members
  that borrow, lowest priority and newest first, as few as needed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from caravanserai import v1
from caravanserai.project import quota
from caravanserai.project.quota import Amounts

COHORT_KEY_PREFIX = "cohort/"
"""Work-queue keys of the queue controller: "cohort/<name>" for a cohort, the namespace for one without."""


def cohort_key(cohort: str) -> str:
    return COHORT_KEY_PREFIX + cohort


def parse_weight(text: str) -> float:
    """A quota's fair-sharing weight ("" → 1). ValueError for an unparsable, negative or infinite one."""
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number such as 1 or 2.5, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a finite number ≥ 0, not {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Member:
    """One quota of a cohort, as arithmetic (module docstring)."""

    key: str
    namespace: str
    hard: Amounts
    used: Amounts
    borrowing_limit: Amounts = field(default_factory=dict)
    weight: float = 1.0

    def with_used(self, used: Mapping[str, int]) -> Member:
        """The same member with the namespace's use `used` (only the names it limits are kept)."""
        kept = {name: value for name, value in used.items() if name in self.hard}
        return Member(self.key, self.namespace, self.hard, kept, self.borrowing_limit, self.weight)


def member(q: v1.ResourceQuota, used: Mapping[str, int] | None = None) -> Member:
    """`q` as a member, its use read from `status.used` unless `used` (the namespace's counted use) is given."""
    hard = quota.parse(dict(q.spec.hard))
    try:
        weight = parse_weight(q.spec.weight)
    except ValueError:
        weight = 1.0  # validation refuses it; a stored one is read as the default
    counted = quota.parse(dict(q.status.used)) if used is None else dict(used)
    out = Member(
        f"{q.metadata.namespace}/{q.metadata.name}",
        q.metadata.namespace,
        hard,
        {},
        quota.parse(dict(q.spec.borrowing_limit)),
        weight,
    )
    return out.with_used(counted)


def totals(members: Iterable[Member]) -> tuple[Amounts, Amounts]:
    """(sum of hard, sum of used) over `members`, per resource."""
    hard: Amounts = {}
    used: Amounts = {}
    for m in members:
        for name, value in m.hard.items():
            hard[name] = hard.get(name, 0) + value
            used[name] = used.get(name, 0) + m.used.get(name, 0)
    return hard, used


def borrowed(m: Member) -> Amounts:
    """What `m` uses beyond its hard limits (zero entries left out)."""
    return quota.over(m.used, m.hard)


def shortfall(
    m: Member,
    members: Sequence[Member],
    delta: Mapping[str, int],
    cohort: str,
    summed: tuple[Amounts, Amounts] | None = None,
) -> list[str]:
    """What growing `m` by `delta` would exceed, as lines such as "team: 6 of 4 cpu used (may borrow 2), asks 1"
    and "cohort research: 10 of 10 cpu used, asks 1"; empty when it fits. `members` is the whole cohort (`m`
    among them, by key: `m`'s copy counts); `summed`, when given, is `totals(members)` with `m` as it is."""
    lines = []
    if summed is not None:
        cohort_hard, cohort_used = summed
    elif any(x.key == m.key for x in members):
        cohort_hard, cohort_used = totals(x if x.key != m.key else m for x in members)
    else:  # the caller's member is new to the cohort: count it too
        cohort_hard, cohort_used = totals([*members, m])
    for name, limit in sorted(m.hard.items()):
        grows = delta.get(name, 0)
        if grows <= 0:
            continue
        used = m.used.get(name, 0)
        ceiling = m.borrowing_limit.get(name)
        if ceiling is not None and used + grows > limit + ceiling:
            lines.append(
                f"{quota.show(name, used)} of {quota.show(name, limit)} {name} used "
                f"(may borrow {quota.show(name, ceiling)}), asks {quota.show(name, grows)}"
            )
        elif cohort_used.get(name, 0) + grows > cohort_hard.get(name, 0):
            lines.append(
                f"cohort {cohort}: {quota.show(name, cohort_used.get(name, 0))} of "
                f"{quota.show(name, cohort_hard.get(name, 0))} {name} used, asks {quota.show(name, grows)}"
            )
    return lines


def share(
    m: Member, members: Sequence[Member], extra: Mapping[str, int] | None = None, hard: Amounts | None = None
) -> float:
    """`m`'s weighted dominant resource share in its cohort, with `extra` added to its use (module docstring);
    `hard`, when given, is the cohort's total hard limits (`totals(members)[0]`)."""
    cohort_hard = hard if hard is not None else totals(members)[0]
    used = dict(m.used)
    for name, value in (extra or {}).items():
        if name in m.hard:
            used[name] = used.get(name, 0) + value
    dominant = 0.0
    for name, limit in m.hard.items():
        over = used.get(name, 0) - limit
        if over <= 0:
            continue
        total = cohort_hard.get(name, 0)
        dominant = max(dominant, over / total if total > 0 else math.inf)
    if dominant == 0.0:
        return 0.0
    return dominant / m.weight if m.weight > 0 else math.inf


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted project that reclaim may evict: its key, namespace, priority, creation time and usage."""

    key: str
    namespace: str
    priority: int
    created: float
    usage: Amounts


def fits_nominal(m: Member, delta: Mapping[str, int]) -> bool:
    """Does `m` stay within its own hard limits (no borrowing) when it grows by `delta`?"""
    return all(m.used.get(name, 0) + delta.get(name, 0) <= limit for name, limit in m.hard.items() if delta.get(name))


def _short(members: Mapping[str, Member], delta: Mapping[str, int], limited: Iterable[str]) -> Amounts:
    """How much the cohort lacks of each resource of `limited` to grow by `delta`."""
    hard, used = totals(members.values())
    out = {name: used.get(name, 0) + delta.get(name, 0) - hard.get(name, 0) for name in limited}
    return {name: value for name, value in out.items() if value > 0}


def victims(
    preemptor: Member,
    priority: int,
    delta: Mapping[str, int],
    members: Sequence[Member],
    candidates: Sequence[Candidate],
) -> list[Candidate] | None:
    """The fewest projects of borrowing members to evict so that `preemptor` (a member's namespace, waiting with a
    project of `priority` asking `delta`) fits its cohort; None when it cannot be done (it would itself borrow, or
    lower-priority borrowed work is not enough). Victims are taken lowest priority first, then newest, each only
    while its namespace still borrows a resource the cohort lacks; then those not needed after all are put back."""
    if not fits_nominal(preemptor, delta):
        return None
    state = {m.key: m for m in members}
    limited = [name for name in preemptor.hard if delta.get(name, 0) > 0]
    short = _short(state, delta, limited)
    if not short:
        return []
    by_namespace = {m.namespace: m.key for m in members}
    order = sorted(
        (c for c in candidates if c.priority < priority and c.namespace != preemptor.namespace),
        key=lambda c: (c.priority, -c.created, c.key),
    )
    taken: list[Candidate] = []
    for candidate in order:
        key = by_namespace.get(candidate.namespace)
        if key is None:
            continue
        lender = state[key]
        lends = borrowed(lender)
        if not any(lends.get(name, 0) > 0 and candidate.usage.get(name, 0) > 0 for name in short):
            continue
        state[key] = lender.with_used(_minus(lender.used, candidate.usage))
        taken.append(candidate)
        short = _short(state, delta, limited)
        if not short:
            break
    if short:
        return None
    for candidate in list(reversed(taken)):  # put back what is not needed after all
        key = by_namespace[candidate.namespace]
        trial = dict(state)
        trial[key] = state[key].with_used(_plus(state[key].used, candidate.usage))
        if not _short(trial, delta, limited):
            state = trial
            taken.remove(candidate)
    return taken


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    return {name: a.get(name, 0) - b.get(name, 0) for name in set(a) | set(b)}


def _plus(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    return {name: a.get(name, 0) + b.get(name, 0) for name in set(a) | set(b)}


__all__ = [
    "COHORT_KEY_PREFIX",
    "Candidate",
    "Member",
    "borrowed",
    "cohort_key",
    "fits_nominal",
    "member",
    "parse_weight",
    "share",
    "shortfall",
    "totals",
    "victims",
]
