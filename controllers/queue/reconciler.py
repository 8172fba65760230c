"""One namespace's quota queue (the key is the namespace).

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
  of it: "waiting for quota: team: 3500m of 4 cpu used, asks 1; 2 ahead in the queue".
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import Result
from caravanserai.errors import Conflict, FailedPrecondition, NotFound
from caravanserai.project import lifecycle, quota

log = structlog.get_logger(__name__)

RECOUNT_INTERVAL = 60.0
"""Seconds between two recounts of a namespace whose quotas and queue did not change."""


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
        namespace = key
        quotas = list(await self._client.resource(v1.ResourceQuota).list(namespace=namespace))
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
        for project in queue_order(projects):
            missing = lacking(quotas, used, quota.usage(project))
            if missing:
                waiting.append((project, missing))
                continue
            if await self._admit(project):
                for name, value in quota.usage(project).items():
                    used[name] = used.get(name, 0) + value
            else:
                return Result(requeue_after=0.0)  # the quota moved under us: look again
        for ahead, (project, missing) in enumerate(waiting):
            await self._explain(project, missing, ahead)
        return Result(requeue_after=RECOUNT_INTERVAL)

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
            ):
                continue
            updated = meta.copy(q)
            updated.status.used.clear()
            updated.status.used.update(counted)
            updated.status.hard.clear()
            updated.status.hard.update(q.spec.hard)
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

    async def _explain(self, project: v1.Project, missing: list[str], ahead: int) -> None:
        message = f"waiting for quota: {'; '.join(missing) or 'its turn'}; {ahead} ahead in the queue"
        condition = meta.get_condition(project.status.conditions, v1.CONDITION_PHASE)
        if condition is not None and condition.message == message:
            return
        try:
            await self._client.projects.update_status(lifecycle.waiting(project, message, now=self._clock.now()))
        except (Conflict, NotFound):
            return


__all__ = ["RECOUNT_INTERVAL", "QueueReconciler", "counted_use", "lacking", "queue_order"]
