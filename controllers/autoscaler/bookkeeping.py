"""The first step of each pass, per group: bring its status up to date with the cluster and the provider.

* A node asked for that has **registered** leaves `provisioning`; it gets the group's label, and the template's
  labels and taints that its agent did not set (a label the agent set is kept as it is: the apiserver lets the
  autoscaler add labels, never change them, `kinds.node.autoscaler_allows`).
* A node **recorded but not yet asked for** (the autoscaler stopped between the two) is asked for now, under the
  recorded name.
* A node that has **not registered within `registerTimeout`** is deleted through the provider, leaves
  `provisioning`, and the group backs off (`Backoff` condition) for the back-off time.
* `idle_since` follows which nodes are Ready, uncordoned and under the utilisation threshold; `current` counts the
  registered nodes; `desired` is current plus provisioning minus a removal under way.
* Machines the provider lists that are neither nodes nor being provisioned are reported (`UnknownNodes`
  condition, a Warning event when listed); they are never counted nor deleted, since the autoscaler did not make
  them. The provider is asked for its list every `list_interval` seconds (`--provider-list-interval`), not every
  pass: a cloud's list call is slow and rate-limited, and what it answers is judged again each pass against the
  nodes the cluster knows by then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.client.apply import modify
from caravanserai.clock import seconds, timestamp
from caravanserai.controller import EventRecorder
from caravanserai.controllers.autoscaler import groupstatus
from caravanserai.controllers.autoscaler.providers import ProviderError, ProviderNode, Providers
from caravanserai.controllers.autoscaler.scaledown import utilization
from caravanserai.controllers.autoscaler.settings import GroupSettings, settings_of
from caravanserai.controllers.autoscaler.snapshot import Cluster
from caravanserai.controllers.scheduler.filters import FilterContext, node_ready
from caravanserai.controllers.scheduler.snapshot import ProjectInfo
from caravanserai.errors import ApiError, NotFound

log = structlog.get_logger(__name__)

_NOBODY = ProjectInfo("")


@dataclass(frozen=True, slots=True)
class Bookkeeper:
    client: Client
    providers: Providers
    recorder: EventRecorder
    backoff: float
    list_interval: float = 60.0
    _listed: dict[str, tuple[float, list[ProviderNode] | None]] = field(default_factory=dict)  # group → (when, list)

    async def run(self, group: v1.NodeGroup, cluster: Cluster, ctx: FilterContext) -> v1.NodeGroup:
        """Bring `group`'s status up to date (module docstring); the stored group."""
        settings = settings_of(group)
        joined = [p.name for p in group.status.provisioning if p.name in cluster.nodes]
        for name in joined:
            cluster.join(name, group.metadata.name)
            await self._label(cluster.node_objects[name], settings)
        group = await self._act_on_recorded(group, cluster)
        group = await self._time_out(group, cluster, settings, ctx.now)
        unknown = await self._unknown(group, cluster, ctx.now)
        return await groupstatus.write(self.client, group, self._sizes(settings, cluster, ctx, joined, unknown))

    async def _label(self, node: v1.Node, settings: GroupSettings) -> None:
        """Give a joined node its group's labels and taints (what its agent did not set)."""

        def mutate(obj: v1.Node) -> bool:
            missing = {k: v for k, v in settings.labels.items() if k not in obj.metadata.labels}
            obj.metadata.labels.update(missing)
            have = {(t.key, t.value, t.effect) for t in obj.spec.taints}
            new = [t for t in settings.taints if (t.key, t.value, t.effect) not in have]
            for taint in new:
                obj.spec.taints.add(key=taint.key, value=taint.value, effect=taint.effect)
            return bool(missing or new)

        try:
            await modify(self.client.nodes, node.metadata.name, mutate, current=node)
        except NotFound:
            return
        except ApiError as exc:
            log.warning("could not label a joined node", node=node.metadata.name, error=str(exc))

    async def _act_on_recorded(self, group: v1.NodeGroup, cluster: Cluster) -> v1.NodeGroup:
        pending = [p.name for p in group.status.provisioning if not p.created and p.name not in cluster.nodes]
        if not pending:
            return group
        try:
            await self.providers.of(group).increase(group, pending)
        except ProviderError as exc:
            await self.recorder.warning(group, "ScaleUpFailed", str(exc))
            return group  # asked again next pass, until the register timeout gives up on them
        return await groupstatus.write(self.client, group, groupstatus.mark_created(pending))

    async def _time_out(
        self, group: v1.NodeGroup, cluster: Cluster, settings: GroupSettings, now: float
    ) -> v1.NodeGroup:
        late = [
            p.name
            for p in group.status.provisioning
            if p.name not in cluster.nodes and now - seconds(p.requested_at) > settings.register_timeout
        ]
        if not late:
            return group
        why = f"node(s) {', '.join(late)} did not register within {settings.register_timeout:g}s; deleted"
        try:
            await self.providers.of(group).delete(group, late)
        except ProviderError as exc:
            why += f" (the provider's delete failed: {exc})"
        await self.recorder.warning(group, "NodeNeverRegistered", why)
        mutate = groupstatus.forget_provisioning(late, backoff_until=now + self.backoff, now=now, why=why)
        return await groupstatus.write(self.client, group, mutate)

    async def _unknown(self, group: v1.NodeGroup, cluster: Cluster, now: float) -> list[str]:
        name = group.metadata.name
        when, listed = self._listed.get(name, (None, None))
        fresh = when is None or now - when >= self.list_interval or now < when
        if fresh:
            try:
                listed = await self.providers.of(group).list(group)
            except ProviderError as exc:
                log.warning("provider list failed", group=name, error=str(exc))
                listed = None
            self._listed[name] = (now, listed)
        if listed is None:
            return []
        asked = {p.name for p in group.status.provisioning}
        if group.status.HasField("removing"):
            asked.add(group.status.removing.node)
        unknown = sorted(n.name for n in listed if n.name not in cluster.nodes and n.name not in asked)
        if unknown and fresh:
            await self.recorder.warning(
                group, "UnknownNodes", f"the provider reports machines the cluster does not know: {', '.join(unknown)}"
            )
        return unknown

    def forget(self, names: set[str]) -> None:
        """Drop the listings of groups not in `names` (deleted)."""
        for name in [n for n in self._listed if n not in names]:
            del self._listed[name]

    @staticmethod
    def _sizes(
        settings: GroupSettings, cluster: Cluster, ctx: FilterContext, joined: list[str], unknown: list[str]
    ) -> groupstatus.Mutation:
        members = cluster.group_nodes(settings.name)

        def mutate(group: v1.NodeGroup) -> bool:
            status = group.status
            before = meta.copy(status)
            kept = [p for p in status.provisioning if p.name not in joined]
            del status.provisioning[:]
            status.provisioning.extend(kept)
            status.current = len(members)
            removing = 1 if status.HasField("removing") and status.removing.node in members else 0
            status.desired = len(members) + len(status.provisioning) - removing
            for name in list(status.idle_since):
                if name not in members:
                    del status.idle_since[name]
            for name in members:
                node = cluster.nodes[name]
                idle = (
                    not node.unschedulable
                    and node_ready(_NOBODY, node, ctx) is None
                    and utilization(node) < settings.utilization_threshold
                )
                if not idle:
                    status.idle_since.pop(name, None)
                elif name not in status.idle_since:
                    status.idle_since[name].CopyFrom(timestamp(ctx.now))
            if status.backoff_until.seconds and seconds(status.backoff_until) <= ctx.now:
                status.ClearField("backoff_until")
                meta.set_condition(
                    status.conditions, groupstatus.CONDITION_BACKOFF, v1.FALSE, reason="BackoffOver", now=ctx.now
                )
            message = (
                f"the provider reports machines the cluster does not know: {', '.join(unknown)}" if unknown else ""
            )
            meta.set_condition(
                status.conditions,
                groupstatus.CONDITION_UNKNOWN_NODES,
                v1.TRUE if unknown else v1.FALSE,
                reason="UnknownNodes" if unknown else "AllKnown",
                message=message,
                now=ctx.now,
            )
            status.observed_generation = group.metadata.generation
            return bool(status != before)

        return mutate


__all__ = ["Bookkeeper"]
