"""The scheduler's reconciler: each wake-up places the most urgent Pending project.

    reconcile(key)
      1. hand back projects whose unconfirmed bind timed out          (_retry_expired_assumptions)
      2. the key's own project may be due (its retry delay ran out)   (_wake_key)
      3. pop the most urgent waiting project (priority, then age)     (active.pop; _keep_awake)
      4. decide: filter a sample of nodes, score, pick                (_decide)
      5. bind it (assume first, then a compare-and-swap UpdateStatus  (_bind)
         that also records the estimates for the chosen node and the runner-up, `estimates.py`,
         and their scores by plugin, `explain.py`, also told in the Scheduled event)
         or, when nothing fits, preempt lower-priority projects       (preemption/preemptor.py)
         or report why nothing fits and retry after a backoff         (_report_unschedulable)
      6. note the binding's Scheduled event, which `boundevents.py` writes off this path

Keys are wake-ups (see `active.py`): a decision is for the most urgent project waiting, which is not necessarily
the key. Every decision runs without awaiting between reading the state and assuming the binding, so decisions
made by concurrent workers never see the same free capacity twice; only the writes run concurrently.

Guarantees:

* A project is bound only by a compare-and-swap on the version the decision was made on: a stale decision
  fails with Conflict and the project is decided again on fresh state (never written blindly).
* **Pipelined binds** (kube-scheduler's assume + asynchronous bind): bound requests count on the node from the
  moment of the decision (the assumed ledger in `cache.py`), so while up to `--scheduler-workers` binds are in
  flight the next decisions already see their resources taken and never overcommit a node.
* **Every bind outcome settles its assumption.** Written: counted as assumed until the informer shows the
  binding, then as bound. Refused (NotFound, FailedPrecondition, Invalid: nothing was written): forgotten at
  once, the project retried after its backoff. Conflict (another write came first): ended when the informer
  shows that newer version, and the project, if still Pending, is decided again at once on it. Unknown
  (timeout, unavailable, cancelled: the write may have landed): kept for `assume_ttl` unless the informer
  settles it first, the project retried after its backoff.
* An Unschedulable verdict is written only when its message changed (with one aggregated FailedScheduling
  Warning event); the project is retried after 1 s, 2 s … at most 30 s, and at once when the cluster changes in
  a way that may let it fit (handlers call `wake_all_pending`, or `wake_fitting` when room was only freed on some
  nodes: then a project that fits on none of them, and whose rules read no other project, waits for its retry).
* **Decisions only while leading.** Capacity is read from the cache, not from the objects a bind writes, so the
  project's compare-and-swap alone does not stop a replica that was paused past its lease from filling a node
  the new leader has filled meanwhile: each decision first asks `leading()` (the lease renewed within its
  deadline, by the monotonic clock) and, when not, leaves the project for the next leader.
* `Failed` and bound projects are never touched, nor projects being deleted; a project is only ever moved
  Pending → Scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import Clock, seconds
from caravanserai.controller import EventRecorder, Result
from caravanserai.controllers.scheduler import conditions, estimates, explain
from caravanserai.controllers.scheduler.active import (
    DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF,
    ActiveProjects,
    RetryBackoff,
)
from caravanserai.controllers.scheduler.algorithm import Decision, Diagnosis, Policy, schedule
from caravanserai.controllers.scheduler.boundevents import BoundEvents, scheduled_message
from caravanserai.controllers.scheduler.cache import DEFAULT_ASSUME_TTL, Assumption, ClusterState
from caravanserai.controllers.scheduler.filters import DEFAULT_HEARTBEAT_TIMEOUT, FilterContext, first_rejection
from caravanserai.controllers.scheduler.preemption.preemptor import Preemptor
from caravanserai.controllers.scheduler.preemption.whatif import whatif_checks
from caravanserai.controllers.scheduler.snapshot import ProjectInfo, project_info
from caravanserai.errors import ApiError, Conflict, FailedPrecondition, Invalid, NotFound
from caravanserai.informer import PHASE_INDEX, CacheReader
from caravanserai.project.decisions import scores_text
from caravanserai.workqueue import WorkQueue

log = structlog.get_logger(__name__)

WAKE_CHECK_NODES = 64
"""Past this many freed nodes at once, `wake_fitting` wakes every Pending project instead of checking them."""


def waits_for_node(project: v1.Project) -> bool:
    """Whether the scheduler should place `project`: Pending and not being deleted (a project with a
    deletionTimestamp, kept by a finalizer, is never bound)."""
    return project.status.phase == v1.PENDING and not project.metadata.HasField("deletion_timestamp")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Tunables: the decision policy, the heartbeat timeout of the Ready filter, retry backoff, assume TTL."""

    policy: Policy = Policy()
    heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT
    initial_backoff: float = DEFAULT_INITIAL_BACKOFF
    max_backoff: float = DEFAULT_MAX_BACKOFF
    assume_ttl: float = DEFAULT_ASSUME_TTL


