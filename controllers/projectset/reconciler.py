"""The ProjectSet reconciler: one set per key.

    reconcile(set)
      1. the set from the cache; gone or being deleted → nothing (the garbage collector removes its replicas)
      2. its replicas (projects it controls, by owner uid; Terminated ones are gone already) as `plan.Replica`s on
         the injected clock
      3. a step pending from the last reconcile (`expectations`) → come back shortly
      4. plan (`plan.plan`) and act: create replicas (`templates.new_replica`), delete replicas
      5. the status for this snapshot (`progress.next_status`), written when it changed
      6. come back when a replica's minReadySeconds or the progress deadline is due

Guarantees:

* Level-based and idempotent: the key carries no event; a reconcile reads the cache and plans from scratch.
* A replica is created at most once per step: the next plan waits until the cache shows the step's writes.
* A failed rollout (`progress.failed`) replaces nothing until the template changes; it still scales (`plan.held`).
* A replica refused because its namespace is being deleted is not retried (the set is deleted with it).
* The status is written with the version read (compare-and-swap); a Conflict is retried on fresh state.
* Every create and delete step is an Event on the set (Normal; Warning when the deadline is exceeded).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock, seconds
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.projectset import progress
from caravanserai.controllers.projectset.expectations import Expectations
from caravanserai.controllers.projectset.plan import Replica, Step, plan
from caravanserai.controllers.projectset.templates import new_replica, random_suffix
from caravanserai.errors import AlreadyExists, FailedPrecondition, NotFound
from caravanserai.informer import CacheReader
from caravanserai.project import disruption, replicas

log = structlog.get_logger(__name__)

SET_INDEX, set_index = replicas.SET_INDEX, replicas.set_index  # the index of replicas by set (one home: replicas)
PENDING_RECHECK = 1.0


def replica_of(project: v1.Project, *, min_ready_seconds: int, now: float) -> tuple[Replica, float | None]:
    """The planner's view of `project`, and seconds until it becomes available (None: not waiting). The replica's
    name is the project's key (`meta.key_of`), so a step's deletions and expectations name keys."""
    available = replicas.availability(project, min_ready_seconds=min_ready_seconds, now=now)
    replica = Replica(
        name=meta.key_of(project),
        revision=project.metadata.labels.get(v1.TEMPLATE_HASH_LABEL, ""),
        created=seconds(project.metadata.creation_timestamp),
        scheduled=bool(project.status.node_ref),
        running=project.status.phase == v1.RUNNING,
        ready=replicas.is_ready(project),
        available=available.available,
        terminating=project.metadata.HasField("deletion_timestamp")
        or project.status.phase in (v1.TERMINATING, v1.TERMINATED),
    )
    return replica, available.wait


class ProjectSetReconciler:
    """Keeps each set's replicas at spec.replicas of its template, rolling from one revision to the next."""

    def __init__(
        self,
        client: Client,
        sets: CacheReader[v1.ProjectSet],
        projects: CacheReader[v1.Project],
        recorder: EventRecorder,
        *,
        clock: Clock,
        suffix: Callable[[], str] = random_suffix,
    ) -> None:
        self._client = client
        self._sets = sets
        self._projects = projects
        self._recorder = recorder
        self._clock = clock
        self._suffix = suffix
        self.expectations = Expectations()

    def owned(self, projectset: v1.ProjectSet) -> list[v1.Project]:
        """The cached projects `projectset` controls (its key — replicas live in the set's namespace — and uid)."""
        uid = projectset.metadata.uid
        return [
            p
            for p in self._projects.by_index(SET_INDEX, meta.key_of(projectset))
            if (ref := meta.controller_of(p)) is not None and ref.uid == uid
        ]

    def _active(self, key: str) -> bool:
        project = self._projects.get(key)
        return project is not None and not project.metadata.HasField("deletion_timestamp")

    async def reconcile(self, key: str) -> Result:
        projectset = self._sets.get(key)
        if projectset is None or projectset.metadata.HasField("deletion_timestamp"):
            self.expectations.forget(key)
            return Result()
        now = self._clock.now()
        if self.expectations.pending(key, self._active, now=now):
            return Result(requeue_after=PENDING_RECHECK)
        owned = [p for p in self.owned(projectset) if p.status.phase != v1.TERMINATED]
        seen = [replica_of(p, min_ready_seconds=projectset.spec.min_ready_seconds, now=now) for p in owned]
        snapshot = [replica for replica, _ in seen]
        revision = replicas.template_hash(projectset.spec.template)
        step = plan(
            snapshot,
            desired=replicas.replicas_of(projectset.spec),
            revision=revision,
            strategy=projectset.spec.strategy.type,
            bounds=replicas.rolling_bounds(projectset.spec),
            paused=projectset.spec.paused,
            current=projectset.status.current_revision,
            hold=progress.failed(projectset.status, revision),
        )
        if not step.empty:
            await self._act(projectset, step, now)
        status_due = await self._write_status(projectset, snapshot, owned, revision=revision, now=now)
        waits = [w for _, w in seen if w is not None] + ([status_due] if status_due is not None else [])
        return Result(requeue_after=min(waits) if waits else None)

    async def _act(self, projectset: v1.ProjectSet, step: Step, now: float) -> None:
        """Create and delete the step's replicas (concurrently), then expect them in the cache."""
        wanted = [new_replica(projectset, step.revision, suffix=self._suffix()) for _ in range(step.create)]
        async with asyncio.TaskGroup() as group:
            creates = [group.create_task(self._create(project)) for project in wanted]
            for name in step.delete:
                group.create_task(self._delete(name))
        made = [project for project, task in zip(wanted, creates, strict=True) if task.result()]
        created = [meta.key_of(p) for p in made]
        self.expectations.expect(meta.key_of(projectset), created=created, deleted=step.delete, now=now)
        log.info("replicas", projectset=meta.key_of(projectset), created=created, deleted=list(step.delete))
        if created:
            await self._recorder.normal(
                projectset,
                "ReplicasCreated",
                f"created {len(created)} of revision {step.revision}: " + ", ".join(p.metadata.name for p in made),
            )
        if step.delete:
            deleted = ", ".join(meta.split_key(key)[1] for key in step.delete)
            await self._recorder.normal(projectset, "ReplicasDeleted", "deleted " + deleted)

    async def _create(self, project: v1.Project) -> bool:
        """Create a replica; False when its namespace is being deleted (FailedPrecondition: the set goes with it, so
        nothing is retried or expected)."""
        try:
            await self._client.projects.create(project)
        except AlreadyExists:  # a retried create whose first reply was lost
            pass
        except FailedPrecondition as exc:
            log.info("replica not created", project=meta.key_of(project), reason=str(exc))
            return False
        return True

    async def _delete(self, key: str) -> None:
        with contextlib.suppress(NotFound):
            await self._client.projects.delete(key)

    async def _write_status(
        self,
        projectset: v1.ProjectSet,
        snapshot: Sequence[Replica],
        owned: Sequence[v1.Project],
        *,
        revision: str,
        now: float,
    ) -> float | None:
        """Write the set's status when it changed; seconds until the progress deadline is due."""
        allowed = disruption.disruptions_allowed(projectset, owned, now=now)
        status, due = progress.next_status(
            projectset, snapshot, revision=revision, disruptions_allowed=allowed, now=now
        )
        if status == projectset.status:
            return due
        updated = meta.copy(projectset)
        updated.status.CopyFrom(status)
        await self._client.projectsets.update_status(updated)
        if progress.failed(status, revision) and not progress.failed(projectset.status, revision):
            condition = meta.get_condition(status.conditions, v1.CONDITION_PROGRESSING)
            await self._recorder.warning(
                projectset, v1.REASON_PROGRESS_DEADLINE_EXCEEDED, condition.message if condition else ""
            )
        return due


__all__ = ["PENDING_RECHECK", "SET_INDEX", "ProjectSetReconciler", "replica_of", "set_index"]
