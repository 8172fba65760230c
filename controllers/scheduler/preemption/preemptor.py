"""The scheduler's preemption step, taken when a Pending project fits on no node.

    attempt(project)
      1. never for `preemptionPolicy: Never`, nor for a project no node can ever take (infeasible)
      2. already nominated and its victims still leaving that node → wait (nothing written)
      3. choose the node and the smallest victim set (`victims.choose`) among projects whose eviction keeps their
         ProjectSet's disruption budget (`budgets`); none → not handled (Unschedulable)
      4. nominate: keep the room on that node for it now (`ClusterState.nominate`), then write the project
         Pending with `nominatedNodeName` and the explanation (victims and why them), plus a `Preempting` event
      5. evict each victim with the move every mover uses (`nodeops.preempt_project` → `lifecycle.preempt`: no
         hand-off, a `Preempted` condition and a Warning `Preempted` event naming the preemptor)

Guarantees:

* **Bound only once the room is free.** Preemption never binds. The project waits Pending; the victims' requests
  and ports stop counting on the node when the informer shows them unbound (a victim with backed-up volumes only
  after its node took the final backups), which wakes the project, and the next decision binds it like any other.
  Meanwhile the nomination keeps projects of lower or equal priority off that room (`nominated.py`).
* **Nothing twice.** Victims are marked leaving before the first await, so no other decision picks them; a
  project waits while victims below its priority are still leaving its nominated node (kube-scheduler's rule), so
  one shortage never evicts twice.
* **Undone when not written.** If the nomination cannot be written, the room and the marks are given back and the
  project is retried after its backoff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from caravanserai import v1
from caravanserai.client import Client, nodeops
from caravanserai.clock import Clock
from caravanserai.controller import EventRecorder
from caravanserai.controllers.scheduler import conditions
from caravanserai.controllers.scheduler.algorithm import Diagnosis
from caravanserai.controllers.scheduler.cache import ClusterState
from caravanserai.controllers.scheduler.filters import FilterContext, FilterFunc
from caravanserai.controllers.scheduler.nominated import Nominee
from caravanserai.controllers.scheduler.preemption.budgets import Budgets
from caravanserai.controllers.scheduler.preemption.index import BoundProjects, Candidate
from caravanserai.controllers.scheduler.preemption.victims import Choice, choose
from caravanserai.controllers.scheduler.snapshot import ProjectInfo, shown
from caravanserai.errors import ApiError

log = structlog.get_logger(__name__)

DEFAULT_PREEMPTION_GRACE = 60.0
"""Seconds a victim with backed-up volumes has for its final backups before it moves without them."""
EVENT_PREEMPTING = "Preempting"
EVENT_PREEMPTED = "Preempted"
NOT_ALLOWED = "Preemption: not allowed (preemptionPolicy Never)."
NO_ROOM = "Preemption: evicting projects of lower priority would not make room on any node."


@dataclass(frozen=True, slots=True)
class Attempt:
    """What a preemption attempt did: `handled` (nominated, or waiting for victims to leave: nothing else to
    report), else `note`, a sentence the Unschedulable message gains ("" for none)."""

    handled: bool
    note: str = ""


def explain(choice: Choice) -> str:
    """Why these victims, in one sentence."""
    names = ", ".join(f"project {victim}" for victim in choice.victims)
    count = len(choice.victims)
    return (
        f"Preempting on node {choice.node}: evicting {names}. The fewest projects of lower priority ({count}) whose "
        f"eviction lets it pass every filter there, of {choice.nodes} node(s) where eviction could make room "
        "(fewest, then lowest priority, then newest)."
    )


def victim_message(preemptor: ProjectInfo, node: str) -> str:
    return f"to make room for project {shown(preemptor.name)} (priority {preemptor.priority}) on node {node}"


class Preemptor:
    """See the module docstring. `preempted` counts the nominations this replica wrote."""

    def __init__(
        self,
        client: Client,
        state: ClusterState,
        bound: BoundProjects,
        recorder: EventRecorder,
        *,
        clock: Clock,
        grace: float = DEFAULT_PREEMPTION_GRACE,
        budgets: Budgets | None = None,
    ) -> None:
        self._client = client
        self._state = state
        self._bound = bound
        self._recorder = recorder
        self._clock = clock
        self.grace = grace
        self._budgets = budgets
        self.preempted = 0

    async def attempt(
        self,
        project: v1.Project,
        info: ProjectInfo,
        diagnosis: Diagnosis,
        ctx: FilterContext,
        checks: Sequence[FilterFunc],
    ) -> Attempt:
        if info.preemption_policy == v1.PREEMPT_NEVER:
            return Attempt(False, NOT_ALLOWED if diagnosis.infeasible < diagnosis.total else "")
        if diagnosis.total == 0 or diagnosis.infeasible == diagnosis.total:
            return Attempt(False)
        nominated = self._state.nominated_node(info.name)
        if nominated and self._bound.leaving_below(nominated, info.priority):
            log.debug("waiting for victims to leave", project=info.name, node=nominated)
            return Attempt(True)
        guarded = None if self._budgets is None else self._budgets.guard(self._bound)
        view = self._bound if guarded is None or not guarded.protected else guarded  # no wrapper when none is
        choice = choose(info, self._state.nodes(), view, ctx, checks)
        if choice is None:  # nothing of lower priority could free enough anywhere: the usual message says it all
            return Attempt(False)
        if not choice.node:
            return Attempt(False, NO_ROOM)

        if not await self._nominate(project, info, diagnosis, choice):
            return Attempt(True)
        await self._evict(info, choice)
        return Attempt(True)

    async def _nominate(self, project: v1.Project, info: ProjectInfo, diagnosis: Diagnosis, choice: Choice) -> bool:
        """Keep the room and mark the victims, then write the nomination; False (all undone) when not written."""
        for victim in choice.victims:
            self._bound.mark_leaving(victim.name)
        self._state.nominate(Nominee(info.name, info.priority, dict(info.requests), info.host_ports), choice.node)
        reason = explain(choice)
        updated = conditions.nominated(project, choice.node, f"{diagnosis.message()} {reason}", now=self._clock.now())
        try:
            stored = await self._client.projects.update_status(updated)
        except ApiError as exc:
            self._undo(info, choice.victims)
            log.info("could not write the nomination", project=info.name, node=choice.node, error=str(exc))
            return False
        except BaseException:
            self._undo(info, choice.victims)
            raise
        self.preempted += 1
        log.info("preempting", project=info.name, node=choice.node, victims=[v.name for v in choice.victims])
        await self._recorder.normal(stored, EVENT_PREEMPTING, reason)
        return True

    def _undo(self, info: ProjectInfo, victims: Sequence[Candidate]) -> None:
        self._state.unnominate(info.name)
        for victim in victims:
            self._bound.unmark(victim)

    async def _evict(self, info: ProjectInfo, choice: Choice) -> None:
        """Evict every victim (each on its own: one that fails is given back and chosen afresh if still needed)."""
        message = victim_message(info, choice.node)
        now = self._clock.now()
        for victim in choice.victims:
            try:
                evicted = await nodeops.preempt_project(
                    self._client,
                    victim.name,
                    choice.node,
                    preemptor=shown(info.name),
                    message=message,
                    now=now,
                    deadline=now + self.grace,
                )
            except ApiError as exc:
                self._bound.unmark(victim)
                log.warning("could not evict", project=victim.name, preemptor=info.name, error=str(exc))
                continue
            if evicted is not None:
                await self._recorder.warning(
                    evicted, EVENT_PREEMPTED, f"Preempted by project {shown(info.name)}: {message}"
                )


__all__ = [
    "Attempt",
    "DEFAULT_PREEMPTION_GRACE",
    "EVENT_PREEMPTED",
    "EVENT_PREEMPTING",
    "NOT_ALLOWED",
    "NO_ROOM",
    "Preemptor",
    "explain",
    "victim_message",
]
