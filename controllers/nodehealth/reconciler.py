"""The node health reconciler: one node per key.

    reconcile(node)
      1. Ready? the Lease's age on the clock                       (heartbeat_deadline, is_ready)
      2. record state and Ready condition when they change (+Event) (_record_state)
      3. Ready: remove NotReadyAt from its projects; come back exactly at the heartbeat deadline
         NotReady: stamp, evict or wait, per project (policy.plan_project), behind the brakes;
                   come back when the next step is due            (_handle_projects)

Guarantees:

* NotReady is written at the heartbeat deadline, never before: a Ready node is requeued for exactly
  `deadline − now`, and Lease renewals move the deadline (a renewal of a NotReady node's Lease wakes it at
  once).
* Every write is a compare-and-swap on the cached object; a Conflict is retried (rate limited) on fresh state.
* Evictions (Pending again, forced Terminated) wait for the start-up grace after `start()` and stop while more
  than the threshold of nodes are NotReady; the brake engaging and releasing is logged and recorded as an Event
  on the node that noticed it. Stamping and clearing NotReadyAt are observations, never braked.
"""

from __future__ import annotations

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.nodehealth import conditions
from caravanserai.controllers.nodehealth.policy import (
    HealthAction,
    HealthConfig,
    HealthStep,
    braked,
    grace_of,
    heartbeat_deadline,
    is_ready,
    outage_start,
    plan_project,
    unhealthy_fraction,
)
from caravanserai.informer import NODE_REF_INDEX, CacheReader
from caravanserai.text.durations import format_duration

log = structlog.get_logger(__name__)

BRAKE_RECHECK = 5.0  # seconds between looks while evictions are held back
FRACTION_CACHE = 1.0  # seconds an unhealthy-fraction count is reused


