"""One namespace's quota queue (the key is the namespace), or one cohort's (the key is "cohort/<name>": every
namespace whose quota names the cohort, in one pass, `cohortplan`).

Guarantees:

* **Order.** Queued projects are tried by priority (highest first), then age (oldest first), then name. A
  project that does not fit is passed over for a smaller one behind it (Kueue's BestEffortFIFO); the apiserver
  judges each admission (Queued → Pending) against the quotas as stored, in the same transaction as the usage it
  adds, so two controllers or a restart never admit twice past a limit.
* **Counted from a snapshot.** Each pass recounts every quota of the namespace: the quota is read first (version
  Q), then the namespace's projects (a later snapshot), and the count is written with version Q. A write that
  changed the usage after Q also changed the quota, so a stale count is refused (Conflict) and counted again.
  This puts right a count the apiserver could not keep (projects created before their quota, a quota created at
  the same moment as a project).
* **Says why.** A project still queued carries, in its Phase condition, what it waits for and how many are ahead
  of it (written by a pass that admitted nothing, at most `EXPLAINED` projects a pass, the fronts of the queues
  first):
  "waiting for quota: team: 3500m of 4 cpu used, asks 1; 2 ahead in the queue" (in a cohort, what limits it: its
  borrowing limit, or "cohort research: 10 of 10 cpu used").
* **Cohorts.** A namespace whose quota names a cohort is left to the cohort's pass: admissions go by fair share
  between namespaces (`cohortplan`), and a waiting project that fits its own namespace's hard limits but not the
  cohort reclaims lower-priority borrowed work (`lifecycle.reclaim`: back to Queued, its quota released in the
  same write). The apiserver judges every admission again, so a plan made on a stale read never over-admits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Result
from caravanserai.controllers.queue.cohortplan import CohortPlan, Lane
from caravanserai.errors import Conflict, FailedPrecondition, NotFound
from caravanserai.project import cohorts, lifecycle, quota

log = structlog.get_logger(__name__)

RECOUNT_INTERVAL = 60.0
"""Seconds between two recounts of a namespace whose quotas and queue did not change."""
IN_FLIGHT = 8
"""Admissions of one cohort's pass sent at once: the apiserver takes a cohort's writes in turn, and having the next
ones there already keeps it busy instead of waiting for each reply to travel back and the next request to come."""
EXPLAINED = 100
"""How many waiting projects a pass explains at most (the fronts of the queues first): the message names the use
of the quota, which every admission changes, so explaining a long queue in full after each change would cost a
write per waiting project; projects further back are explained by later passes, or keep the reason they were
held back with."""
RECLAIM_DEADLINE = 300.0
"""Seconds a reclaimed project with backed-up volumes is given for its final backups before it is queued anyway."""


def queue_order(projects: Sequence[v1.Project]) -> list[v1.Project]:
    """Queued projects in the order they are admitted."""
    queued = [p for p in projects if p.status.phase == v1.QUEUED and not p.metadata.HasField("deletion_timestamp")]
    return sorted(
        queued, key=lambda p: (-p.spec.priority, p.metadata.creation_timestamp.ToNanoseconds(), p.metadata.name)
    )


def counted_use(projects: Sequence[v1.Project]) -> quota.Amounts:
    """What the namespace's counted projects use together."""
    total: quota.Amounts = {}
    for project in projects:
        for name, value in quota.charged(project).items():
            total[name] = total.get(name, 0) + value
    return total


def lacking(quotas: Sequence[v1.ResourceQuota], used: quota.Amounts, usage: quota.Amounts) -> list[str]:
    """What `usage` lacks against each quota, given the namespace's `used` (empty: it fits)."""
    lines = []
    for q in quotas:
        hard = quota.parse(dict(q.spec.hard))
        short = quota.shortfall(used, {k: v for k, v in usage.items() if k in hard}, hard)
        if short:
            lines.append(f"{q.metadata.name}: {'; '.join(short)}")
    return lines