class SchedulerReconciler:
    """Places Pending projects on nodes. See the module docstring."""

    def __init__(
        self,
        client: Client,
        projects: CacheReader[v1.Project],
        state: ClusterState,
        queue: WorkQueue[str],
        recorder: EventRecorder,
        *,
        clock: Clock,
        config: SchedulerConfig = SchedulerConfig(),
        bound_events: BoundEvents | None = None,
        leading: Callable[[], bool] = lambda: True,
        preemptor: Preemptor | None = None,
    ) -> None:
        self._preemptor = preemptor  # None: never preempts
        self._client = client
        self._leading = leading  # whether this replica may still act as leader (Manager.leading)
        self._projects = projects
        self.state = state
        self._queue = queue
        self._recorder = recorder
        # Where a binding's Scheduled event goes to be written off the binding's path (None: written here).
        self._bound_events = bound_events
        self._clock = clock
        self.config = config
        self.active = ActiveProjects()
        self.backoff = RetryBackoff(config.initial_backoff, config.max_backoff)
        self.bound = 0  # bindings written by this replica

    # ---- wake-ups (called by the informer handlers) ----------------------------------------------------------

    def wake(self, project: v1.Project) -> None:
        """Ask for a decision on `project` soon, if it is Pending and not already being bound."""
        if self._activate(project):
            self._queue.add(meta.key_of(project))

    def _activate(self, project: v1.Project) -> bool:
        """Let `project` wait for a decision (in priority order); False when it needs none."""
        name = meta.key_of(project)
        if not waits_for_node(project) or self.state.is_assumed(name):
            return False
        self.active.add(name, priority=project.spec.priority, created=seconds(project.metadata.creation_timestamp))
        return True

    def wake_all_pending(self) -> None:
        """The cluster changed in a way that may let waiting projects fit: try every Pending project again. Those
        already waiting for a decision (their priority is kept current by their own updates) are passed over
        without reading them from the cache: a relist of 20,000 nodes, delivered in many turns of the event loop,
        asks for this once per turn while 40,000 projects wait."""
        for project in self._asleep():
            self.wake(project)

    def _asleep(self) -> Iterator[v1.Project]:
        """The Pending projects that wait for no decision now (not queued, not assumed bound)."""
        active, is_assumed, projects = self.active, self.state.is_assumed, self._projects
        for name in projects.keys_by_index(PHASE_INDEX, v1.PENDING):
            if name not in active and not is_assumed(name):
                project = projects.get(name)
                if project is not None:
                    yield project

    def wake_fitting(self, nodes: Collection[str]) -> None:
        """Room was released on `nodes`, and nothing else changed: wake the Pending projects that pass every filter
        on one of them now, and those whose placement rules read other projects (they may fit elsewhere too). The
        others could not fit anywhere new; they are tried again when their retry delay runs out. More than
        `WAKE_CHECK_NODES` nodes at once (a relist): every Pending project."""
        if len(nodes) > WAKE_CHECK_NODES:
            self.wake_all_pending()
            return
        infos = [info for info in map(self.state.node, sorted(nodes)) if info is not None]
        ctx, filters = self._context(), self.config.policy.filters
        for project in self._asleep():
            if not waits_for_node(project):
                continue  # being deleted: waits for nothing
            info = project_info(project)  # filters only: no image sizes needed
            if info.placement.inter_project or any(first_rejection(info, n, ctx, filters) is None for n in infos):
                self.wake(project)

    def settle(self, project: v1.Project) -> None:
        """`project` left Pending or was deleted: it waits for nothing any more."""
        self.active.discard(meta.key_of(project))
        self.backoff.reset(meta.key_of(project))

    # ---- reconcile --------------------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        self._retry_expired_assumptions()
        self._wake_key(key)
        name = self.active.pop()
        if name is None:
            return Result()
        self._keep_awake()
        project = self._projects.get(name)
        if project is None or not waits_for_node(project) or self.state.is_assumed(name):
            return Result()
        if not self._leading():
            self._retry_later(name)  # paused past the lease: this cache may be behind the next leader's binds
            log.info("not deciding: the lease is not renewed within its deadline", project=name)
            return Result()
        try:
            info = project_info(project, self.state.image_sizes)
            decision = self._decide(info)
            if decision.node is None:
                assert decision.diagnosis is not None
                await self._not_placed(project, info, decision.diagnosis)
            else:
                await self._bind(project, info, decision)
        except Exception:
            self._retry_later(name)  # whatever failed, this project is tried again
            raise
        return Result()

    def _retry_expired_assumptions(self) -> None:
        for name in self.state.expired(self._clock.monotonic()):
            project = self._projects.get(name)
            if project is not None:
                self.wake(project)

    def _wake_key(self, key: str) -> None:
        """The key's own project waits with the others if it is due (its retry delay ran out; a wake-up for a
        project another wake-up already tried is stale). The key being handled is its wake-up: nothing is added
        to the queue."""
        project = self._projects.get(key)
        if project is not None and self.backoff.due(key, now=self._clock.monotonic()):
            self._activate(project)

    def _keep_awake(self) -> None:
        """Projects still waiting always have a wake-up queued (adds of a queued key collapse)."""
        following = self.active.peek()
        if following is not None:
            self._queue.add(following)

    def _decide(self, info: ProjectInfo) -> Decision:
        nodes = self.state.nodes()
        start = self.state.next_start % len(nodes) if nodes else 0
        decision = schedule(info, nodes, self._context(), start=start, policy=self.config.policy)
        if nodes:
            self.state.next_start = (start + decision.visited) % len(nodes)
        return decision

    async def _bind(self, project: v1.Project, info: ProjectInfo, decision: Decision) -> None:
        """Assume, then write the binding; an unconfirmed outcome keeps the assumption for `assume_ttl`."""
        assert decision.node is not None
        name, node = info.name, decision.node
        placement = estimates.placement(info, decision, self.state.node)
        policy, topology = self.config.policy, self.state.topology
        scores = explain.placement_scores(info, decision, self.state.node, policy=policy, topology=topology)
        bound = conditions.bound(project, node, now=self._clock.now(), placement=placement, scores=scores)
        assumption = self.state.assume(info, node)  # after the explanation: it changes the counts explained
        self.backoff.reset(name)
        try:
            stored = await self._client.projects.update_status(bound)
        except (NotFound, FailedPrecondition, Invalid) as exc:
            self.state.forget(assumption)  # refused: nothing was written, the node's share is free again at once
            self._retry_later(name)  # tried again after the backoff if it still waits (gone: nothing happens)
            log.info("bind refused", project=name, node=node, error=str(exc))
            return
        except Conflict:
            self._unconfirmed(assumption)  # the informer will show the newer version; that decides
            log.debug("bind conflict; deciding again on fresh state", project=name, node=node)
            return
        except BaseException:
            self._unconfirmed(assumption)
            raise
        self.bound += 1
        log.info("bound", project=name, node=node, score=round(decision.score, 1), feasible=decision.feasible)
        message = None if placement is None else estimates.bound_message(placement, info.needs.shortest_every)
        if scores is not None:
            message = f"{message or scheduled_message(project.metadata.name, node)}. Scores: {scores_text(scores)}"
        if self._bound_events is not None:
            self._bound_events.note(stored, node, message)
        else:
            plain = scheduled_message(project.metadata.name, node)
            await self._recorder.normal(stored, conditions.EVENT_SCHEDULED, message or plain)

    def _unconfirmed(self, assumption: Assumption) -> None:
        ttl = self.config.assume_ttl
        self.state.expire_later(assumption, now=self._clock.monotonic(), ttl=ttl)
        self._queue.add_after(assumption.project, ttl)

    def _context(self) -> FilterContext:
        return FilterContext(
            now=self._clock.now(), heartbeat_timeout=self.config.heartbeat_timeout, topology=self.state.topology
        )

    async def _not_placed(self, project: v1.Project, info: ProjectInfo, diagnosis: Diagnosis) -> None:
        """No node fits: preempt (then wait for the room), or report why not and retry later."""
        note = ""
        if self._preemptor is not None:
            checks = whatif_checks(info, self.config.policy.filters, self._context())
            attempt = await self._preemptor.attempt(project, info, diagnosis, self._context(), checks)
            if attempt.handled:
                self._retry_later(info.name)
                return
            note = attempt.note
        await self._report_unschedulable(project, diagnosis, note)

    async def _report_unschedulable(self, project: v1.Project, diagnosis: Diagnosis, note: str = "") -> None:
        """Write the Unschedulable verdict when it changed (plus one Warning event), then retry later."""
        name = meta.key_of(project)
        message = f"{diagnosis.message()} {note}" if note else diagnosis.message()

        self._retry_later(name)
        updated = conditions.unschedulable(project, message, now=self._clock.now())
        if updated is None:
            return
        log.info("unschedulable", project=name, reason=message)
        try:
            await self._client.projects.update_status(updated)
        except ApiError as exc:  # retried after the backoff, on the state then current
            log.info("could not record unschedulable verdict", project=name, error=str(exc))
            return
        await self._recorder.warning(project, conditions.EVENT_FAILED_SCHEDULING, message)

    def _retry_later(self, name: str) -> None:
        self._queue.add_after(name, self.backoff.next_delay(name, now=self._clock.monotonic()))


__all__ = ["SchedulerConfig", "SchedulerReconciler", "waits_for_node"]
