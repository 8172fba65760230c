"""The garbage collector's reconciler: one project per key ("namespace/name").

    reconcile(project)
      1. plan on the cached state; nothing due → done, or come back when it is      (policy.plan)
      2. confirm with live reads: the project as stored now, and for an orphan that
         its node is really gone (a Get, not the cache)                            (_confirm)
      3. act on the live version with a compare-and-swap                            (_act)

Guarantees:

* Nothing is deleted or unbound on the cache's word: the project is read live and re-planned, and a node is
  declared gone only when a live Get answers NotFound.
* Every write names the version just read (Delete with resource_version, UpdateStatus), so a project changed
  meanwhile is never acted on blindly: the Conflict is retried on fresh state.
* Deadlines (terminated delay, expire_at) requeue the key for exactly the time left.
"""

from __future__ import annotations

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.gc.policy import GCConfig, GCStep, Verdict, may_be_orphan, plan
from caravanserai.errors import NotFound
from caravanserai.informer import CacheReader
from caravanserai.project import lifecycle

log = structlog.get_logger(__name__)

REASON_NODE_DELETED = "NodeDeleted"
REASON_EXPIRED = "Expired"
REASON_SUCCEEDED_TTL = "SucceededTTLExpired"


class GCReconciler:
    """Deletes finished and expired projects and rescues those bound to deleted nodes. See the module docstring."""

    def __init__(
        self,
        client: Client,
        projects: CacheReader[v1.Project],
        nodes: CacheReader[v1.Node],
        recorder: EventRecorder,
        *,
        clock: Clock,
        config: GCConfig = GCConfig(),
    ) -> None:
        self._client = client
        self._projects = projects
        self._nodes = nodes
        self._recorder = recorder
        self._clock = clock
        self.config = config
        self.actions: dict[Verdict, int] = {}  # what this replica did, by verdict

    async def reconcile(self, key: str) -> Result:
        cached = self._projects.get(key)
        if cached is None:
            return Result()
        now = self._clock.now()
        step = plan(cached, node_exists=self._node_cached(cached), config=self.config)
        if step.verdict is Verdict.KEEP:
            return Result()
        if step.due > now:
            return Result(requeue_after=step.due - now)
        confirmed = await self._confirm(key, cached)
        if confirmed is None:
            return Result()
        live, step = confirmed
        if step.due > now:
            return Result(requeue_after=step.due - now)
        await self._act(live, step, now)
        return Result()

    def _node_cached(self, project: v1.Project) -> bool:
        return not may_be_orphan(project) or self._nodes.get(project.status.node_ref) is not None

    async def _confirm(self, key: str, cached: v1.Project) -> tuple[v1.Project, GCStep] | None:
        """The project as stored now and its step re-planned on it; None when there is nothing left to do."""
        try:
            live = await self._client.projects.get(key)
        except NotFound:
            return None
        if live.metadata.uid != cached.metadata.uid:
            return None  # deleted and created again: the new one has its own events
        node_exists = not may_be_orphan(live) or await self._node_exists(live.status.node_ref)
        step = plan(live, node_exists=node_exists, config=self.config)
        return None if step.verdict is Verdict.KEEP else (live, step)

    async def _node_exists(self, name: str) -> bool:
        """A live read: the cache may simply not have seen a new node yet."""
        try:
            await self._client.nodes.get(name)
        except NotFound:
            return False
        return True

    async def _act(self, project: v1.Project, step: GCStep, now: float) -> None:
        name, node = meta.key_of(project), project.status.node_ref
        verdict = step.verdict
        if verdict is Verdict.DELETE_TERMINATED:
            await self._delete(project)
        elif verdict is Verdict.DELETE_SUCCEEDED:
            await self._recorder.normal(
                project, REASON_SUCCEEDED_TTL, "Succeeded longer than --succeeded-ttl; deleting"
            )
            await self._delete(project)
        elif verdict is Verdict.EXPIRE:
            await self._recorder.normal(project, REASON_EXPIRED, "spec.expireAt has passed; deleting the project")
            await self._delete(project)
        else:
            message = f"Node {node} no longer exists"
            if verdict is Verdict.FINISH_ORPHAN:
                updated = lifecycle.terminate(
                    project, reason=REASON_NODE_DELETED, message=f"{message}; nothing is left to stop", now=now
                )
            else:
                updated = lifecycle.return_to_pending(
                    project, reason=REASON_NODE_DELETED, message=f"{message}; returned to Pending", now=now
                )
            stored = await self._client.projects.update_status(updated)
            await self._recorder.warning(
                stored, REASON_NODE_DELETED, f"{message}; project is now {stored.status.phase}"
            )
        self.actions[verdict] = self.actions.get(verdict, 0) + 1
        log.info("collected", project=name, action=verdict.value, node=node or None)

    async def _delete(self, project: v1.Project) -> None:
        try:
            await self._client.projects.delete(meta.key_of(project), resource_version=project.metadata.resource_version)
        except NotFound:
            return


__all__ = ["GCReconciler", "REASON_EXPIRED", "REASON_NODE_DELETED", "REASON_SUCCEEDED_TTL"]