class QueueReconciler:
    """Admit what fits, recount, say why the rest waits (module docstring)."""

    def __init__(self, client: Client, *, clock: Clock) -> None:
        self._client = client
        self._clock = clock

    async def reconcile(self, key: str) -> Result:
        if key.startswith(cohorts.COHORT_KEY_PREFIX):
            return await self._cohort(key.removeprefix(cohorts.COHORT_KEY_PREFIX))
        namespace = key
        quotas = list(await self._client.resource(v1.ResourceQuota).list(namespace=namespace))
        if any(q.spec.cohort for q in quotas):
            return Result()  # its cohort's pass admits its projects
        projects = list(await self._client.projects.list(namespace=namespace))
        try:
            await self._recount(quotas, projects)
        except Conflict:
            return Result(requeue_after=0.0)  # usage changed meanwhile: count again
        if not quotas:
            queued = queue_order(projects)
            for project in queued:  # the quota is gone: nothing holds them back
                await self._admit(project)
            return Result()
        used = counted_use(projects)
        waiting: list[tuple[v1.Project, list[str]]] = []
        admitted = False
        for project in queue_order(projects):
            missing = lacking(quotas, used, quota.usage(project))
            if missing:
                waiting.append((project, missing))
                continue
            if await self._admit(project):
                admitted = True
                for name, value in quota.usage(project).items():
                    used[name] = used.get(name, 0) + value
            else:
                return Result(requeue_after=0.0)  # the quota moved under us: look again
        if not admitted:
            await self._explain_all([waiting])
        return Result(requeue_after=RECOUNT_INTERVAL)

    async def _cohort(self, name: str) -> Result:
        """One pass over cohort `name` (module docstring)."""
        every = list(await self._client.resource(v1.ResourceQuota).list())
        namespaces = sorted({q.metadata.namespace for q in every if q.spec.cohort == name})
        lanes = []
        for namespace in namespaces:
            quotas = [q for q in every if q.metadata.namespace == namespace]
            projects = list(await self._client.projects.list(namespace=namespace))
            try:
                await self._recount(quotas, projects)
            except Conflict:
                return Result(requeue_after=0.0)
            holding = [p for p in projects if quota.counted(p)]
            lanes.append(Lane(namespace, quotas, counted_use(projects), queue_order(projects), holding))
        plan = CohortPlan(name, lanes)
        admitted = False
        while batch := self._next_batch(plan):
            done = await asyncio.gather(*(self._admit(project) for project in batch))
            if not all(done):
                return Result(requeue_after=0.0)  # a quota moved under us: look again
            admitted = True
        reclaimed = False
        for preemptor, victims in plan.reclaims():
            for victim in victims:
                reclaimed = await self._reclaim(victim, preemptor) or reclaimed
        if not admitted:
            await self._explain_all([lane.waiting for lane in plan.lanes.values()])
        return Result(requeue_after=0.0 if reclaimed else RECOUNT_INTERVAL)

    @staticmethod
    def _next_batch(plan: CohortPlan) -> list[v1.Project]:
        """Up to `IN_FLIGHT` next admissions of `plan`, counted in it as admitted: they fit together, so the order in
        which the apiserver takes them does not matter (each is judged there again)."""
        batch: list[v1.Project] = []
        while len(batch) < IN_FLIGHT and (project := plan.next_admission()) is not None:
            plan.admitted(project)
            batch.append(project)
        return batch

    async def _reclaim(self, victim: v1.Project, preemptor: v1.Project) -> bool:
        """Send `victim` back to the queue for `preemptor`; False when it changed meanwhile (the next pass sees)."""
        message = (
            f"namespace {victim.metadata.namespace} borrows from its cohort and namespace "
            f"{preemptor.metadata.namespace} needs its quota back"
        )
        now = self._clock.now()
        out = lifecycle.reclaim(
            victim, preemptor=meta.key_of(preemptor), message=message, now=now, deadline=now + RECLAIM_DEADLINE
        )
        try:
            await self._client.projects.update_status(out)
        except (FailedPrecondition, Conflict, NotFound) as exc:
            log.info("not reclaimed", project=meta.key_of(victim), reason=str(exc))
            return False
        log.info("reclaimed", project=meta.key_of(victim), preemptor=meta.key_of(preemptor))
        return True

    async def _recount(self, quotas: list[v1.ResourceQuota], projects: list[v1.Project]) -> None:
        """Write each quota's count from `projects` (listed after the quota was read) with the quota's version."""
        used = counted_use(projects)
        queued = sum(1 for p in projects if p.status.phase == v1.QUEUED)
        for index, q in enumerate(quotas):
            hard = quota.parse(dict(q.spec.hard))
            counted = quota.render(used, hard)
            if (
                dict(q.status.used) == counted
                and dict(q.status.hard) == dict(q.spec.hard)
                and q.status.queued == queued
                and dict(q.status.borrowed) == {k: quota.show(k, v) for k, v in quota.over(used, hard).items()}
            ):
                continue
            updated = meta.copy(q)
            updated.status.used.clear()
            updated.status.used.update(counted)
            updated.status.hard.clear()
            updated.status.hard.update(q.spec.hard)
            quota.set_borrowed(updated.status, used, hard)
            updated.status.queued = queued
            quotas[index] = await self._client.resource(v1.ResourceQuota).update_status(updated)

    async def _admit(self, project: v1.Project) -> bool:
        """Queued → Pending; False when the apiserver finds it no longer fits (or it changed)."""
        try:
            await self._client.projects.update_status(lifecycle.admit(project, now=self._clock.now()))
        except (FailedPrecondition, Conflict, NotFound) as exc:
            log.info("not admitted", project=meta.key_of(project), reason=str(exc))
            return False
        log.info("admitted", project=meta.key_of(project))
        return True

    async def _explain_all(self, queues: list[list[tuple[v1.Project, list[str]]]]) -> None:
        """Explain the waiting projects of `queues` (one list per namespace, in order), the front of every queue
        first, at most `EXPLAINED` writes (called only by a pass that admitted nothing: while the queue moves, the
        events of its admissions bring the pass that explains)."""
        fronts_first = sorted(
            ((ahead, index) for index, waiting in enumerate(queues) for ahead in range(len(waiting))),
        )
        written = 0
        for ahead, index in fronts_first:
            if written >= EXPLAINED:
                return
            project, missing = queues[index][ahead]
            written += await self._explain(project, missing, ahead)

    async def _explain(self, project: v1.Project, missing: list[str], ahead: int) -> bool:
        """Write why `project` waits unless it says so already; whether a write was made."""
        message = f"waiting for quota: {'; '.join(missing) or 'its turn'}; {ahead} ahead in the queue"
        condition = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
        if condition is not None and condition.message == message:
            return False
        with contextlib.suppress(Conflict, NotFound):  # changed or gone meanwhile: the next pass explains
            await self._client.projects.update_status(lifecycle.waiting(project, message, now=self._clock.now()))
        return True


__all__ = [
    "EXPLAINED",
    "IN_FLIGHT",
    "RECLAIM_DEADLINE",
    "RECOUNT_INTERVAL",
    "QueueReconciler",
    "counted_use",
    "lacking",
    "queue_order",
]
