"""The scale-up step of a pass: simulate, choose a group, record the decision, ask the provider, tell the projects.

One group grows per pass (the expander's choice); projects left over are considered again in the next pass, when
the nodes just asked for count as upcoming and absorb what fits on them. Projects no group could ever fit get a
Warning event `NotTriggerScaleUp` naming each group's reason, once per message.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import seconds
from caravanserai.controller import EventRecorder
from caravanserai.controllers.autoscaler import expanders, groupstatus, simulation
from caravanserai.controllers.autoscaler.packing import clone
from caravanserai.controllers.autoscaler.providers import ProviderError, Providers
from caravanserai.controllers.autoscaler.settings import GroupSettings, settings_of, template_node
from caravanserai.controllers.autoscaler.snapshot import Cluster
from caravanserai.controllers.scheduler.filters import FilterContext
from caravanserai.controllers.scheduler.snapshot import NodeInfo

log = structlog.get_logger(__name__)

NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def node_name(group: str) -> str:
    """`<group>-<5 random characters>`: a new node's name."""
    return f"{group}-{''.join(secrets.choice(NAME_SUFFIX_ALPHABET) for _ in range(5))}"


def room(group: v1.NodeGroup, now: float) -> int:
    """How many nodes `group` may still ask for now (0 while it backs off or is being deleted)."""
    status = group.status
    if group.metadata.HasField("deletion_timestamp"):
        return 0
    if status.backoff_until.seconds and seconds(status.backoff_until) > now:
        return 0
    return max(0, group.spec.max_size - status.desired)


def upcoming(
    group: v1.NodeGroup, settings: GroupSettings, cluster: Cluster, *, grace: float, now: float
) -> list[NodeInfo]:
    """Nodes of the group on their way: asked for (empty template nodes), or registered less than `grace` seconds
    ago (with what is bound there now, counted Ready: the scheduler may not have used them yet)."""
    found = [template_node(settings, p.name, now=now) for p in group.status.provisioning if p.name not in cluster.nodes]
    for name in cluster.group_nodes(group.metadata.name):
        created = seconds(cluster.node_objects[name].metadata.creation_timestamp)
        if now - created < grace:
            young = clone(cluster.nodes[name])
            young.renew_time = now  # as the template: its first heartbeat may not have arrived yet
            young.unschedulable = False
            if not young.allocatable:  # registered, its resources not reported yet: the template's
                young.allocatable = dict(settings.allocatable)
            found.append(young)
    return found


@dataclass(slots=True)
class ScaleUp:
    client: Client
    providers: Providers
    recorder: EventRecorder
    expander: str
    backoff: float
    new_node_grace: float
    rng: random.Random = field(default_factory=random.Random)
    _reported: dict[str, str] = field(default_factory=dict)  # project uid → the infeasible message last reported

    async def run(self, groups: Sequence[v1.NodeGroup], cluster: Cluster, ctx: FilterContext) -> v1.NodeGroup | None:
        """One scale-up decision over `groups` (module docstring); the group grown, if any."""
        if not cluster.unschedulable or not groups:
            return None
        settings = [settings_of(g) for g in groups]
        pending = cluster.pending
        on_the_way = [
            n
            for g, s in zip(groups, settings, strict=True)
            for n in upcoming(g, s, cluster, grace=self.new_node_grace, now=ctx.now)
        ]
        absorbed = simulation.absorb(pending, on_the_way, ctx)
        remaining = [p for p in pending if p.name not in absorbed]
        rejections = simulation.template_rejections(remaining, settings, ctx)
        hopeless = simulation.infeasible(rejections, settings)
        await self._report(cluster.unschedulable, hopeless)
        candidates = [p for p in remaining if p.name not in hopeless]
        rooms = {g.metadata.name: room(g, ctx.now) for g in groups}
        options = simulation.options(candidates, settings, rooms, rejections, ctx)
        chosen = expanders.choose(self.expander, options, self.rng)
        if chosen is None:
            return None
        group = next(g for g in groups if g.metadata.name == chosen.group)
        return await self._grow(group, chosen, cluster, ctx.now)

    async def _grow(
        self, group: v1.NodeGroup, option: simulation.GroupOption, cluster: Cluster, now: float
    ) -> v1.NodeGroup:
        names = [node_name(group.metadata.name) for _ in range(option.nodes)]
        count = len(option.projects)
        shown = ", ".join(option.projects[:10]) + (" …" if count > 10 else "")
        reason = f"{count} Pending project(s) fit on {option.nodes} new node(s): {shown}"
        before = group.status.desired
        mutate = groupstatus.record_scale_up(names, now=now, reason=reason, projects=option.projects)
        group = await groupstatus.write(self.client, group, mutate)  # recorded before it is acted on
        log.info("scale-up", group=group.metadata.name, nodes=names, projects=count)
        try:
            await self.providers.of(group).increase(group, names)
        except ProviderError as exc:
            await self.recorder.warning(group, "ScaleUpFailed", f"asking for {', '.join(names)}: {exc}")
            undo = groupstatus.forget_provisioning(names, backoff_until=now + self.backoff, now=now, why=str(exc))
            return await groupstatus.write(self.client, group, undo)
        group = await groupstatus.write(self.client, group, groupstatus.mark_created(names))
        message = f"triggered scale-up of group {group.metadata.name}: {before} → {before + len(names)}"
        await self.recorder.normal(group, "ScaledUp", f"{message} ({reason})")
        by_name = {meta.key_of(p): p for p in cluster.unschedulable}  # ProjectInfo names are keys
        for name in option.projects:
            await self.recorder.normal(by_name[name], "TriggeredScaleUp", message)
        return group

    async def _report(self, projects: Sequence[v1.Project], hopeless: dict[str, str]) -> None:
        for project in projects:
            why = hopeless.get(meta.key_of(project))
            if why is None or self._reported.get(project.metadata.uid) == why:
                continue
            self._reported[project.metadata.uid] = why
            await self.recorder.warning(project, "NotTriggerScaleUp", f"no node group can ever fit this project: {why}")
        live = {p.metadata.uid for p in projects}
        for uid in [u for u in self._reported if u not in live]:
            del self._reported[uid]


__all__ = ["ScaleUp", "node_name", "room", "upcoming"]