class NodeHealthReconciler:
    """Keeps nodes' Ready state in step with their Leases and moves work off dead nodes. See the module
    docstring."""

    def __init__(
        self,
        client: Client,
        nodes: CacheReader[v1.Node],
        leases: CacheReader[v1.Lease],
        projects: CacheReader[v1.Project],
        recorder: EventRecorder,
        *,
        clock: Clock,
        config: HealthConfig = HealthConfig(),
    ) -> None:
        self._client = client
        self._nodes = nodes
        self._leases = leases
        self._projects = projects
        self._recorder = recorder
        self._clock = clock
        self.config = config
        self.started_at: float | None = None  # monotonic time this replica started acting (leading)
        self.braked = False
        self._fraction: tuple[float, float] | None = None  # (monotonic time counted, fraction)
        self.evictions = 0  # projects evicted by this replica

    def start(self) -> None:
        """This replica starts acting (start-up or newly leading): the start-up grace begins now."""
        self.started_at = self._clock.monotonic()
        self._fraction = None

    async def reconcile(self, key: str) -> Result:
        node = self._nodes.get(key)
        if node is None:
            return Result()  # deleted: its projects are the garbage collector's business
        if self.started_at is None:
            self.start()
        now = self._clock.now()
        deadline = heartbeat_deadline(node, self._leases.get(key), self.config)
        ready = is_ready(deadline, now)
        node = await self._record_state(node, ready, now)
        if ready:
            await self._clear_not_ready_at(key)
            return Result(requeue_after=deadline - now)
        return Result(requeue_after=await self._handle_projects(node, now))

    async def _record_state(self, node: v1.Node, ready: bool, now: float) -> v1.Node:
        updated = conditions.node_marked(node, ready=ready, now=now, heartbeat_timeout=self.config.heartbeat_timeout)
        if updated is None:
            return node
        stored = await self._client.nodes.update_status(updated)
        name = node.metadata.name
        if ready:
            log.info("node ready", node=name)
            await self._recorder.normal(stored, "NodeReady", f"Node {name} is Ready: its Lease is renewed again")
        else:
            timeout = format_duration(self.config.heartbeat_timeout)
            log.warning("node not ready", node=name, heartbeat_timeout=self.config.heartbeat_timeout)
            await self._recorder.warning(stored, "NodeNotReady", f"Node {name} is NotReady: no heartbeat for {timeout}")
        return stored

    async def _clear_not_ready_at(self, node: str) -> None:
        for project in self._projects.by_index(NODE_REF_INDEX, node):
            cleared = conditions.project_cleared(project)
            if cleared is None:
                continue
            stored = await self._client.projects.update_status(cleared)
            log.info("node recovered within the grace period; NotReadyAt removed", project=meta.key_of(project))
            await self._recorder.normal(stored, "NodeRecovered", f"Node {node} recovered; the project stays on it")

    async def _handle_projects(self, node: v1.Node, now: float) -> float | None:
        """Stamp, evict or wait for each project on the NotReady node; seconds until the next step is due."""
        name = node.metadata.name
        outage = outage_start(node, now)
        next_due: float | None = None
        for project in self._projects.by_index(NODE_REF_INDEX, name):
            step = plan_project(project, node_ready=False, outage=outage, config=self.config)
            due = await self._take_step(project, name, step, outage, now)
            if due is not None:
                next_due = due if next_due is None else min(next_due, due)
        return None if next_due is None else max(0.0, next_due - now)

    async def _take_step(
        self, project: v1.Project, node: str, step: HealthStep, outage: float, now: float
    ) -> float | None:
        """Do `step` if it is due and allowed; the time to look again, or None when nothing is left to do."""
        if step.action is HealthAction.NONE:
            return None
        if step.action is HealthAction.STAMP_NOT_READY_AT:
            grace = grace_of(project, self.config) or 0.0  # STAMP is planned only for a grace that ends
            stamped = conditions.project_stamped(project, node=node, outage=outage, grace_period=grace)
            stored = await self._client.projects.update_status(stamped)
            await self._recorder.warning(
                stored,
                "NodeNotReady",
                f"Node {node} is NotReady; the project moves elsewhere after {format_duration(grace)}",
            )
            return outage + grace
        if step.due > now:
            return step.due
        held = await self._evictions_held(node, now)
        if held is not None:
            return held
        await self._evict(project, node, step, now)
        return None

    async def _evict(self, project: v1.Project, node: str, step: HealthStep, now: float) -> None:
        name = meta.key_of(project)
        if step.action is HealthAction.FORCE_TERMINATED:
            timeout = self.config.terminating_timeout
            updated = conditions.project_terminated(project, node=node, now=now, terminating_timeout=timeout)
            reason = conditions.REASON_TERMINATION_TIMEOUT
        else:
            updated = conditions.project_evicted(project, node=node, now=now)
            reason = conditions.REASON_NODE_NOT_READY
        stored = await self._client.projects.update_status(updated)
        self.evictions += 1
        log.warning("evicted", project=name, node=node, phase=stored.status.phase, reason=reason)
        phase = meta.get_condition(stored.status.conditions, v1.CONDITION_PHASE)
        await self._recorder.warning(stored, reason, phase.message if phase is not None else reason)

    async def _evictions_held(self, node: str, now: float) -> float | None:
        """None when evictions may proceed; otherwise when to look again (start-up grace, mass-failure brake)."""
        assert self.started_at is not None
        remaining = self.started_at + self.config.startup_grace_period - self._clock.monotonic()
        if remaining > 0:
            return now + remaining
        fraction = self._unhealthy_fraction(now)
        stop = braked(fraction, self.config)
        if stop != self.braked:
            await self._brake_changed(stop, node, fraction)
        return now + BRAKE_RECHECK if stop else None

    def _unhealthy_fraction(self, now: float) -> float:
        mono = self._clock.monotonic()
        if self._fraction is not None and mono - self._fraction[0] < FRACTION_CACHE:
            return self._fraction[1]
        deadlines = (heartbeat_deadline(n, self._leases.get(n.metadata.name), self.config) for n in self._nodes.list())
        fraction = unhealthy_fraction(deadlines, now)
        self._fraction = (mono, fraction)
        return fraction

    async def _brake_changed(self, stop: bool, node: str, fraction: float) -> None:
        self.braked = stop
        share = f"{fraction:.0%} of nodes are NotReady"
        threshold = f"{self.config.unhealthy_threshold:.0%}"
        cached = self._nodes.get(node)
        if stop:
            message = (
                f"Evictions stopped: {share} (more than {threshold}); that many silent nodes point at the control "
                "plane or the network, not at the nodes"
            )
            log.error("evictions stopped", unhealthy=round(fraction, 3), threshold=self.config.unhealthy_threshold)
            if cached is not None:
                await self._recorder.warning(cached, "EvictionsStopped", message)
        else:
            log.warning("evictions resumed", unhealthy=round(fraction, 3))
            if cached is not None:
                await self._recorder.normal(cached, "EvictionsResumed", f"Evictions resumed: {share}")


__all__ = ["BRAKE_RECHECK", "NodeHealthReconciler"]
