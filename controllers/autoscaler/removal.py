"""The scale-down step of a pass, per group: pick an idle node that is safe to remove (`scaledown`), record the
removal, cordon it, move its projects with the drain's hand-off (`client.nodeops.move_project`, the same call as
`caractrl drain`; a ProjectSet's replicas one disruption budget at a time, as a drain moves them), and once they
run elsewhere delete the Node and ask the provider to delete the machine.

A project bound to the node after the removal was decided wins the race: the removal is cancelled and the node
uncordoned. The apiserver enforces the last moment of that race too: the Node is deleted without force, which it
refuses while any project is bound there (read from etcd, not a cache), and the machine is deleted only after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client, budgets, nodeops
from caravanserai.clock import seconds
from caravanserai.controller import EventRecorder
from caravanserai.controllers.autoscaler import groupstatus
from caravanserai.controllers.autoscaler.providers import ProviderError, Providers
from caravanserai.controllers.autoscaler.scaledown import fit_elsewhere, idle_for, not_evictable, utilization
from caravanserai.controllers.autoscaler.settings import settings_of
from caravanserai.controllers.autoscaler.snapshot import Cluster, infos
from caravanserai.controllers.scheduler.filters import FilterContext, node_ready
from caravanserai.controllers.scheduler.snapshot import ProjectInfo, shown
from caravanserai.errors import FailedPrecondition, NotFound

log = structlog.get_logger(__name__)

REASON_SCALE_DOWN = "ScaleDown"
_NOBODY = ProjectInfo("")


@dataclass(frozen=True, slots=True)
class ScaleDown:
    client: Client
    providers: Providers
    recorder: EventRecorder
    handoff: float

    async def run(self, group: v1.NodeGroup, cluster: Cluster, ctx: FilterContext) -> None:
        """Continue the group's removal under way, or start one (module docstring)."""
        if not group.status.HasField("removing"):
            candidate = self._candidate(group, cluster, ctx)
            if candidate is None:
                return
            node, reason = candidate
            projects = sorted(meta.key_of(p) for p in cluster.bound_to(node))
            group = await groupstatus.write(self.client, group, groupstatus.record_removal(node, projects, now=ctx.now))
            await self.recorder.normal(group, "ScaleDown", f"removing node {node}: {reason}")
        await self._continue(group, ctx.now)

    def _candidate(self, group: v1.NodeGroup, cluster: Cluster, ctx: FilterContext) -> tuple[str, str] | None:
        settings = settings_of(group)
        members = cluster.group_nodes(group.metadata.name)
        if not settings.scale_down or len(members) <= settings.min_size or group.status.provisioning:
            return None
        idle = []
        for name in members:
            since = group.status.idle_since.get(name)
            if since is not None and idle_for(seconds(since), ctx.now) >= settings.idle_time:
                idle.append((utilization(cluster.nodes[name]), name))
        for _, name in sorted(idle):
            node = cluster.nodes[name]
            if node.unschedulable or node_ready(_NOBODY, node, ctx) is not None:
                continue
            bound = cluster.bound_to(name)
            blocked = not_evictable(bound) or fit_elsewhere(infos(bound), name, cluster.nodes, ctx)
            if blocked is not None:
                log.info("idle node kept", node=name, reason=blocked)
                continue
            share = f"{settings.utilization_threshold:.0%}"
            return name, f"under {share} utilisation for {settings.idle_time:g}s and its projects fit elsewhere"
        return None

    async def _continue(self, group: v1.NodeGroup, now: float) -> None:
        removal = group.status.removing
        node = removal.node
        with contextlib.suppress(NotFound):
            await nodeops.set_unschedulable(self.client, node, True)
        bound = [
            p
            for p in await self.client.projects.list(field_selector=f"status.nodeRef={node}")
            if p.status.phase in v1.BOUND_PHASES
        ]
        newcomers = [meta.key_of(p) for p in bound if meta.key_of(p) not in removal.projects]
        if newcomers:
            await self._cancel(
                group, f"project(s) {', '.join(map(shown, newcomers))} were bound to {node} meanwhile", now
            )
            return
        handoff_until = seconds(removal.started_at) + self.handoff
        message = (
            f"Node {node} is removed by the autoscaler (group {group.metadata.name}); placing the project elsewhere"
        )
        for name in sorted(meta.key_of(p) for p in bound if nodeops.movable_projects([p], node)):
            held = await budgets.held(self.client, name, now=now)
            if held:  # its set's disruption budget allows no disruption now: a later pass moves it
                log.info("scale-down move waits for a disruption budget", project=name, node=node, reason=held)
                continue
            await nodeops.move_project(
                self.client, name, node, now=now, handoff_until=handoff_until, reason=REASON_SCALE_DOWN, message=message
            )
        if bound or not await self._moved_projects_run(removal.projects, node, now < handoff_until):
            return  # next pass
        try:
            await self.client.nodes.delete(node)
        except NotFound:
            pass
        except FailedPrecondition as exc:  # a project was bound after all: the bind wins
            await self._cancel(group, str(exc), now)
            return
        try:
            await self.providers.of(group).delete(group, [node])
        except ProviderError as exc:
            await self.recorder.warning(group, "ScaleDownFailed", f"deleting node {node}: {exc}")
            return  # the removal stays recorded: asked again next pass
        with contextlib.suppress(NotFound, FailedPrecondition):
            await self.client.nodes.delete(node)  # its agent may have registered it again before it stopped
        reason = f"node {node} was idle; its projects moved"
        await groupstatus.write(
            self.client, group, groupstatus.finish_removal(node, now=now, reason=reason, removed=True)
        )
        await self.recorder.normal(group, "ScaledDown", f"removed node {node}")

    async def _moved_projects_run(self, names: Sequence[str], node: str, waiting: bool) -> bool:
        """Whether the moved projects run elsewhere (or are gone); always True once the hand-off is over."""
        if not waiting:
            return True
        for name in names:
            try:
                project = await self.client.projects.get(name)
            except NotFound:
                continue
            if project.status.phase in (v1.PENDING, v1.SCHEDULED):
                return False
        return True

    async def _cancel(self, group: v1.NodeGroup, why: str, now: float) -> None:
        node = group.status.removing.node
        with contextlib.suppress(NotFound):
            await nodeops.set_unschedulable(self.client, node, False)
        await groupstatus.write(
            self.client, group, groupstatus.finish_removal(node, now=now, reason=why, removed=False)
        )
        await self.recorder.normal(group, "ScaleDownCancelled", f"node {node} stays: {why}")
        log.info("scale-down cancelled", node=node, reason=why)


__all__ = ["REASON_SCALE_DOWN", "ScaleDown"]
