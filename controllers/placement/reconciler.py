"""The placement reconciler: one project per key.

    reconcile(project)
      1. plan on the cached state (policy.plan); nothing due → done, or come back when it is
      2. read the project live and plan again (never act on the cache's word)
      3. write the step with a compare-and-swap: a bound project moved off its node (lifecycle.move: back to
         Pending, with a hand-off for taint evictions, or, with backed-up volumes, bound with `status.move` until
         its node hands the final snapshots over), a finished one back to Pending (lifecycle.return_to_pending),
         a TaintedAt stamp or its removal, or the confirmed scheduledGeneration

Guarantees:

* Every write names the version just read; a Conflict is retried (rate limited) on fresh state.
* A project with a deletionTimestamp is never moved (the policy and, again, the apiserver's lifecycle check); a
  project already moving (`status.move`) is left to its node.
* A project without backed-up volumes moves exactly as before `lifecycle.move` existed: NodeNoLongerEligible
  without a hand-off (the old containers are of the old spec), TaintEviction with one.
* Every move is recorded as an Event on the project (Warning for evictions, Normal for a changed spec).
"""

from __future__ import annotations

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.placement.policy import CONDITION_TAINTED_AT, PlacementAction, PlacementStep, plan
from caravanserai.controllers.scheduler.resources import Resources, add_into, project_requests
from caravanserai.errors import NotFound
from caravanserai.informer import NODE_REF_INDEX, CacheReader
from caravanserai.project import lifecycle

log = structlog.get_logger(__name__)


class PlacementReconciler:
    """Moves projects whose node no longer takes them and returns changed finished projects to Pending."""

    def __init__(
        self,
        client: Client,
        projects: CacheReader[v1.Project],
        nodes: CacheReader[v1.Node],
        recorder: EventRecorder,
        *,
        clock: Clock,
        handoff_timeout: float = lifecycle.DEFAULT_HANDOFF,
    ) -> None:
        self._client = client
        self._projects = projects
        self._nodes = nodes
        self._recorder = recorder
        self._clock = clock
        self.handoff_timeout = handoff_timeout
        self.moves = 0

    def _plan(self, project: v1.Project, now: float) -> PlacementStep:
        node = self._nodes.get(project.status.node_ref) if project.status.node_ref else None
        return plan(project, node, others_requested=self._others_requested(project), now=now)

    def _others_requested(self, project: v1.Project) -> Resources:
        """Requests of the other projects bound to the project's node."""
        total: Resources = {}
        if not project.status.node_ref:
            return total
        for other in self._projects.by_index(NODE_REF_INDEX, project.status.node_ref):
            if meta.key_of(other) != meta.key_of(project) and other.status.phase in v1.BOUND_PHASES:
                add_into(total, project_requests(other))
        return total

    async def reconcile(self, key: str) -> Result:
        cached = self._projects.get(key)
        if cached is None:
            return Result()
        now = self._clock.now()
        step = self._plan(cached, now)
        if step.action is PlacementAction.NONE:
            return Result()
        if step.due > now:
            return Result(requeue_after=step.due - now)
        try:
            live = await self._client.projects.get(key)
        except NotFound:
            return Result()
        step = self._plan(live, now)
        if step.action is PlacementAction.NONE or step.due > now:
            return Result(requeue_after=step.due - now if step.action is not PlacementAction.NONE else None)
        return Result(requeue_after=await self._act(live, step, now))

    def _moved(self, project: v1.Project, step: PlacementStep, now: float) -> v1.Project:
        """The project after a TO_PENDING step: a bound project is moved off its node (`lifecycle.move`, which
        keeps one with backed-up volumes bound until its node hands over the final snapshots); a finished one, or
        one without backed-up volumes and without a hand-off, goes back to Pending at once."""
        until = now + self.handoff_timeout
        if project.status.phase in (v1.SCHEDULED, v1.RUNNING):
            return lifecycle.move(
                project,
                reason=step.reason,
                message=step.message,
                now=now,
                handoff_until=until,
                keep_old_copy=step.handoff,
            )
        return lifecycle.return_to_pending(
            project, reason=step.reason, message=step.message, now=now, handoff_until=until if step.handoff else None
        )

    async def _act(self, project: v1.Project, step: PlacementStep, now: float) -> float | None:
        """Write `step`; seconds after which to look again (a stamped taint's deadline), else None."""
        name = meta.key_of(project)
        if step.action is PlacementAction.TO_PENDING:
            moved = self._moved(project, step, now)
            meta.remove_condition(moved.status.conditions, CONDITION_TAINTED_AT)
            stored = await self._client.projects.update_status(moved)
            self.moves += 1
            log.warning("moved", project=name, node=project.status.node_ref, reason=step.reason)
            if step.reason == lifecycle.REASON_SPEC_CHANGED:
                await self._recorder.normal(stored, step.reason, step.message)
            else:
                await self._recorder.warning(stored, step.reason, step.message)
            return None
        updated = meta.copy(project)
        if step.action is PlacementAction.STAMP_TAINTED:
            meta.set_condition(
                updated.status.conditions,
                CONDITION_TAINTED_AT,
                v1.TRUE,
                reason=step.reason,
                message=step.message,
                now=now,
            )
            stored = await self._client.projects.update_status(updated)
            await self._recorder.warning(stored, step.reason, step.message)
            again = self._plan(stored, now)
            return max(0.0, again.due - now) if again.action is PlacementAction.TO_PENDING else None
        if step.action is PlacementAction.CLEAR_TAINTED:
            meta.remove_condition(updated.status.conditions, CONDITION_TAINTED_AT)
        elif step.action is PlacementAction.CONFIRM:
            updated.status.scheduled_generation = project.metadata.generation
        await self._client.projects.update_status(updated)
        return None


__all__ = ["PlacementReconciler"]
