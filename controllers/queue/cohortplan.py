"""One cohort's queues as a plan, without I/O: who fits, who is admitted next, what to reclaim
(`project.cohorts` holds the arithmetic).

Guarantees:

* **Order within a namespace**: priority (highest first), then age, then name (`reconciler.queue_order`); a
  project that does not fit is passed over for one behind it (BestEffortFIFO).
* **Order between namespaces**: of the namespaces whose next project fits, the one whose weighted dominant
  resource share *after* admitting it is lowest goes first (ties: higher priority, then older), so lenders take
  back their own before borrowers borrow more, and borrowers share what is left by weight.
* **Reclaim** is planned for the first waiting project of each namespace that fits its own hard limits but not the
  cohort: victims from borrowing namespaces, of lower priority (`cohorts.victims`); projects already being
  reclaimed count as freed, so a slow move never makes a second round of victims.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from caravanserai import meta, v1
from caravanserai.project import cohorts, lifecycle, quota
from caravanserai.project.quota import Amounts


@dataclass(slots=True)
class Lane:
    """One namespace of the cohort: its quotas, what its counted projects use, its queue (in order)."""

    namespace: str
    quotas: list[v1.ResourceQuota]
    used: Amounts
    queue: list[v1.Project]
    admitted: list[v1.Project] = field(default_factory=list)  # counted projects (reclaim candidates)
    position: int = 0
    waiting: list[tuple[v1.Project, list[str]]] = field(default_factory=list)


class CohortPlan:
    """The state of one pass over cohort `name`: lanes by namespace, members by quota key, kept in step as
    projects are admitted (`admitted`) or reclaimed (`reclaimed`)."""

    def __init__(self, name: str, lanes: Sequence[Lane]) -> None:
        self.name = name
        self.lanes = {lane.namespace: lane for lane in lanes}
        self._plain: dict[str, list[tuple[str, Amounts]]] = {}  # namespace → (quota name, hard) outside the cohort
        self.members: dict[str, cohorts.Member] = {}
        self._keys: dict[str, list[str]] = {}  # namespace → its member keys
        self._usage: dict[str, Amounts] = {}  # project key → quota.usage, read once a pass
        self._summed: tuple[Amounts, Amounts] | None = None  # cohorts.totals of the members, until one changes
        for lane in lanes:
            for q in lane.quotas:
                if q.spec.cohort == name:
                    m = cohorts.member(q, lane.used)
                    self.members[m.key] = m
                    self._keys.setdefault(lane.namespace, []).append(m.key)
                else:
                    self._plain.setdefault(lane.namespace, []).append((q.metadata.name, quota.parse(dict(q.spec.hard))))

    def usage(self, project: v1.Project) -> Amounts:
        """`quota.usage(project)`, computed once a pass."""
        key = meta.key_of(project)
        found = self._usage.get(key)
        if found is None:
            found = self._usage[key] = quota.usage(project)
        return found

    def _totals(self) -> tuple[Amounts, Amounts]:
        if self._summed is None:
            self._summed = cohorts.totals(self.members.values())
        return self._summed

    def missing(self, namespace: str, usage: Amounts) -> list[str]:
        """What `usage` added to `namespace` lacks, one line per quota (empty: it fits)."""
        lane = self.lanes[namespace]
        lines = []
        for name, hard in self._plain.get(namespace, []):
            short = quota.shortfall(lane.used, {k: v for k, v in usage.items() if k in hard}, hard)
            if short:
                lines.append(f"{name}: {'; '.join(short)}")
        everyone = list(self.members.values())
        summed = self._totals()
        for key in self._keys.get(namespace, []):
            m = self.members[key]
            limited = {k: v for k, v in usage.items() if k in m.hard}
            short = cohorts.shortfall(m, everyone, limited, self.name, summed)
            if short:
                lines.append(f"{meta.split_key(key)[1]}: {'; '.join(short)}")
        return lines

    def share(self, namespace: str, usage: Amounts) -> float:
        """The namespace's weighted dominant resource share once `usage` is added (its largest over its members)."""
        everyone, hard = list(self.members.values()), self._totals()[0]
        keys = self._keys.get(namespace, [])
        return max((cohorts.share(self.members[k], everyone, usage, hard) for k in keys), default=0)

    def next_admission(self) -> v1.Project | None:
        """The next project to admit (module docstring), each lane's passed-over projects recorded as waiting;
        None when nothing else fits."""
        best: tuple[tuple[float, int, int, str], v1.Project] | None = None
        for lane in self.lanes.values():
            while lane.position < len(lane.queue):
                head = lane.queue[lane.position]
                missing = self.missing(lane.namespace, self.usage(head))
                if not missing:
                    break
                lane.waiting.append((head, missing))
                lane.position += 1
            else:
                continue
            head = lane.queue[lane.position]
            rank = (
                self.share(lane.namespace, self.usage(head)),
                -head.spec.priority,
                head.metadata.creation_timestamp.ToNanoseconds(),
                meta.key_of(head),
            )
            if best is None or rank < best[0]:
                best = (rank, head)
        return best[1] if best is not None else None

    def admitted(self, project: v1.Project) -> None:
        """Count `project` (the head of its lane) as admitted."""
        lane = self.lanes[project.metadata.namespace]
        lane.position += 1
        lane.admitted.append(project)
        self._add(lane, self.usage(project), +1)

    def _add(self, lane: Lane, usage: Amounts, sign: int) -> None:
        for name, value in usage.items():
            lane.used[name] = lane.used.get(name, 0) + sign * value
        for key in self._keys.get(lane.namespace, []):
            self.members[key] = self.members[key].with_used(lane.used)
        self._summed = None

    def reclaims(self) -> list[tuple[v1.Project, list[v1.Project]]]:
        """For the first waiting project of each namespace, by priority: the projects to reclaim for it (only those
        for which a set of victims exists). The plan counts the victims as freed as it goes."""
        self._free_moving()
        heads = [lane.waiting[0][0] for lane in self.lanes.values() if lane.waiting]
        heads.sort(key=lambda p: (-p.spec.priority, p.metadata.creation_timestamp.ToNanoseconds()))
        out = []
        for head in heads:
            namespace = head.metadata.namespace
            usage = self.usage(head)
            if self._lacks_plain(namespace, usage):
                continue
            victims = self._victims(namespace, head, usage)
            if not victims:
                continue
            by_key = {meta.key_of(p): p for lane in self.lanes.values() for p in lane.admitted}
            chosen = [by_key[c.key] for c in victims]
            for project in chosen:
                lane = self.lanes[project.metadata.namespace]
                lane.admitted.remove(project)
                self._add(lane, self.usage(project), -1)
            out.append((head, chosen))
        return out

    def _lacks_plain(self, namespace: str, usage: Amounts) -> bool:
        lane = self.lanes[namespace]
        return any(
            quota.shortfall(lane.used, {k: v for k, v in usage.items() if k in hard}, hard)
            for _, hard in self._plain.get(namespace, [])
        )

    def _victims(self, namespace: str, head: v1.Project, usage: Amounts) -> list[cohorts.Candidate]:
        candidates = [
            cohorts.Candidate(
                meta.key_of(p),
                p.metadata.namespace,
                p.spec.priority,
                p.metadata.creation_timestamp.ToNanoseconds() / 1e9,
                self.usage(p),
            )
            for lane in self.lanes.values()
            for p in lane.admitted
            if not p.metadata.HasField("deletion_timestamp") and not p.status.HasField("move")  # not leaving
        ]
        everyone = list(self.members.values())
        for key in self._keys.get(namespace, []):
            m = self.members[key]
            found = cohorts.victims(m, head.spec.priority, usage, everyone, candidates)
            if found:
                return found
        return []

    def _free_moving(self) -> None:
        """Projects already on their way back to the queue (a reclaim's move) count as freed, and are no victims."""
        for lane in self.lanes.values():
            for project in list(lane.admitted):
                if project.status.move.reason == lifecycle.REASON_QUOTA_RECLAIMED:
                    lane.admitted.remove(project)
                    self._add(lane, self.usage(project), -1)


__all__ = ["CohortPlan", "Lane"]
